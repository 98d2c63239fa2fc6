/**
 * Ghost-text completions in notebook cells, from the model the dsh server extension is configured with
 * (`dsh/api/completion`), through JupyterLab's own inline completer: Tab (or the accept key you set) takes
 * the suggestion, Alt+] / Alt+[ cycle, Escape dismisses.
 *
 * Off by default: switch it on in the settings editor (Inline Completer → dsh-jupyter provider → enabled), or
 * an administrator switches it on for everyone with `c.DshCompletion.enabled = True` (that is then the
 * default shown in the settings editor). A notebook's owner can turn it off for one notebook (the palette
 * command below writes `"dsh": {"completion": false}` into its metadata); nothing is sent for it then.
 *
 * The page sends what it already has: the cell around the cursor, the cells above (sources, outputs as
 * text) and the variables its variables view last listed; the server bounds and masks it. JupyterLab's
 * debouncer waits (300 ms by default, `debouncerDelay`); a request in flight is aborted as soon as the cell
 * changes again, which closes it, and the server cancels the model's request.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { ICodeCellModel } from '@jupyterlab/cells';
import {
  CompletionHandler,
  ICompletionProviderManager,
  IInlineCompletionContext,
  IInlineCompletionItem,
  IInlineCompletionList,
  IInlineCompletionProvider
} from '@jupyterlab/completer';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';

import { DshApiError } from './api.js';
import {
  CompletionEvent,
  fetchCompletionDefaults,
  ICellAbove,
  ICompletionDefaults,
  streamCompletion
} from './inline_api.js';
import { completionMode, pointlessReason } from './inline_rules.js';
import { listVariables } from './variables.js';

/** The provider's identifier (its settings live under this key of the inline completer's `providers`). */
export const INLINE_PROVIDER_ID = 'dsh-jupyter:inline';
/** The palette command turning completions off (or on again) for the current notebook. */
export const TOGGLE_COMMAND = 'dsh-jupyter:toggle-notebook-completion';
/** Notebook metadata key holding `{completion: false}` when the owner turned completions off. */
export const METADATA_KEY = 'dsh';

/** Most characters of one cell's source, of one cell's outputs, and of all cells above, the page sends. */
export const CELL_CHARS = 4000;
export const OUTPUT_CHARS = 400;
export const ABOVE_CHARS = 32000;
/** How long a completion waits for the kernel's variables before going with the last list (ms). */
export const VARIABLES_WAIT_MS = 250;

type Schema = IInlineCompletionProvider['schema'];

/** True when the notebook's owner turned dsh completions off for it. */
export function completionOff(panel: NotebookPanel): boolean {
  const value = panel.model?.getMetadata(METADATA_KEY) as { completion?: unknown } | undefined;
  return value?.completion === false;
}

function clip(text: string, most: number): string {
  return text.length <= most ? text : text.slice(0, most);
}

/** A code cell's outputs as short text: streams, plain-text results, errors, and `[image/png]` for the rest. */
export function outputsText(model: ICodeCellModel): string {
  const parts: string[] = [];
  for (let i = 0; i < model.outputs.length; i++) {
    const output = model.outputs.get(i).toJSON() as Record<string, unknown>;
    const data = output.data as Record<string, unknown> | undefined;
    if (output.output_type === 'stream') {
      parts.push(String(output.text ?? ''));
    } else if (output.output_type === 'error') {
      parts.push(`${String(output.ename)}: ${String(output.evalue)}`);
    } else if (data) {
      const plain = data['text/plain'];
      parts.push(plain !== undefined ? String(plain) : `[${Object.keys(data)[0] ?? 'output'}]`);
    }
    if (parts.join(' ').length > OUTPUT_CHARS) {
      break;
    }
  }
  return clip(parts.join(' ').trim(), OUTPUT_CHARS);
}

/** The cells above `index`, nearest last, within {@link ABOVE_CHARS}. */
export function cellsAbove(panel: NotebookPanel, index: number): ICellAbove[] {
  const cells: ICellAbove[] = [];
  let spent = 0;
  for (let i = index - 1; i >= 0 && spent < ABOVE_CHARS; i--) {
    const model = panel.content.widgets[i]?.model;
    if (!model) {
      continue;
    }
    const source = clip(model.sharedModel.getSource(), CELL_CHARS);
    const outputs = model.type === 'code' ? outputsText(model as ICodeCellModel) : '';
    cells.unshift({ kind: model.type, source, outputs });
    spent += source.length + outputs.length;
  }
  return cells;
}

/** The variables each notebook's kernel last listed, asked again after a cell has run. */
class KnownVariables {
  constructor() {
    NotebookActions.executed.connect((_, { notebook }) => {
      for (const panel of this._lists.keys()) {
        if (panel.content === notebook) {
          this._stale.add(panel);
        }
      }
    });
  }

  async of(panel: NotebookPanel): Promise<{ name: string; type: string }[]> {
    const known = this._lists.get(panel);
    if (known && !this._stale.has(panel)) {
      return known;
    }
    this._stale.delete(panel);
    if (!this._watched.has(panel)) {
      this._watched.add(panel);
      panel.disposed.connect(() => {
        this._lists.delete(panel);
        this._watched.delete(panel);
      });
    }
    const asked = listVariables(panel, '').then(list => {
      const entries = list.map(v => ({ name: v.name, type: v.brief || v.type }));
      if (!panel.isDisposed) {
        this._lists.set(panel, entries);
      }
      return entries;
    });
    const waited = new Promise<null>(resolve => window.setTimeout(() => resolve(null), VARIABLES_WAIT_MS));
    return (await Promise.race([asked, waited])) ?? known ?? [];
  }

