/**
 * The chat sidebar of JupyterLab 4 and Notebook 7: the conversation with the active notebook's agent in a side
 * panel that stays while the notebook scrolls.
 *
 * Design: the panel asks the notebook's kernel (over the `dsh.sidebar` comm, ./sidebar_kernel) for a chat
 * widget bound to the current session and renders that widget with the notebook's own widget manager (its
 * rendermime's `application/vnd.jupyter.widget-view+json` renderer). So the transcript, tool lines, approval
 * questions, proposals' status and Stop are the very code of `%dsh chat`, and a reloaded page shows the
 * conversation the kernel kept. The prompt box (mention chips, the `@` popup, the model picker) is the
 * sidebar's own (./sidebar_prompt); prompts go over the comm and run on the kernel's agent thread, so the
 * notebook stays free. Each notebook has its own chat; switching notebooks switches the panel.
 */

import type { ISessionContext } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { NotebookActions, NotebookPanel, INotebookTracker } from '@jupyterlab/notebook';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Contents, Kernel, ServerConnection } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import { Panel, Widget } from '@lumino/widgets';

import { DshApiError, fetchCandidates } from './api.js';
import { cellChoices, cellIdItems, meantItem } from './cells.js';
import { FILE_LIMIT, SESSION_LIMIT } from './completion.js';
import { textElement } from './escape.js';
import { listFileCandidates } from './files.js';
import { fileItem, IDshCompletionItem, sessionItem, variableItem } from './items.js';
import { KernelRestarts } from './restarts.js';
import { NotLoadedError, SidebarConnection, ISidebarState } from './sidebar_kernel.js';
import { IPromptHost, SidebarPrompt } from './sidebar_prompt.js';

/** The sidebar's widget id (also its place in the layout restorer). */
export const SIDEBAR_ID = 'dsh-jupyter-chat';

/** The command that opens the sidebar (palette, notebook toolbar). */
export const OPEN_COMMAND = 'dsh-jupyter:open-chat';

const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

/** How long the `@` popup waits for the server's sessions before showing the rest (milliseconds). */
export const SESSIONS_ANSWER_MS = 3000;

/** ``answer``, or an empty list (after calling ``late``) when it has not come within ``ms`` milliseconds. */
function answeredWithin<T>(answer: Promise<T[]>, ms: number, late: () => void): Promise<T[]> {
  return new Promise<T[]>(resolve => {
    const timer = window.setTimeout(() => {
      late();
      resolve([]);
    }, ms);
    void answer.then(items => {
      window.clearTimeout(timer);
      resolve(items);
    });
  });
}

/** What to run in a kernel that has no dsh extension loaded. */
export const LOAD_LINE = '%load_ext dsh_jupyter';

/** What the sidebar says when the server extension does not answer. */
export const NO_SERVER_EXTENSION =
  'The dsh server extension is not running, so @ lists no sessions (variables and files still work). ' +
  'Run "jupyter server extension enable dsh_jupyter" and restart Jupyter.';

/** A speech bubble with two lines of text (shapes only: no font glyphs). */
export const chatIcon = new LabIcon({
  name: 'dsh-jupyter:chat',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M4 3h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V5a2 ' +
    '2 0 0 1 2-2zm2 5v2h12V8H6zm0 4v2h8v-2H6z"/></svg>'
});

/** Where the sidebar reaches the server and the files. */
export interface ISidebarOptions {
  tracker: INotebookTracker;
  contents: Contents.IManager;
  serverSettings: ServerConnection.ISettings;
  /** The restarts the server reports: a kernel restarted elsewhere (another tab, the REST API), which the
   * kernel's own messages may never tell this page. */
  restarts?: KernelRestarts;
  /** Opens the app's kernel chooser for a notebook (absent: the notice only says what to do). */
  selectKernel?: (context: ISessionContext) => Promise<unknown>;
}

/** A notice at the top of a notebook's chat: what is wrong in the user's terms, and maybe one action. */
interface INotice {
  text: string;
  level: 'info' | 'warn' | 'error';
  action?: { label: string; run: () => void };
}

/**
 * The chat of one notebook: a notice line, the kernel's chat widget and the prompt box.
 */
