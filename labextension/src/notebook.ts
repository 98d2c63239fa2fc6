/**
 * The open notebook served to its kernel (the kernel side is dsh_jupyter/workspace/live_document.py).
 *
 * Each notebook panel opens one comm to the kernel target `dsh.live-notebook` when its kernel is ready
 * (a kernel without dsh loaded closes it again) and whenever the kernel pings the front-end target
 * `dsh.live-notebook-ping` (it does as `%load_ext dsh_jupyter` runs, after a restart too). The kernel
 * asks one panel at a time (the one most recently current, which this module reports) to:
 *
 * - `ping`: say it is there; `read`: the cells of the shared model (unsaved edits included);
 * - `apply`: insert / replace / delete one cell by id (a missing id is refused with `not-found`);
 * - `outputs`: put a run's outputs and execution count into a cell;
 * - `propose`: show an edit where it would land (or, for a `run`, the cell to run), with Accept / Reject, and
 *   answer with the choice.
 *   A proposal is never part of the notebook model: a save meanwhile does not store it.
 *
 * Messages that make no sense are logged to the console and ignored.
 */

import { Cell, ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookModel, INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage, User } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

import { onSubshell } from './ask.js';
import { displayParts, displayText } from './escape.js';
import { KernelRestarts } from './restarts.js';
import {
  diffSummary,
  IEdit,
  KernelRequest,
  lineDiff,
  mergedMetadata,
  parseKernelMessage,
  proposalTitle,
  proposalWarning
} from './proposal.js';

/** The kernel's comm target (live_document.LIVE_TARGET). */
export const LIVE_TARGET = 'dsh.live-notebook';
/** The front end's comm target the kernel opens to ask panels to connect (live_document.PING_TARGET). */
export const PING_TARGET = 'dsh.live-notebook-ping';

type Json = JSONObject;

/** How long after this page saw its kernel restart a restart the server reports is taken for the same one. */
const SEEN_RESTART_MS = 60_000;
/** The longest a connection sent on the kernel subshell waits for that subshell before it goes to the main shell
 * (milliseconds). */
const OPEN_SUBSHELL_MS = 2_000;

class RequestError extends Error {
  constructor(
    readonly code: string,
    message: string
  ) {
    super(message);
  }
}

/** Connects every notebook panel of the tracker to its kernel's live document. */
export class LiveNotebooks {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _user: User.IManager | null = null,
    private readonly _restarts: KernelRestarts | null = null
  ) {
    _tracker.widgetAdded.connect((_, panel) => this._add(panel));
    _tracker.forEach(panel => this._add(panel));
    _tracker.currentChanged.connect(() => this._reportActive());
    window.addEventListener('focus', () => this._reportActive());
    document.addEventListener('visibilitychange', () => this._reportActive());
  }

  private _add(panel: NotebookPanel): void {
    const live = new LiveNotebook(panel, () => this._tracker.currentWidget === panel, this._user, this._restarts);
    this._panels.add(live);
    panel.disposed.connect(() => {
      live.dispose();
      this._panels.delete(live);
    });
  }

  private _reportActive(): void {
    for (const live of this._panels) {
      live.reportActive();
    }
  }

  private readonly _panels = new Set<LiveNotebook>();
}