  private _lists = new Map<NotebookPanel, { name: string; type: string }[]>();
  private _stale = new Set<NotebookPanel>();
  private _watched = new Set<NotebookPanel>();
}

interface IOpenStream {
  events: AsyncGenerator<CompletionEvent>;
  text: string;
  stop: () => void;
}

/** The inline completion provider (see the module comment). */
export class DshInlineProvider implements IInlineCompletionProvider {
  readonly identifier = INLINE_PROVIDER_ID;
  readonly name = 'dsh-jupyter';

  constructor(
    private readonly _settings: ServerConnection.ISettings,
    private readonly _defaults: ICompletionDefaults
  ) {}

  /** The defaults the settings editor shows: on when the server says so, the server's debounce delay. */
  get schema(): Schema {
    return {
      type: 'object',
      default: {
        enabled: this._defaults.enabled,
        debouncerDelay: this._defaults.debounceMs,
        timeout: 15000
      }
    };
  }

  async fetch(
    request: CompletionHandler.IRequest,
    context: IInlineCompletionContext
  ): Promise<IInlineCompletionList<IInlineCompletionItem>> {
    this._stop?.();
    const none = { items: [] };
    const panel = context.widget instanceof NotebookPanel ? context.widget : null;
    const cell = panel?.content.activeCell;
    if (!panel || !cell || cell.model.type !== 'code' || completionOff(panel)) {
      return none;
    }
    const { text, offset } = request;
    if (pointlessReason(text, offset) !== null) {
      return none;
    }
    const controller = new AbortController();
    const shared = cell.model.sharedModel;
    const onChange = (): void => {
      if (shared.getSource() !== text) {
        controller.abort(); // the user typed on: close the request, the server cancels the model's
      }
    };
    const stop = (): void => {
      shared.changed.disconnect(onChange);
      controller.abort();
    };
    shared.changed.connect(onChange);
    this._stop = stop;
    const language = String(panel.model?.getMetadata('language_info')?.name ?? 'python');
    const events = streamCompletion(
      {
        requestId: `${Date.now().toString(36)}-${++this._requests}`,
        language,
        mode: completionMode(text),
        prefix: text.slice(0, offset),
        suffix: text.slice(offset),
        cells: cellsAbove(panel, panel.content.activeCellIndex),
        variables: await this._variables.of(panel)
      },
      this._settings,
      controller.signal
    );
    try {
      for (;;) {
        const next = await events.next();
        if (next.done || next.value.kind === 'done') {
          stop();
          return none;
        }
        if (next.value.kind === 'error') {
          throw new Error(next.value.message);
        }
        if (next.value.text) {
          const token = String(++this._tokens);
          this._streams.set(token, { events, text: next.value.text, stop });
          return { items: [{ insertText: next.value.text, isIncomplete: true, token }] };
        }
      }
    } catch (error) {
      stop();
      if (!controller.signal.aborted) {
        this._warn(error);
      }
      return none;
    }
  }

  async *stream(token: string): AsyncGenerator<{ response: IInlineCompletionItem }> {
    const open = this._streams.get(token);
    if (!open) {
      return;
    }
    this._streams.delete(token);
    let text = open.text;
    try {
      for await (const event of open.events) {
        if (event.kind === 'text') {
          text += event.text;
          yield { response: { insertText: text, isIncomplete: true } };
        } else {
          break;
        }
      }
    } catch {
      // aborted (typed on, accepted) or the connection broke: keep what came
    } finally {
      open.stop();
    }
  }

  private _warn(error: unknown): void {
    const message = error instanceof DshApiError || error instanceof Error ? error.message : String(error);
    if (message !== this._warned) {
      this._warned = message;
      console.warn(`dsh-jupyter: no completion: ${message}`);
    }
  }

  private _stop: (() => void) | null = null;
  private _streams = new Map<string, IOpenStream>();
  private _tokens = 0;
  private _requests = 0;
  private _warned = '';
  private _variables = new KnownVariables();
}

/** Registers the provider (with the server's defaults) and the per-notebook off switch. */
export const inlineCompletion: JupyterFrontEndPlugin<void> = {
  id: 'dsh-jupyter:inline-completion',
  description: 'Ghost-text completions of notebook cells from the dsh model (off until switched on).',
  autoStart: true,
  requires: [ICompletionProviderManager, INotebookTracker],
  optional: [ICommandPalette],
  activate: async (
    app: JupyterFrontEnd,
    manager: ICompletionProviderManager,
    tracker: INotebookTracker,
    palette: ICommandPalette | null
  ): Promise<void> => {
    const settings = app.serviceManager.serverSettings;
    const defaults = (await fetchCompletionDefaults(settings)) ?? { enabled: false, debounceMs: 300 };
    manager.registerInlineProvider(new DshInlineProvider(settings, defaults));
    app.commands.addCommand(TOGGLE_COMMAND, {
      label: 'Ghost-Text Completions in This Notebook',
      caption: 'Send nothing for completions from this notebook (stored in its metadata)',
      isEnabled: () => tracker.currentWidget?.model != null,
      isToggled: () => !!tracker.currentWidget && !completionOff(tracker.currentWidget),
      execute: () => {
        const model = tracker.currentWidget?.model;
        if (!model) {
          return;
        }
        const held = (model.getMetadata(METADATA_KEY) ?? {}) as Record<string, unknown>;
        model.setMetadata(METADATA_KEY, { ...held, completion: completionOff(tracker.currentWidget!) });
      }
    });
    palette?.addItem({ command: TOGGLE_COMMAND, category: 'dsh' });
  }
};
