/**
 * Chat transcript (anywidget view of `dsh_jupyter/ui/widgets/chat.py`): a header (session title, short id,
 * model, status badge and a Stop button while a turn runs) over the synced `items` list, which `ChatLog`
 * renders (`chat-log.ts`). Every text goes through `../escape.ts`.
 *
 * The saved notebook keeps a static copy of the conversation (`copy_html`, `copy_text`): it is written into
 * the output just before each save, and shown in the widget's place when the kernel behind it is gone.
 */

import type { AnyModel, RenderProps } from '@anywidget/types';

import { displayText } from '../escape.js';
import { ChatLog, IChatItem } from './chat-log.js';
import { keepKeysInside, node, setText, subscribe } from './dom.js';

export { buildDoc, ChatLog } from './chat-log.js';
export type { DocNode, IChatItem, IDocElement, IReferenceFacts } from './chat-log.js';

/** The traits of `ChatTranscript` this view reads. */
export interface IChatState {
  items: IChatItem[];
  busy: boolean;
  title: string;
  details: string[];
  status: string;
  variant: string;
  panel_id: string;
  copy_html: string;
  copy_text: string;
}

type ChatModel = AnyModel<IChatState>;

const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
const STOP_TIMEOUT_MS = 10000;

/** The parts of a notebook document's context this view touches (JupyterLab and Notebook 7). */
interface IOutputModel {
  data?: Record<string, unknown>;
  _rawData?: unknown;
}

interface IList<T> {
  readonly length: number;
  get(index: number): T;
}

interface IOutputList extends IList<IOutputModel> {
  set?(index: number, output: object): void;
}

type SaveSlot = (sender: unknown, state: string) => void;

interface IDocumentContext {
  model?: { cells?: IList<{ outputs?: IOutputList }>; dirty?: boolean };
  saveState?: { connect(slot: SaveSlot): unknown; disconnect(slot: SaveSlot): unknown };
}

interface IFoundOutput {
  context: IDocumentContext;
  outputs: IOutputList;
  index: number;
  output: IOutputModel;
}

/** The widget manager's document context, where the frontend exposes one. */
function documentContext(model: ChatModel): IDocumentContext | null {
  const manager = model.widget_manager as unknown as { context?: IDocumentContext } | undefined;
  return manager?.context ?? null;
}

/**
 * The panel's output in the notebook document, where the frontend exposes it (JupyterLab and
 * Notebook 7: the widget manager's document context); null elsewhere (VS Code, tests).
 */
function panelOutput(model: ChatModel): IFoundOutput | null {
  const panelId = model.get('panel_id');
  const context = documentContext(model);
  const cells = context?.model?.cells;
  if (!context || !panelId || !cells || typeof cells.get !== 'function') {
    return null;
  }
  for (let i = 0; i < cells.length; i++) {
    const outputs = cells.get(i).outputs;
    if (!outputs || typeof outputs.get !== 'function') {
      continue;
    }
    for (let j = 0; j < outputs.length; j++) {
      const output = outputs.get(j);
      const view = output?.data?.[WIDGET_MIME] as { model_id?: unknown } | undefined;
      if (view && view.model_id === panelId) {
        return { context, outputs, index: j, output };
      }
    }
  }
  return null;
}

/** The copy this view last saw from Python, as the output's fallback MIME types. */
function copyBundle(model: ChatModel): Record<string, string> {
  return { 'text/html': model.get('copy_html') || '', 'text/plain': model.get('copy_text') || '' };
}

/**
 * Keep the saved notebook's copy of the conversation current (the kernel's display updates only
 * reach an output while its cell runs): just before each save, write the copy into the output's
 * data without re-rendering the live widget. Returns a disposer.
 */
export function mirrorCopyOnSave(model: ChatModel): () => void {
  const found = panelOutput(model);
  const saveState = found?.context.saveState;
  if (!saveState || typeof saveState.connect !== 'function') {
    return () => undefined;
  }
  const onSave: SaveSlot = (_sender, state) => {
    if (state !== 'started') {
      return;
    }
    const current = panelOutput(model);
    const raw = current?.output._rawData; // what the document saves; setData would re-render the widget
    if (current && raw && typeof raw === 'object' && model.get('copy_html')) {
      current.output._rawData = { ...raw, ...copyBundle(model) };
    }
  };
  saveState.connect(onSave);
  return () => {
    saveState.disconnect(onSave);
  };
}

/**
 * When the kernel behind the widget is gone (restarted or dead), show the conversation in its place:
 * the output becomes the static copy, and the notebook saves that instead of a dead widget.
 */
