/**
 * `@` completion in `%%dsh` cells: the notebook's variables (asked of its kernel, data frames first), sessions
 * from the dsh server extension, `@cell` (the cell above the prompt) and the cells by id, then files of the
 * notebook's folder, in JupyterLab's own completer popup.
 *
 * JupyterLab builds the popup from the completer model and renderer of the highest-ranked provider, so
 * this provider ranks first and brings both. They change nothing for other completions: the model falls
 * back to the stock filtering and the renderer to the stock item nodes unless the list holds dsh items.
 * For dsh items the model filters like the server (case-insensitive substring of id, cwd and label;
 * file names for files) instead of fuzzy-matching labels and leaves out other providers' items, and the
 * renderer writes every string with `textContent`, control characters made visible.
 */

import {
  CompleterModel,
  Completer,
  CompletionHandler,
  ICompletionContext,
  ICompletionProvider
} from '@jupyterlab/completer';
import { PathExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Contents, ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { fetchCandidates, ISessionCandidate } from './api.js';
import { cellChoices, cellIdItems, meantItem } from './cells.js';
import { textElement } from './escape.js';
import { listFileCandidates } from './files.js';
import {
  fileItem,
  filterDshItems,
  IDshItemInfo,
  isDshItem,
  sessionItem,
  variableItem
} from './items.js';
import { currentSessionId, lastSessionId } from './kernel.js';
import { IMentionToken, mentionAt } from './mentions.js';
import { listVariables } from './variables.js';

/** Identifier of the provider in the completer settings (`availableProviders`). */
export const PROVIDER_ID = 'dsh-jupyter:mentions';

/** Above the stock kernel (550) and context (500) providers. */
export const PROVIDER_RANK = 1100;

/** How many sessions one request asks the server for. */
export const SESSION_LIMIT = 50;

/** How many files one request lists. */
export const FILE_LIMIT = 100;

/**
 * The notebook path (relative to the server root) of a completion context, or `null`.
 */
export function notebookPath(
  widget: Widget,
  contents?: Contents.IManager
): string | null {
  if (!(widget instanceof NotebookPanel)) {
    return null;
  }
  const path = widget.context.path;
  return contents ? contents.localPath(path) : path;
}

/**
 * A fetch that takes at least this long (milliseconds) may have missed JupyterLab's provider timeout (a second by
 * default), after which the completer goes on without the provider's items: the popup then never opens for a
 * mention typed in one go. Such an answer is kept and the completer asked again (see {@link DshCompletionProvider}).
 */
export const LATE_MS = 900;

/** How long a late answer is kept for the completer's second request (milliseconds). */
export const LATE_KEPT_MS = 10_000;

/** Dependencies of {@link DshCompletionProvider}. */
export interface IDshCompletionProviderOptions {
  serverSettings: ServerConnection.ISettings;
  contents: Contents.IManager;
  /** Opens the completer of a notebook panel (by its id), as typing a mention does. */
  invoke?: (panelId: string) => void;
}

/** The editor a completion request was typed in. */
type Editor = NonNullable<ICompletionContext['editor']>;

/** An answer that came after JupyterLab may have stopped waiting for it, and the request it answers. */
interface ILateReply {
  editor: Editor;
  text: string;
  offset: number;
  reply: CompletionHandler.ICompletionItemsReply;
  at: number;
}

/**
 * Completion provider for mentions in `%%dsh` cells.
 */
export class DshCompletionProvider implements ICompletionProvider {
  readonly identifier = PROVIDER_ID;
  readonly rank = PROVIDER_RANK;
  readonly renderer: Completer.IRenderer;

  constructor(options: IDshCompletionProviderOptions) {
    this._serverSettings = options.serverSettings;
    this._contents = options.contents;
    this._invoke = options.invoke ?? null;
    this.renderer = new DshCompleterRenderer();
  }

  /** Applicable in a notebook cell whose cursor sits in an `@` mention of a `%%dsh` body. */
  async isApplicable(context: ICompletionContext): Promise<boolean> {
    return this._tokenOf(context) !== null;
  }

  /**
   * The items for a mention. An answer that took {@link LATE_MS} or longer (a busy server or kernel) is kept, and
   * once JupyterLab is done with it the completer is asked again for the same text and cursor, which this answers
   * at once from what was kept: a popup that would have been dropped opens late instead of never.
   */
  async fetch(
    request: CompletionHandler.IRequest,
    context: ICompletionContext
  ): Promise<CompletionHandler.ICompletionItemsReply> {
    const kept = this._takeLate(request, context);
    if (kept) {
      return kept;
    }
    const started = Date.now();
    const reply = await this._fetch(request, context);
    const editor = context.editor;
    if (Date.now() - started >= LATE_MS && reply.items.length && editor && this._invoke) {
      this._late = { editor, text: request.text, offset: request.offset, reply, at: Date.now() };
      // After JupyterLab has taken (or dropped) this answer: its own timer ran out before this fetch ended.
      setTimeout(() => this._reopen(context, editor, request), 0);
    }
    return reply;
  }

  private async _fetch(
    request: CompletionHandler.IRequest,
    context: ICompletionContext
  ): Promise<CompletionHandler.ICompletionItemsReply> {
    const token = mentionAt(request.text, request.offset);
    const path = notebookPath(context.widget, this._contents);
    if (!token || path === null) {
      return { start: request.offset, end: request.offset, items: [] };
    }
    const cwd = PathExt.dirname(path);
    const panel = context.widget as NotebookPanel;
    // The kernel's own session cannot be referenced from itself: the server leaves out the one the kernel named
    // last, and this list the one it names now (asked side by side: JupyterLab drops a provider that takes
    // longer than its `providerTimeout`, a second by default).
    const [variables, sessions, files, current] = await Promise.all([
      token.quoted ? Promise.resolve([]) : listVariables(panel, token.query),
      token.quoted ? Promise.resolve([]) : this._sessions(token, cwd, lastSessionId(panel)),
      listFileCandidates(this._contents, cwd, token.query, FILE_LIMIT),
      token.quoted ? Promise.resolve(null) : currentSessionId(panel)
    ]);
    const others = sessions.filter(candidate => candidate.sessionId !== current);
    const notebook = panel.content;
    const cells = token.quoted ? [] : cellChoices(notebook.model?.cells ?? []);
    const prompt = notebook.activeCell?.model.id ?? null; // the %%dsh cell typed in
    const meant = token.quoted ? null : meantItem(cells, null, prompt);
    return {
      start: token.start,
      end: token.end,
      items: [
        ...variables.map(variableItem),
        ...others.map(sessionItem),
        ...(meant ? [meant] : []),
        ...cellIdItems(cells, prompt),
        ...files.map(fileItem)
      ]
    };
  }

  /** A model that filters dsh items like the server does (see {@link DshCompleterModel}). */
  async modelFactory(context: ICompletionContext): Promise<Completer.IModel> {
    const model = new DshCompleterModel();
    this._models.set(context.widget, model);
    return model;
  }

  /** With continuous hinting on, hint exactly when a mention is being typed in a `%%dsh` cell. */
  shouldShowContinuousHint(
    completerIsVisible: boolean,
    _changed: unknown,
    context?: ICompletionContext
  ): boolean {
    return !completerIsVisible && !!context && this._tokenOf(context) !== null;
  }

  private async _sessions(
    token: IMentionToken,
    cwd: string,
    exclude: string | null
  ): Promise<ISessionCandidate[]> {
    try {
      return await fetchCandidates(
        { query: token.query, cwd, limit: SESSION_LIMIT, exclude },
        this._serverSettings
      );
    } catch (error) {
      if (!this._warned) {
        this._warned = true;
        console.warn(
          'dsh-jupyter: session candidates are unavailable (is the dsh_jupyter server extension enabled?)',
          error
        );
      }
      return [];
    }
  }

  /** The kept late answer, once, when `request` asks again what it answered (same editor, text and cursor). */
  private _takeLate(
    request: CompletionHandler.IRequest,
    context: ICompletionContext
  ): CompletionHandler.ICompletionItemsReply | null {
    const late = this._late;
    this._late = null;
    if (
      !late ||
      late.editor !== context.editor ||
      late.text !== request.text ||
      late.offset !== request.offset ||
      Date.now() - late.at > LATE_KEPT_MS
    ) {
      return null;
    }
    return late.reply;
  }

  /** Asks the completer again when the editor still shows what a late answer is for (an open popup ignores it). */
  private _reopen(context: ICompletionContext, editor: Editor, request: CompletionHandler.IRequest): void {
    const panel = context.widget;
    if (
      !this._invoke ||
      panel.isDisposed ||
      !editor.hasFocus() ||
      editor.model.sharedModel.getSource() !== request.text ||
      editor.getOffsetAt(editor.getCursorPosition()) !== request.offset
    ) {
      this._late = null;
      return;
    }
    const model = this._models.get(panel);
    if (model?.holdsDshItems) {
      this._late = null; // it came in time: the popup shows it
      return;
    }
    // JupyterLab took the other providers' answer without this one: its completer session is still open (a list
    // that came back empty leaves it so), and a session that is open ignores the request. End it first.
    model?.reset(true);
    this._invoke(panel.id);
  }

  private _tokenOf(context: ICompletionContext): IMentionToken | null {
    const editor = context.editor;
    if (!editor || notebookPath(context.widget) === null) {
      return null;
    }
    const text = editor.model.sharedModel.getSource();
    const offset = editor.getOffsetAt(editor.getCursorPosition());
    return mentionAt(text, offset);
  }

  private _serverSettings: ServerConnection.ISettings;
  private _contents: Contents.IManager;
  private _invoke: ((panelId: string) => void) | null;
  private _late: ILateReply | null = null;
  private _models = new WeakMap<Widget, DshCompleterModel>();
  private _warned = false;
}

/**
 * Completer model: stock behaviour, except for lists holding dsh items.
 *
 * For those, the text typed since the request (not a fuzzy label match) filters the items, other
 * providers' items are left out, the order stays sessions-then-files as fetched, and `query` reads as
 * empty so that the popup never "completes" the common prefix of all mentions on Tab.
 */
export class DshCompleterModel extends CompleterModel {
  get query(): string {
    return this._dshItems ? '' : (Reflect.get(CompleterModel.prototype, 'query', this) as string);
  }

  set query(value: string) {
    Reflect.set(CompleterModel.prototype, 'query', value, this);
  }

  /** Whether the list it holds is dsh's (the popup shows dsh's items). */
  get holdsDshItems(): boolean {
    return this._dshItems !== null;
  }

  setCompletionItems(items: CompletionHandler.ICompletionItems): void {
    this._dshItems = items.some(isDshItem) ? items : null;
    this.processedItemsCache = null;
    super.setCompletionItems(items);
  }

  completionItems(): CompletionHandler.ICompletionItems {
    if (!this._dshItems) {
      return super.completionItems();
    }
    if (!this.processedItemsCache) {
      this.processedItemsCache = filterDshItems(this._dshItems, this._typed());
    }
    return this.processedItemsCache;
  }

  reset(hard = false): void {
    super.reset(hard);
    if (!this.original) {
      this._dshItems = null;
    }
  }

  /** The editor text from the completion start to the cursor (what the user typed, `@` included). */
  private _typed(): string {
    const { original, current, cursor } = this;
    if (!original || !current || !cursor) {
      return '';
    }
    const end = cursor.end + (current.text.length - original.text.length);
    return current.text.slice(cursor.start, Math.max(cursor.start, end));
  }

  private _dshItems: CompletionHandler.ICompletionItems | null = null;
}

/** The letter and colour of each kind of row. */
const MONOGRAMS: Record<IDshItemInfo['kind'], [string, string]> = {
  cell: ['c', '5'],
  variable: ['v', '4'],
  session: ['s', '1'],
  directory: ['d', '2'],
  file: ['f', '3']
};

/**
 * Completer renderer: dsh rows built with `textContent`; every other item goes to the stock renderer.
 */
export class DshCompleterRenderer implements Completer.IRenderer {
  createCompletionItemNode(
    item: CompletionHandler.ICompletionItem,
    orderedTypes: string[]
  ): HTMLLIElement {
    if (!isDshItem(item)) {
      return this._fallback.createCompletionItemNode(item, orderedTypes);
    }
    const info = item.dsh;
    const li = document.createElement('li');
    li.className = `jp-Completer-item jp-DshCompleter-item jp-DshCompleter-${info.kind}`;
    li.setAttribute('data-value', item.insertText ?? item.label);
    li.title = `${info.title}\n${info.detail}`;
    const monogram = textElement(
      'span',
      MONOGRAMS[info.kind][0],
      'jp-Completer-type jp-Completer-monogram jp-DshCompleter-kind'
    );
    monogram.setAttribute('data-color-index', MONOGRAMS[info.kind][1]);
    li.appendChild(monogram);
    const match = textElement('code', info.title, 'jp-Completer-match jp-DshCompleter-title');
    li.appendChild(match);
    const detail = textElement(
      'code',
      info.sameWorkspace ? `this folder · ${info.detail}` : info.detail,
      'jp-Completer-typeExtended jp-DshCompleter-detail'
    );
    li.appendChild(detail);
    return li;
  }

  createDocumentationNode(activeItem: CompletionHandler.ICompletionItem): HTMLElement {
    if (!isDshItem(activeItem)) {
      return this._fallback.createDocumentationNode!(activeItem);
    }
    const node = document.createElement('div');
    node.className = 'jp-DshCompleter-doc';
    node.appendChild(textElement('div', activeItem.dsh.title, 'jp-DshCompleter-docTitle'));
    node.appendChild(textElement('div', activeItem.dsh.detail));
    return node;
  }

  createLoadingDocsIndicator(): HTMLElement {
    return this._fallback.createLoadingDocsIndicator!();
  }

  itemWidthHeuristic(item: CompletionHandler.ICompletionItem): number {
    if (isDshItem(item)) {
      return item.dsh.title.length + Math.min(item.dsh.detail.length, 60);
    }
    return this._fallback.itemWidthHeuristic!(item);
  }

  private _fallback = Completer.getDefaultRenderer();
}
