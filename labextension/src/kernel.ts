/**
 * What the notebook's kernel says about itself: its current dsh session.
 *
 * The dsh IPython extension registers the comm target below; opening a comm asks once and the kernel
 * answers `{sessionId}` (or `null` before the first `%%dsh` cell) and closes it. A busy kernel (a
 * foreground cell running) answers late: callers get `null` after a short wait and carry on.
 */

import { NotebookPanel } from '@jupyterlab/notebook';

/** The comm target of the kernel side (dsh_jupyter/notebook/frontend_comm.py). */
export const CURRENT_SESSION_TARGET = 'dsh.current-session';

/** How long to wait for the kernel before going without its answer (milliseconds). */
export const KERNEL_ANSWER_MS = 400;

/**
 * The id of the kernel's current session, or `null` when there is none, no dsh extension is loaded in
 * the kernel, or it did not answer in time.
 */
export async function currentSessionId(panel: NotebookPanel): Promise<string | null> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.status === 'dead') {
    return null;
  }
  return new Promise<string | null>(resolve => {
    let settled = false;
    const finish = (value: string | null): void => {
      if (!settled) {
        settled = true;
        resolve(value);
      }
    };
    try {
      const comm = kernel.createComm(CURRENT_SESSION_TARGET);
      comm.onMsg = msg => {
        const data = msg.content.data as { sessionId?: unknown };
        finish(typeof data.sessionId === 'string' ? data.sessionId : null);
      };
      comm.onClose = () => finish(null);
      comm.open({});
    } catch {
      finish(null);
    }
    window.setTimeout(() => finish(null), KERNEL_ANSWER_MS);
  });
}