class NotebookChat extends Widget {
  constructor(
    readonly notebook: NotebookPanel,
    private readonly _options: ISidebarOptions,
    private readonly _serverNote: () => Promise<string | null>
  ) {
    super();
    this.addClass('dsh-sidebar-chat');
    this._heading = textElement('div', '', 'dsh-sidebar-heading');
    this._notice = document.createElement('div');
    this._notice.className = 'dsh-sidebar-notice';
    this._notice.hidden = true;
    this._transcript = new Panel();
    this._transcript.addClass('dsh-sidebar-transcript');
    this._followTail();
    const host: IPromptHost = {
      candidates: query => this._candidates(query),
      send: (text, model) => this._send(text, model),
      chooseModel: async model => {
        const connection = await this._connected();
        this._show(await connection.chooseModel(model));
      }
    };
    this._prompt = new SidebarPrompt(host);
    this._prompt.enabled = false;
    this.node.append(this._heading, this._notice, this._transcript.node, this._prompt.node);
    this._syncHeading();
    notebook.context.pathChanged.connect(this._syncHeading, this);
    notebook.sessionContext.kernelChanged.connect(this._onKernelChanged, this);
    notebook.sessionContext.statusChanged.connect(this._onStatus, this);
    NotebookActions.executed.connect(this._onExecuted, this);
  }

  /** The server restarted kernel `kernelId`. A restart asked for on this page reads "restarting" first and
   * JupyterLab reconnects its socket after it. One made elsewhere (another tab, the REST API) may show nothing
   * here: the new kernel's "starting" can be lost, and the server's socket of this page can stay on the old
   * kernel's channels. So a chat that still holds its connection then has lost it: the page's kernel
   * connection is made again (as JupyterLab does after its own restarts) and the new kernel asked at once. */
  kernelRestarted(kernelId: string, restarts: KernelRestarts): void {
    const kernel = this.notebook.sessionContext.session?.kernel;
    if (this._connection === null || !kernel || kernel.id !== kernelId) {
      return;
    }
    this._lost('The kernel restarted.');
    void restarts.reconnect(kernel).then(() => {
      if (this.isVisible && !this.isDisposed) {
        this._retryOnIdle = false;
        this.start();
      }
    });
  }

  /** Connect to the kernel unless connected or connecting already. */
  start(): void {
    if (this._connection === null && this._connecting === null) {
      void this._connect();
    }
  }

  focusPrompt(): void {
    this._prompt.focus();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    NotebookActions.executed.disconnect(this._onExecuted, this);
    this._drop();
    this._transcript.dispose();
    super.dispose();
  }

  // -- connection ---------------------------------------------------------------------------------------

  private async _connect(): Promise<void> {
    const attempt = (this._connecting = this._bind());
    try {
      await attempt;
    } finally {
      if (this._connecting === attempt) {
        this._connecting = null;
      }
    }
  }

  private async _bind(): Promise<void> {
    const context = this.notebook.sessionContext;
    await context.ready;
    const kernel = context.session?.kernel;
    if (!kernel || kernel.status === 'dead') {
      this._prompt.enabled = false;
      this._setNotice({
        text: 'This notebook has no kernel. Choose one (Kernel menu, Change Kernel…) to chat with its agent.',
        level: 'warn',
        action: this._options.selectKernel
          ? { label: 'Select Kernel', run: () => void this._options.selectKernel?.(context) }
          : undefined
      });
      return;
    }
    this._setNotice({
      text: this._lostNote + (kernel.status === 'busy' ? 'Waiting for the kernel: a cell is running…' : 'Connecting to the kernel…'),
      level: 'info'
    });
    try {
      const { connection, state } = await SidebarConnection.connect(kernel);
      if (this.isDisposed || context.session?.kernel !== kernel) {
        connection.dispose();
        return;
      }
      this._connection = connection;
      connection.onState = next => this._show(next);
      connection.onReturned = (text, why) => this._prompt.giveBack(text, why);
      connection.onClosed = () => this._lost('The kernel closed the chat (it restarted, shut down or unloaded dsh).');
      this._setNotice(null);
      this._prompt.enabled = true;
      await this._show(state);
    } catch (error) {
      this._prompt.enabled = false;
      if (error instanceof NotLoadedError) {
        this._setNotice({
          text: `${this._lostNote}The kernel has not loaded dsh: run ${LOAD_LINE} in a cell, or press Load dsh.`,
          level: 'warn',
          action: { label: 'Load dsh', run: () => void this._load(kernel) }
        });
      } else {
        this._setNotice({ text: `Could not reach the kernel: ${message(error)}`, level: 'error' });
      }
    }
  }