/** One notebook panel's connection to its kernel. */
export class LiveNotebook {
  constructor(
    readonly panel: NotebookPanel,
    private readonly _isCurrent: () => boolean,
    private readonly _user: User.IManager | null = null,
    restarts: KernelRestarts | null = null
  ) {
    const context = panel.sessionContext;
    context.kernelChanged.connect(() => this._kernelChanged());
    context.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this._forget();
      }
      if (status === 'restarting' || status === 'autorestarting') {
        this._restartSeenAt = Date.now(); // JupyterLab reconnects after a restart it sees: nothing to mend
      }
    });
    void context.ready.then(() => this._kernelChanged());
    if (restarts) {
      this._stopRestarts = restarts.onRestart(kernelId => this._restarted(kernelId, restarts));
    }
  }

  dispose(): void {
    this._disposed = true;
    this._stopRestarts();
    this._close();
  }

  /** The server restarted kernel `kernelId`. When it is this panel's and the page did not see the restart (made
   * in another tab or through the REST API), the page may never hear the new kernel's ping (see restarts.ts):
   * the connection is made again and the comm opened at once (the old one closed first, which also lets
   * JupyterLab drop the old kernel's subshell it keeps for the comm's target). A kernel that has not loaded dsh
   * yet refuses the comm, and its `%load_ext` pings as usual; one that loaded it already accepts it. A restart
   * the page saw is left to JupyterLab (a second reconnection would drop replies to cells sent in between, as a
   * Restart and Run All does). */
  private _restarted(kernelId: string, restarts: KernelRestarts): void {
    const kernel = this._kernel;
    if (!kernel || kernel.isDisposed || kernel.id !== kernelId || Date.now() - this._restartSeenAt < SEEN_RESTART_MS) {
      return;
    }
    void restarts.reconnect(kernel).then(() => {
      if (this._kernel === kernel) {
        this._open();
      }
    });
  }

  /** Tell the kernel whether this panel is the one the user works in now. */
  reportActive(): void {
    const active = this._active();
    if (this._comm && this._commOpen && !this._comm.isDisposed && active !== this._reportedActive) {
      this._reportedActive = active;
      this._comm.send({ type: 'active', active, path: this.panel.context.path });
    }
  }

  private _active(): boolean {
    return this._isCurrent() && document.visibilityState === 'visible';
  }

  private _kernelChanged(): void {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (kernel === this._kernel) {
      return;
    }
    this._close();
    if (this._kernel && !this._kernel.isDisposed) {
      this._kernel.removeCommTarget(PING_TARGET, this._pinged);
    }
    this._kernel = kernel;
    if (!kernel || !kernel.handleComms) {
      return; // another connection of this page handles the kernel's comms (a console opened first)
    }
    kernel.registerCommTarget(PING_TARGET, this._pinged);
    this._open();
  }

  /**
   * Connect to the kernel: a comm to its live target. `viaSubshell`: send it on the target's kernel subshell (once
   * JupyterLab has started it, see ask.ts), where the kernel takes it at once even while cells run on its main
   * shell; otherwise on the main shell, where it reaches the kernel before any cell sent after it.
   */
  private _open(viaSubshell = false): void {
    const kernel = this._kernel;
    if (this._disposed || !kernel || kernel.isDisposed) {
      return;
    }
    this._close();
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(LIVE_TARGET);
    } catch (error) {
      console.warn('dsh-jupyter: could not connect the notebook to its kernel', error);
      return;
    }
    this._comm = comm;
    this._commOpen = false;
    comm.onMsg = msg => this._received(comm, msg);
    comm.onClose = () => {
      if (this._comm === comm) {
        this._forget();
      }
    };
    const send = (): void => {
      if (this._comm !== comm || comm.isDisposed) {
        return;
      }
      this._reportedActive = this._active();
      try {
        comm.open({ path: this.panel.context.path, active: this._reportedActive });
      } catch (error) {
        console.warn('dsh-jupyter: could not connect the notebook to its kernel', error);
        this._forget();
        return;
      }
      this._commOpen = true;
      // For tests and for a look in the inspector: connected now, and how many comms this panel has opened (a
      // kernel restarted where this page could not see it leaves `connected` as it was; the count still moves).
      this.panel.node.dataset.dshLive = 'connected';
      this.panel.node.dataset.dshLiveOpens = String(++this._opens);
    };
    if (viaSubshell) {
      void onSubshell(kernel, comm, OPEN_SUBSHELL_MS).then(send);
    } else {
      send();
    }
  }

  /** How many of this notebook's code cells were sent to the kernel and have not finished (JupyterLab marks a
   * cell running as soon as its request is sent, so cells queued behind the running one count too). */
  private _cellsWaiting(): number {
    let waiting = 0;
    for (const cell of this.panel.content.widgets) {
      if (cell.model.type === 'code' && (cell.model as ICodeCellModel).executionState === 'running') {
        waiting++;
      }
    }
    return waiting;
  }

  /** The kernel went away (restart, change): its comm is gone, and so are its proposals. */
  private _forget(): void {
    this._comm = null;
    delete this.panel.node.dataset.dshLive;
    for (const id of [...this._proposals.keys()]) {
      this._settle(id);
    }
  }

  private _close(): void {
    const comm = this._comm;
    const opened = this._commOpen;
    this._forget();
    if (comm && !comm.isDisposed) {
      try {
        if (opened) {
          comm.close();
        } else {
          comm.dispose(); // still waiting for its subshell: the kernel never heard of it
        }
      } catch {
        // the kernel is gone already
      }
    }
  }

  private _received(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const message = parseKernelMessage(msg.content.data);
    if (!message) {
      console.warn('dsh-jupyter: ignored a message from the kernel that makes no sense', msg.content.data);
      return;
    }
    if (message.type === 'withdraw') {
      this._withdraw(message.id);
      return;
    }
    const request = message.request;
    if (request.op === 'propose') {
      this._propose(comm, request.id, request.edit, request.reason);
      return;
    }
    try {
      comm.send({ type: 'reply', id: request.id, ok: true, result: this._answer(request) });
    } catch (error) {
      const code = error instanceof RequestError ? error.code : 'error';
      const text = error instanceof Error ? error.message : String(error);
      comm.send({ type: 'reply', id: request.id, ok: false, error: code, message: text });
    }
  }

  private _answer(request: Exclude<KernelRequest, { op: 'propose' }>): Json {
    switch (request.op) {
      case 'ping':
        return { path: this.panel.context.path };
      case 'read':
        return {
          path: this.panel.context.path,
          cells: this._models().map(cellJson),
          active_cell_id: this.panel.content.activeCell?.model.id ?? null
        };
      case 'apply':
        return this._apply(request.edit);
      case 'outputs':
        return this._outputs(request.cellId, request.outputs, request.executionCount);
    }
  }

  // -- the model -------------------------------------------------------------------------------
  /** The cells of the model, in notebook order (the source of truth; widgets may be made lazily). */
  private _models(): ICellModel[] {
    const model = this.panel.content.model;
    return model ? Array.from(model.cells) : [];
  }

  private _cells(): Cell[] {
    return [...this.panel.content.widgets];
  }

  private _index(cellId: string): number {
    const index = this._models().findIndex(cell => cell.id === cellId);
    if (index < 0) {
      throw new RequestError(
        'not-found',
        `there is no cell ${JSON.stringify(cellId)} in the notebook (it may have been deleted); ` +
          'read the notebook again for the current cell ids'
      );
    }
    return index;
  }

  private _apply(edit: IEdit): Json {
    if (edit.action === 'run') {
      throw new RequestError('bad-request', 'a run is proposed, never applied as an edit');
    }
    const shared = this.panel.content.model?.sharedModel;
    if (!shared) {
      throw new RequestError('no-notebook', 'the notebook is not loaded');
    }
    if (edit.action === 'insert') {
      const count = this._models().length;
      const index =
        edit.cellId === null
          ? count
          : this._index(edit.cellId) + (edit.position === 'before' ? 0 : 1);
      const cell = shared.insertCell(index, {
        cell_type: edit.cellType,
        source: edit.source,
        metadata: mergedMetadata({}, edit) as JSONObject
      });
      this._reveal(index);
      return { cell_id: cell.id, index, before: null, after: cellJson(this._models()[index]) };
    }
    const index = this._index(edit.cellId ?? '');
    const before = cellJson(this._models()[index]);
    if (edit.action === 'delete') {
      shared.deleteCell(index);
      return { cell_id: edit.cellId, index, before, after: null };
    }
    const current = this._models()[index];
    const touchesMetadata = edit.metadata !== undefined || edit.tags !== undefined;
    if (edit.keepSource || current.type === edit.cellType) {
      if (!edit.keepSource) {
        current.sharedModel.setSource(edit.source);
      }
      if (touchesMetadata) {
        current.sharedModel.setMetadata(
          mergedMetadata(current.sharedModel.getMetadata() as Record<string, unknown>, edit) as JSONObject
        );
      }
    } else {
      const id = current.id; // the cell keeps its id when its type changes
      shared.transact(() => {
        shared.deleteCell(index);
        shared.insertCell(index, {
          id,
          cell_type: edit.cellType,
          source: edit.source,
          metadata: mergedMetadata(
            current.sharedModel.getMetadata() as Record<string, unknown>,
            edit
          ) as JSONObject
        });
      });
    }
    this._reveal(index);
    return { cell_id: edit.cellId, index, before, after: cellJson(this._models()[index]) };
  }

  private _outputs(cellId: string, outputs: Record<string, unknown>[], executionCount: number | null): Json {
    const cell = this._models()[this._index(cellId)];
    if (cell.type !== 'code') {
      throw new RequestError('not-code', `cell ${JSON.stringify(cellId)} is not a code cell`);
    }
    const model = cell as ICodeCellModel;
    model.outputs.clear();
    for (const output of outputs) {
      model.outputs.add(output as never);
    }
    model.executionCount = executionCount;
    return { cell_id: cellId };
  }

  private _reveal(index: number): void {
    const cell = this._cells()[index];
    if (cell) {
      void this.panel.content.scrollToCell(cell, 'smart');
    }
  }

  // -- proposals -------------------------------------------------------------------------------
  private _propose(comm: Kernel.IComm, id: number, edit: IEdit, reason: string | null): void {
    const cells = this._cells();
    let anchor: Cell | undefined;
    if (edit.cellId !== null) {
      anchor = cells.find(cell => cell.model.id === edit.cellId);
      if (!anchor) {
        comm.send({ type: 'reply', id, ok: false, error: 'not-found', message: 'no such cell' });
        return;
      }
    } else {
      anchor = cells[cells.length - 1];
    }
    const card = proposalCard(edit, reason, anchor, (choice, why) => {
      if (this._settle(id)) {
        comm.send({ type: 'reply', id, ok: true, result: { choice, reason: why, user: this._who() } });
      }
    });
    if (this.panel.context.contentsModel?.writable === false) {
      // Everyone in the room sees the proposal; only someone who may change the notebook decides.
      for (const button of card.querySelectorAll<HTMLButtonElement>('.dsh-proposal-actions button')) {
        button.disabled = true;
      }
      card.appendChild(
        element('div', 'dsh-proposal-readonly', 'Read-only for you: someone with write access decides.')
      );
    }
    if (!anchor) {
      this.panel.content.node.appendChild(card);
    } else if (edit.action === 'insert' && edit.cellId !== null && edit.position === 'before') {
      anchor.node.insertBefore(card, anchor.node.firstChild);
    } else {
      anchor.node.appendChild(card);
    }
    if (edit.action === 'delete' && anchor) {
      anchor.addClass('dsh-proposal-doomed');
    }
    this._proposals.set(id, { card, comm, anchor, anchorId: edit.cellId, doomed: edit.action === 'delete' });
    this._watchCells();
    const reveal = (): void => {
      card.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
      if (card.dataset.hidden === 'true' && !card.contains(document.activeElement)) {
        card.querySelector<HTMLButtonElement>('.dsh-proposal-reject')?.focus({ preventScroll: true });
      }
    };
    if (anchor) {
      void this.panel.content.scrollToCell(anchor, 'smart').then(reveal);
    } else {
      reveal();
    }
  }

  /** Remove a proposal's card (and its cell's mark); false when it was settled already. */
  private _settle(id: number): boolean {
    const pending = this._proposals.get(id);
    if (!pending) {
      return false;
    }
    this._proposals.delete(id);
    pending.card.remove();
    if (pending.doomed && pending.anchor && !pending.anchor.isDisposed) {
      pending.anchor.removeClass('dsh-proposal-doomed');
    }
    return true;
  }

  /** When the user deletes the cell a proposal is anchored to, the kernel hears at once (not at timeout). */
  private _watchCells(): void {
    const model = this.panel.content.model;
    if (!model || model === this._watched) {
      return;
    }
    this._watched = model;
    model.cells.changed.connect(() => {
      const ids = new Set(Array.from(model.cells, cell => cell.id));
      for (const [id, pending] of [...this._proposals]) {
        if (pending.anchorId !== null && !ids.has(pending.anchorId) && this._settle(id)) {
          pending.comm.send({
            type: 'reply',
            id,
            ok: false,
            error: 'not-found',
            message: 'the cell was deleted'
          });
        }
      }
    });
  }

  /** Who answers, as the session log names them (the collaboration identity, or the server's user). */
  private _who(): string | null {
    const identity = this._user?.identity;
    if (!identity) {
      return null;
    }
    return identity.display_name || identity.name || identity.username || null;
  }

  private _withdraw(id: number): void {
    this._settle(id);
  }

  /** The kernel loaded dsh (`%load_ext`, which pings every page): connect again. When more cells wait to run
   * behind it (a Run All), the connection goes on the kernel subshell: on the main shell it would reach the kernel
   * only after all of them, and their `%%dsh` turns would find no page. With no cell waiting, the main shell keeps
   * it ahead of the next cell the user runs. The kernel closes the ping itself as soon as it sent it (it cannot
   * know whether a page listens), so closing it here too would be a second close that each side reports as a comm
   * it does not know. */
  private readonly _pinged = (): void => {
    this._open(this._cellsWaiting() > 1);
  };

  private _kernel: Kernel.IKernelConnection | null = null;
  private _comm: Kernel.IComm | null = null;
  private _commOpen = false; // `_comm` was opened (on a subshell, once that subshell is there)
  private _reportedActive = false;
  private _disposed = false;
  private _opens = 0;
  private _restartSeenAt = -Infinity;
  private _stopRestarts: () => void = () => undefined;
  private readonly _proposals = new Map<number, IPendingProposal>();
  private _watched: INotebookModel | null = null;
}

