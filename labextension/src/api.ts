/**
 * Client of the dsh jupyter-server extension (`<base_url>dsh/api/…`, read-only GET endpoints).
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** One session a prompt may reference, as `dsh/api/candidates` returns it. */
export interface ISessionCandidate {
  sessionId: string;
  label: string;
  cwd?: string;
  sameWorkspace: boolean;
  createdAt: number;
  /** The notebook the session was made in, when the server knows it. */
  notebook?: string;
  /** The canonical `@[label](dsh-session:…)` mention to insert. */
  mention: string;
}

/** Options of {@link fetchCandidates}. */
export interface ICandidateQuery {
  /** Text typed after `@`. */
  query: string;
  /** The notebook's folder, relative to the server root (`''` for the root). */
  cwd: string;
  /** Most candidates to return. */
  limit?: number;
  /** The asking notebook's current session: the server leaves it out (a session cannot reference itself). */
  exclude?: string | null;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** An error reply of the dsh API (`{"error": {"code", "message"}}`). */
export class DshApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string
  ) {
    super(message);
    this.name = 'DshApiError';
  }
}

function isCandidate(value: unknown): value is ISessionCandidate {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const item = value as Record<string, unknown>;
  return (
    typeof item.sessionId === 'string' &&
    typeof item.label === 'string' &&
    typeof item.mention === 'string' &&
    typeof item.createdAt === 'number' &&
    (item.cwd === undefined || typeof item.cwd === 'string') &&
    (item.notebook === undefined || typeof item.notebook === 'string')
  );
}

/** The {@link DshApiError} of a failed reply (its JSON error body, else its status line). */
export async function apiError(response: Response): Promise<DshApiError> {
  let code = `HTTP_${response.status}`;
  let message = response.statusText || 'request failed';
  try {
    const body = await response.json();
    if (body && typeof body.error === 'object' && body.error !== null) {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
    }
  } catch {
    // not JSON: keep the status line
  }
  return new DshApiError(response.status, code, message);
}

/**
 * Ranked session candidates for a prompt in the folder `cwd`, best first.
 *
 * Malformed entries are dropped rather than shown.
 */
export async function fetchCandidates(
  options: ICandidateQuery,
  settings: ServerConnection.ISettings
): Promise<ISessionCandidate[]> {
  const params: Record<string, string> = {
    query: options.query,
    cwd: options.cwd
  };
  if (options.limit !== undefined) {
    params.limit = String(options.limit);
  }
  if (options.exclude) {
    params.exclude = options.exclude;
  }
  const url =
    URLExt.join(settings.baseUrl, 'dsh', 'api', 'candidates') +
    URLExt.objectToQueryString(params);
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'GET', signal: options.signal },
    settings
  );
  if (!response.ok) {
    throw await apiError(response);
  }
  const body: unknown = await response.json();
  return Array.isArray(body) ? body.filter(isCandidate) : [];
}