  /** Run `%load_ext dsh_jupyter` (and resume the session a restart cut off) in the kernel, then connect. */
  private async _load(kernel: Kernel.IKernelConnection): Promise<void> {
    const code = this._lostSession ? `${LOAD_LINE}\n%dsh resume ${this._lostSession}` : LOAD_LINE;
    this._setNotice({ text: 'Loading dsh in the kernel…', level: 'info' });
    const said: string[] = [];
    try {
      const future = kernel.requestExecute({ code, silent: false, store_history: false });
      future.onIOPub = msg => {
        const content = msg.content as { text?: unknown; evalue?: unknown };
        for (const part of [content.text, content.evalue]) {
          if (typeof part === 'string') {
            said.push(part.trim());
          }
        }
      };
      const reply = await future.done;
      const content = reply.content as { status: string; evalue?: string };
      if (content.status !== 'ok') {
        this._setNotice({
          text: `The kernel could not load dsh (${content.evalue ?? content.status}); run ${LOAD_LINE} in a cell to see why.`,
          level: 'error'
        });
        return;
      }
    } catch (error) {
      this._setNotice({ text: `The kernel could not load dsh: ${message(error)}`, level: 'error' });
      return;
    }
    const resumed = this._lostSession;
    this._lostNote = '';
    this._lostSession = null;
    await this._connect();
    if (resumed !== null && this._state !== null && this._state.sessionId !== resumed) {
      const why = said.filter(line => line !== '').join(' ');
      this._setNotice({
        text: `dsh is loaded, but session ${resumed} was not resumed${why ? `: ${why}` : ''}. ` +
          `Run %dsh resume ${resumed} in a cell to continue it.`,
        level: 'warn'
      });
    }
  }

  private async _connected(): Promise<SidebarConnection> {
    if (this._connecting !== null) {
      await this._connecting;
    }
    if (this._connection === null || this._connection.closed) {
      throw new Error(`the kernel is not connected to this chat; ${this._notice.textContent || 'reopen the notebook'}`);
    }
    return this._connection;
  }

  /** Forget the connection and the rendered chat (the kernel is gone or changed). */
  private _drop(): void {
    this._connection?.dispose();
    this._connection = null;
    this._view?.dispose();
    this._view = null;
    this._modelId = null;
  }

  private _lost(why: string): void {
    const busy = this._state?.busy === true;
    this._lostSession = this._state?.sessionId ?? null;
    this._lostNote = busy
      ? 'The kernel restarted during a turn: that turn ended with it (the session log keeps what was saved). '
      : '';
    this._drop();
    this._retryOnIdle = true;
    this._prompt.enabled = false;
    this._prompt.busy = false;
    this._setNotice({ text: busy ? this._lostNote : why, level: 'warn' });
  }

  private _onKernelChanged(_sender: unknown, change: { oldValue: Kernel.IKernelConnection | null; newValue: Kernel.IKernelConnection | null }): void {
    const restarted = change.oldValue !== null && change.newValue !== null && change.oldValue.id === change.newValue.id;
    if (restarted && this._connection !== null) {
      this._lost('The kernel restarted.');
    }
    this._drop();
    if (!restarted) {
      this._lostNote = '';
      this._lostSession = null;
    }
    if (this.isVisible) {
      this.start();
    }
  }

  private _onStatus(_sender: unknown, status: Kernel.Status): void {
    // A restart asked for here reads "restarting"; one made elsewhere (another tab, the REST API) only shows
    // the new kernel "starting".
    if (status === 'restarting' || status === 'autorestarting' || status === 'starting') {
      if (this._connection !== null) {
        this._lost('The kernel restarted.');
      }
    } else if (status === 'dead') {
      this._drop();
      this._prompt.enabled = false;
      this._setNotice({ text: 'The kernel died. Restart it (Kernel menu) to chat again.', level: 'error' });
    } else if (status === 'idle' && this._retryOnIdle && this._connecting === null && this.isVisible) {
      this._retryOnIdle = false; // once: each attempt itself makes the kernel busy, then idle
      void this._connect();
    }
  }

