/**
 * What the notebook's kernel says about itself: its current dsh session.
 *
 * The dsh IPython extension registers the comm target below; opening a comm asks once and the kernel
 * answers `{sessionId}` (or `null` before the first `%%dsh` cell) and closes it, on the comm target's own
 * subshell when the kernel has subshells (ask.ts), so also while a cell runs. A kernel that cannot answer in
 * time (no subshells and a cell running, or a slow completion request ahead of the question): callers get its
 * last answer after a short wait and carry on. {@link CurrentSessions} asks after every cell a
 * notebook runs (the only way the current session changes), so that last answer is fresh.
 */

import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { askKernel, POPUP_ANSWER_MS } from './ask.js';

/** The comm target of the kernel side (dsh_jupyter/notebook/frontend_comm.py). */
export const CURRENT_SESSION_TARGET = 'dsh.current-session';

/** The answer of each kernel (by kernel id) to the latest question answered, kept for when a later question is
 * answered too late; `asked` numbers the question, so a late answer to an older one never replaces it. */
const lastAnswers = new Map<string, { sessionId: string | null; asked: number }>();
/** Questions asked so far (any kernel): numbers them in the order they were asked. */
let questionsAsked = 0;

/**
 * The id of the kernel's current session, or `null` when there is none or no dsh extension is loaded in
 * the kernel. A kernel that does not answer in time (busy with a cell, or with the popup's other
 * questions) gets its last answer instead; an answer that arrives late is remembered for the next call.
 */
export async function currentSessionId(panel: NotebookPanel): Promise<string | null> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.status === 'dead') {
    return null;
  }
  const kernelId = kernel.id;
  const asked = ++questionsAsked;
  const last = (): string | null => lastAnswers.get(kernelId)?.sessionId ?? null;
  const answer = (data: unknown): string | null => {
    const sessionId = (data as { sessionId?: unknown } | null)?.sessionId;
    const id = typeof sessionId === 'string' ? sessionId : null;
    // Answers can come out of order (one question waited for its subshell, or went to a busy main shell): the
    // answer to an older question (before the first `%%dsh` cell: no session) must not replace a newer one's.
    if ((lastAnswers.get(kernelId)?.asked ?? 0) < asked) {
      lastAnswers.set(kernelId, { sessionId: id, asked });
    }
    return id;
  };
  return askKernel(kernel, CURRENT_SESSION_TARGET, {}, answer, last, POPUP_ANSWER_MS);
}

/** The kernel's last answer about its current session (`null`: none yet, or no session), without asking. */
export function lastSessionId(panel: NotebookPanel): string | null {
  const kernel = panel.sessionContext.session?.kernel;
  return kernel ? lastAnswers.get(kernel.id)?.sessionId ?? null : null;
}

/** How long after a cell finishes the kernel is asked (it is idle by then, so it answers at once). */
const ASK_AFTER_CELL_MS = 50;

/**
 * Keeps {@link currentSessionId}'s memory of each open notebook's kernel current: asks once after every
 * executed cell (`execute_reply`), and forgets a kernel that restarts.
 */
export class CurrentSessions {
  constructor(tracker: INotebookTracker) {
    tracker.widgetAdded.connect((_, panel) => this._watch(panel));
    tracker.forEach(panel => this._watch(panel));
  }

  private _watch(panel: NotebookPanel): void {
    const context = panel.sessionContext;
    let kernel: Kernel.IKernelConnection | null = null;
    const onMessage = (_: unknown, args: Kernel.IAnyMessageArgs): void => {
      if (args.direction === 'recv' && KernelMessage.isExecuteReplyMsg(args.msg as KernelMessage.IMessage)) {
        window.setTimeout(() => void currentSessionId(panel), ASK_AFTER_CELL_MS);
      }
    };
    const onStatus = (connection: Kernel.IKernelConnection, status: Kernel.Status): void => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        lastAnswers.delete(connection.id);
      }
    };
    const attach = (): void => {
      if (kernel) {
        kernel.anyMessage.disconnect(onMessage);
        kernel.statusChanged.disconnect(onStatus);
      }
      kernel = context.session?.kernel ?? null;
      if (kernel) {
        kernel.anyMessage.connect(onMessage);
        kernel.statusChanged.connect(onStatus);
      }
    };
    context.kernelChanged.connect(attach);
    attach();
    panel.disposed.connect(() => {
      context.kernelChanged.disconnect(attach);
      if (kernel) {
        kernel.anyMessage.disconnect(onMessage);
        kernel.statusChanged.disconnect(onStatus);
      }
    });
  }
}
