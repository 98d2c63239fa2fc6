/**
 * Client of `dsh/api/completion` (served by the dsh jupyter-server extension): the server's defaults, and a
 * completion streamed as JSON lines. Aborting the signal closes the request, which the server sees and
 * answers by cancelling the model's request.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { apiError } from './api.js';
import { CompletionMode } from './inline_rules.js';

/** What `GET dsh/api/completion` says the page should default to. */
export interface ICompletionDefaults {
  enabled: boolean;
  debounceMs: number;
}

/** One cell above the cursor's, as the request carries it. */
export interface ICellAbove {
  kind: string;
  source: string;
  outputs: string;
}

/** The body of `POST dsh/api/completion`. */
export interface ICompletionBody {
  requestId: string;
  language: string;
  mode: CompletionMode;
  prefix: string;
  suffix: string;
  cells: ICellAbove[];
  variables: { name: string; type: string }[];
}

function completionUrl(settings: ServerConnection.ISettings): string {
  return URLExt.join(settings.baseUrl, 'dsh', 'api', 'completion');
}

/** The server's completion defaults; `null` when it does not answer (no dsh server extension) in time. */
export async function fetchCompletionDefaults(
  settings: ServerConnection.ISettings,
  timeoutMs = 3000
): Promise<ICompletionDefaults | null> {
  const controller = new AbortController();
  const timer = window.setTimeout(() => controller.abort(), timeoutMs);
  try {
    const response = await ServerConnection.makeRequest(
      completionUrl(settings),
      { method: 'GET', signal: controller.signal },
      settings
    );
    if (!response.ok) {
      return null;
    }
    const body = await response.json();
    return {
      enabled: body?.enabled === true,
      debounceMs: typeof body?.debounceMs === 'number' ? body.debounceMs : 300
    };
  } catch {
    return null;
  } finally {
    window.clearTimeout(timer);
  }
}

/** One line of the streamed answer. */
export type CompletionEvent =
  | { kind: 'text'; text: string }
  | { kind: 'done'; cached: boolean }
  | { kind: 'error'; message: string };

function parseEvent(line: string): CompletionEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  const event = value as Record<string, unknown> | null;
  if (!event || typeof event !== 'object') {
    return null;
  }
  if (typeof event.text === 'string') {
    return { kind: 'text', text: event.text };
  }
  if (event.done === true) {
    return { kind: 'done', cached: event.cached === true };
  }
  const error = event.error as Record<string, unknown> | undefined;
  if (error && typeof error.message === 'string') {
    return { kind: 'error', message: error.message };
  }
  return null;
}

/**
 * Ask for a completion; yields its pieces as they stream. Throws {@link DshApiError} for a refusal (400,
 * 429, 502) and the fetch's `AbortError` when `signal` aborts.
 */
export async function* streamCompletion(
  body: ICompletionBody,
  settings: ServerConnection.ISettings,
  signal: AbortSignal
): AsyncGenerator<CompletionEvent> {
  const response = await ServerConnection.makeRequest(
    completionUrl(settings),
    {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'Content-Type': 'application/json' },
      signal
    },
    settings
  );
  if (!response.ok) {
    throw await apiError(response);
  }
  if (!response.body) {
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let held = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      held += decoder.decode(value, { stream: !done });
      const lines = held.split('\n');
      held = done ? '' : (lines.pop() ?? '');
      for (const line of lines) {
        const event = line.trim() ? parseEvent(line) : null;
        if (event) {
          yield event;
        }
      }
      if (done) {
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