  /** A cell finished: `%dsh new` or `%dsh resume` may have changed the current session. */
  private _onExecuted(_sender: unknown, args: { notebook: unknown }): void {
    if (args.notebook !== this.notebook.content) {
      return;
    }
    if (this._connection === null) {
      if (this._connecting === null && this.isVisible) {
        void this._connect(); // maybe the cell loaded dsh
      }
      return;
    }
    void this._connection
      .bind()
      .then(state => this._show(state))
      .catch(() => undefined);
  }

  // -- what is shown --------------------------------------------------------------------------------------

  private async _show(state: ISidebarState): Promise<void> {
    this._state = state;
    this._prompt.busy = state.busy;
    this._prompt.setModels(state.models, state.model);
    if (state.modelId === this._modelId) {
      return;
    }
    const rendermime = this.notebook.content.rendermime;
    if (!rendermime.mimeTypes.includes(WIDGET_MIME)) {
      this._setNotice({
        text: 'Jupyter widgets are not available in this page: install ipywidgets and reload the page.',
        level: 'error'
      });
      return;
    }
    this._modelId = state.modelId;
    const renderer = rendermime.createRenderer(WIDGET_MIME);
    const model: IRenderMime.IMimeModel = {
      trusted: true,
      data: { [WIDGET_MIME]: { model_id: state.modelId, version_major: 2, version_minor: 1 } },
      metadata: {},
      setData: () => undefined
    };
    this._view?.dispose();
    this._view = renderer;
    this._transcript.addWidget(renderer);
    await renderer.renderModel(model);
  }

  /** Keep the newest part of the conversation in view while it streams, unless the user scrolled up. */
  private _followTail(): void {
    const box = this._transcript.node;
    let stick = true;
    box.addEventListener('scroll', () => {
      stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    });
    new MutationObserver(() => {
      if (stick) {
        box.scrollTop = box.scrollHeight;
      }
    }).observe(box, { childList: true, subtree: true, characterData: true });
  }

  private _setNotice(notice: INotice | null): void {
    this._notice.hidden = notice === null;
    if (notice === null) {
      this._notice.replaceChildren();
      return;
    }
    this._notice.dataset.level = notice.level;
    const parts: Node[] = [textElement('span', notice.text, 'dsh-sidebar-notice-text')];
    if (notice.action) {
      const { label, run } = notice.action;
      const button = textElement('button', label, 'dsh-sidebar-notice-action jp-Button jp-mod-styled jp-mod-accept');
      button.type = 'button';
      button.addEventListener('click', run);
      parts.push(button);
    }
    this._notice.replaceChildren(...parts);
  }

  private _syncHeading(): void {
    this._heading.textContent = PathExt.basename(this.notebook.context.localPath);
    this._heading.title = this.notebook.context.localPath;
  }

  // -- the prompt box's requests --------------------------------------------------------------------------

  private async _send(text: string, model: string | null): Promise<string> {
    const connection = await this._connected();
    const mode = await connection.send(text, model);
    this._prompt.busy = true;
    connection // a first prompt makes the session: follow it
      .bind()
      .then(state => this._show(state))
      .catch(() => undefined);
    return mode === 'steered' ? 'Prompt added to the running turn.' : '';
  }

  private async _candidates(query: string): Promise<{ items: IDshCompletionItem[]; note: string | null }> {
    const { contents, serverSettings } = this._options;
    const cwd = PathExt.dirname(contents.localPath(this.notebook.context.path));
    let note: string | null = null;
    const fetched = fetchCandidates({ query, cwd, limit: SESSION_LIMIT }, serverSettings).catch(async error => {
      note = (await this._serverNote()) ?? `Sessions are unavailable: ${message(error)}`;
      return [];
    });
    const sessions = answeredWithin(fetched, SESSIONS_ANSWER_MS, () => {
      note = note ?? 'Sessions did not answer in time (the server is busy); type on to ask again.';
    });
    // The kernel answers on its main shell, so a running cell, or a kernel that is gone or stuck, must
    // not hold the popup either.
    const variables = this._connection
      ? answeredWithin(this._connection.variables(query).catch(() => []), SESSIONS_ANSWER_MS, () => {
          note = note ?? 'The kernel did not list its variables in time; type on to ask again.';
        })
      : Promise.resolve([]);
    const [named, found, files] = await Promise.all([
      variables,
      sessions,
      listFileCandidates(contents, cwd, query, FILE_LIMIT)
    ]);
    const current = this._state?.sessionId ?? null;
    const notebook = this.notebook.content;
    const cells = cellChoices(notebook.model?.cells ?? []);
    const meant = meantItem(cells, notebook.activeCell?.model.id ?? null, null); // the page's selection
    return {
      items: [
        ...named.map(variableItem),
        ...found.filter(candidate => candidate.sessionId !== current).map(sessionItem),
        ...(meant ? [meant] : []),
        ...cellIdItems(cells, null),
        ...files.map(fileItem)
      ],
      note
    };
  }