export function replaceWithCopy(model: ChatModel): boolean {
  const found = panelOutput(model);
  if (!found || !model.get('copy_html') || typeof found.outputs.set !== 'function') {
    return false;
  }
  found.outputs.set(found.index, { output_type: 'display_data', data: copyBundle(model), metadata: {} });
  return true;
}

function render({ model, el, experimental }: RenderProps<IChatState>): () => void {
  const root = node('div', 'dsh-chat');
  keepKeysInside(root);
  const header = node('div', 'dsh-chat-header');
  const heading = node('div', 'dsh-chat-heading');
  const title = node('span', 'dsh-chat-title');
  const details = node('span', 'dsh-chat-details');
  heading.append(title, details);
  const state = node('span', 'dsh-chat-state');
  state.setAttribute('aria-live', 'polite');
  const stop = node(
    'button',
    'dsh-chat-stop dsh-button dsh-button-warn jp-Button jp-mod-styled jp-mod-warn',
    'Stop'
  );
  stop.type = 'button';
  stop.title = 'Cancel the running turn';
  header.append(heading, state, stop);
  const log = node('div', 'dsh-chat-log');
  log.setAttribute('role', 'log');
  log.setAttribute('aria-live', 'polite');
  const empty = node('div', 'dsh-chat-empty', 'No messages yet. Type a prompt below and press Ctrl+Enter or Send.');
  root.append(header, log, empty);
  el.append(root);

  const chatLog = new ChatLog(log);
  let disposed = false;
  let stopError = '';

  function renderItems(): void {
    const items = model.get('items') || [];
    chatLog.update(items);
    const none = items.length === 0;
    const pick = model.get('variant') === 'pick';
    empty.hidden = !none || pick;
    log.hidden = none;
    root.classList.toggle('dsh-chat-unused', none && pick);
    root.classList.toggle('dsh-chat-pick', pick);
  }

  function renderHeader(): void {
    setText(title, displayText(model.get('title') || 'New session'));
    setText(details, (model.get('details') || []).map(displayText).join(' · '));
    const busy = model.get('busy');
    const status = busy ? 'running' : model.get('status') || 'idle';
    setText(state, stopError || (status === 'running' ? 'running…' : status));
    state.dataset.status = stopError ? 'error' : status;
    stop.hidden = !busy;
    stop.disabled = !busy;
    if (!busy) {
      stopError = '';
    }
  }

  async function onStop(): Promise<void> {
    stop.disabled = true;
    try {
      const [response] = await experimental.invoke<{ error?: unknown } | null>(
        'stop_command',
        {},
        { signal: AbortSignal.timeout(STOP_TIMEOUT_MS) }
      );
      if (!disposed && response && response.error) {
        stopError = 'Stop failed: ' + displayText(response.error);
      }
    } catch {
      if (!disposed) {
        stopError = 'the kernel did not answer the stop request';
      }
    }
    if (!disposed) {
      renderHeader();
    }
  }

  stop.addEventListener('click', () => void onStop());
  let stopMirror = (): void => undefined;
  try {
    stopMirror = mirrorCopyOnSave(model);
  } catch (error) {
    console.warn('dsh: the saved copy of this chat will not be kept current', error);
  }
  function onCopy(): void {
    // A finished turn changed the conversation: the document has unsaved changes (its copy).
    if (model.get('busy')) {
      return;
    }
    const found = panelOutput(model);
    if (found?.context.model) {
      found.context.model.dirty = true;
    }
  }
  async function onCommLive(): Promise<void> {
    // ipywidgets marks every model "not live" when the kernel restarts or dies: its objects are gone.
    try {
      await new Promise(resolve => setTimeout(resolve, 100)); // every model is marked in turn
      const manager = model.widget_manager;
      const panel = manager && (await manager.get_model(model.get('panel_id')));
      if (panel && (panel as unknown as { comm_live?: boolean }).comm_live === false) {
        replaceWithCopy(model);
      }
    } catch (error) {
      console.warn('dsh: could not show the copy of this chat', error);
    }
  }
  const onLive = (): void => void onCommLive();
  const unsubscribe = subscribe(model, [
    ['change:copy_html', onCopy],
    ['comm_live_update', onLive],
    [['change:items', 'change:variant'], renderItems],
    [['change:busy', 'change:title', 'change:details', 'change:status'], renderHeader]
  ]);
  renderHeader();
  renderItems();

  return () => {
    disposed = true;
    stopMirror();
    unsubscribe();
  };
}

export default { render };