/** A proposal shown and not yet answered. */
interface IPendingProposal {
  card: HTMLElement;
  comm: Kernel.IComm;
  anchor: Cell | undefined;
  anchorId: string | null;
  doomed: boolean;
}

/** A cell as the kernel reads it (nbformat's field names). */
function cellJson(model: ICellModel | undefined): Json | null {
  if (!model) {
    return null;
  }
  const code = model.type === 'code' ? (model as ICodeCellModel) : null;
  return {
    id: model.id,
    cell_type: model.type,
    source: model.sharedModel.getSource(),
    execution_count: code ? code.executionCount : null,
    outputs: code ? (code.outputs.toJSON() as unknown as JSONObject[]) : [],
    metadata: model.sharedModel.getMetadata() as JSONObject
  };
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = displayText(text);
  }
  return node;
}

/** Source text in a card: controls escaped, each hidden character as a visible, styled mark. */
function codeNodes(text: string): Node[] {
  return displayParts(text).map(part => {
    if (part.kind === 'text') {
      return document.createTextNode(part.text);
    }
    const mark = element('span', 'dsh-hidden-mark');
    mark.textContent = part.text;
    mark.title = `hidden character ${part.text.slice(1, -1)}`;
    return mark;
  });
}

/** The card of one proposal: heading, the edit as it would land, Accept / Reject and a reason. */
function proposalCard(
  edit: IEdit,
  reason: string | null,
  anchor: Cell | undefined,
  answer: (choice: 'accept' | 'reject', reason: string) => void
): HTMLElement {
  const card = element('div', `dsh-proposal dsh-proposal-${edit.action}`);
  const why = element('input', 'dsh-proposal-why jp-mod-styled');
  card.setAttribute('role', 'group');
  card.setAttribute('aria-label', proposalTitle(edit));
  // Keys typed in the card are the card's (Enter on a button, text in the reason), not notebook shortcuts.
  card.setAttribute('data-lm-suppress-shortcuts', 'true');
  card.addEventListener('keydown', event => {
    if (event.key === 'Escape') {
      event.preventDefault();
      answer('reject', why.value);
    }
    event.stopPropagation();
  });
  // Keep the notebook from taking clicks in the card as cell selection (it would steal the focus).
  for (const type of ['mousedown', 'pointerdown', 'dblclick']) {
    card.addEventListener(type, event => event.stopPropagation());
  }
  const head = element('div', 'dsh-proposal-head');
  head.appendChild(element('span', 'dsh-proposal-badge', 'dsh'));
  head.appendChild(element('span', 'dsh-proposal-title', proposalTitle(edit)));
  card.appendChild(head);
  if (reason) {
    card.appendChild(element('div', 'dsh-proposal-reason', reason));
  }
  const warning = proposalWarning(edit);
  if (warning) {
    const alert = element('div', 'dsh-proposal-warning', warning);
    alert.setAttribute('role', 'alert');
    card.appendChild(alert);
    card.dataset.hidden = 'true';
  }
  if (edit.action === 'insert' || edit.action === 'run') {
    const source = element('pre', 'dsh-proposal-source');
    source.dir = 'ltr';
    source.append(...codeNodes(edit.source));
    card.appendChild(source);
  } else if (edit.action === 'replace') {
    const lines = lineDiff(anchor?.model.sharedModel.getSource() ?? '', edit.source);
    head.appendChild(element('span', 'dsh-proposal-stat', diffSummary(lines)));
    const diff = element('pre', 'dsh-proposal-diff');
    diff.dir = 'ltr';
    for (const line of lines) {
      const sign = line.kind === 'added' ? '+' : line.kind === 'removed' ? '−' : ' ';
      const row = element('span', `dsh-diff-line dsh-diff-${line.kind}`);
      row.appendChild(element('span', 'dsh-diff-sign', sign));
      row.append(...codeNodes(line.text), '\n');
      diff.appendChild(row);
    }
    card.appendChild(diff);
  }
  const actions = element('div', 'dsh-proposal-actions');
  // With hidden characters, Reject is the answer that stands out (and takes the focus when shown).
  const accept = element(
    'button',
    `dsh-proposal-accept jp-mod-styled ${warning ? '' : 'jp-mod-accept'}`,
    'Accept'
  );
  const reject = element(
    'button',
    `dsh-proposal-reject jp-mod-styled ${warning ? 'jp-mod-warn' : ''}`,
    'Reject'
  );
  why.type = 'text';
  why.placeholder = 'Reason for the agent (optional)';
  why.setAttribute('aria-label', 'Reason for the agent (optional)');
  accept.type = 'button';
  reject.type = 'button';
  accept.addEventListener('click', () => answer('accept', ''));
  reject.addEventListener('click', () => answer('reject', why.value));
  why.addEventListener('keydown', event => {
    if (event.key === 'Enter') {
      event.preventDefault();
      answer('reject', why.value);
    }
  });
  actions.append(accept, reject, why);
  card.appendChild(actions);
  return card;
}