  private _heading: HTMLDivElement;
  private _notice: HTMLDivElement;
  private _transcript: Panel;
  private _prompt: SidebarPrompt;
  private _connection: SidebarConnection | null = null;
  private _connecting: Promise<void> | null = null;
  private _state: ISidebarState | null = null;
  private _view: IRenderMime.IRenderer | null = null;
  private _modelId: string | null = null;
  /** Said before the next notice after a restart cut a turn off. */
  private _lostNote = '';
  /** Connect again when the kernel is next idle (it restarted). */
  private _retryOnIdle = false;
  /** The session a restart cut off, resumed by "Load dsh". */
  private _lostSession: string | null = null;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The side panel: the chat of the active notebook (each notebook keeps its own), or a line saying to open one.
 */
export class DshSidebar extends Panel {
  constructor(private readonly _options: ISidebarOptions) {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('dsh-sidebar');
    this.title.icon = chatIcon;
    this.title.caption = 'dsh chat: the conversation with the notebook\'s agent';
    this.node.setAttribute('data-lm-suppress-shortcuts', 'true');
    this._warning = textElement('div', '', 'dsh-sidebar-warning');
    this._warning.hidden = true;
    this._empty = textElement('div', 'Open a notebook to chat with its agent here.', 'dsh-sidebar-empty');
    this.node.append(this._warning, this._empty);
    _options.tracker.currentChanged.connect(() => this._follow(), this);
    const restarts = _options.restarts;
    this._stopRestarts = restarts?.onRestart(kernelId => this._kernelRestarted(kernelId, restarts)) ?? null;
    this._follow();
  }

  dispose(): void {
    this._stopRestarts?.();
    super.dispose();
  }

  /** The chat of the active notebook, if any. */
  get current(): NotebookChat | null {
    return this._current;
  }

  focusPrompt(): void {
    this._current?.focusPrompt();
  }

  protected onAfterShow(): void {
    this._follow();
    void this._serverNote();
  }

  private _follow(): void {
    const notebook = this._options.tracker.currentWidget;
    let chat = notebook ? this._chats.get(notebook) : undefined;
    if (notebook && chat === undefined) {
      chat = new NotebookChat(notebook, this._options, () => this._serverNote());
      this._chats.set(notebook, chat);
      notebook.disposed.connect(() => {
        this._chats.get(notebook)?.dispose();
        this._chats.delete(notebook);
        if (this._current === chat) {
          this._current = null;
          this._follow();
        }
      });
      this.addWidget(chat);
    }
    for (const other of this._chats.values()) {
      other.setHidden(other !== chat);
    }
    this._current = chat ?? null;
    this._empty.hidden = chat !== undefined;
    if (chat && this.isVisible) {
      chat.start();
    }
  }

  private _kernelRestarted(kernelId: string, restarts: KernelRestarts): void {
    for (const chat of this._chats.values()) {
      chat.kernelRestarted(kernelId, restarts);
    }
  }

  /** Whether the server extension answers (asked once): `null` when it does, else what to do. */
  private _serverNote(): Promise<string | null> {
    if (this._serverCheck === null) {
      this._serverCheck = fetchCandidates({ query: '', cwd: '', limit: 1 }, this._options.serverSettings).then(
        () => null,
        error => (error instanceof DshApiError && error.status !== 404 ? `Sessions are unavailable: ${message(error)}` : NO_SERVER_EXTENSION)
      );
      void this._serverCheck.then(note => {
        this._warning.textContent = note ?? '';
        this._warning.hidden = note === null;
      });
    }
    return this._serverCheck;
  }

  private _chats = new Map<NotebookPanel, NotebookChat>();
  private _current: NotebookChat | null = null;
  private _warning: HTMLDivElement;
  private _empty: HTMLDivElement;
  private _serverCheck: Promise<string | null> | null = null;
  private _stopRestarts: (() => void) | null;
}
