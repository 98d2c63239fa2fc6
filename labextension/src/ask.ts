/**
 * One question to a notebook's kernel: a comm to one of the dsh targets, which the kernel answers once and
 * closes (dsh_jupyter/notebook/frontend_comm.py). The `@` popup asks two: the kernel's current session
 * (kernel.ts) and its variables (variables.ts). The notebook's live connection (notebook.ts) is opened on its
 * subshell the same way ({@link onSubshell}) when cells wait to run behind `%load_ext`.
 *
 * JupyterLab 4.4 and later give each comm target a kernel subshell of its own when the kernel has subshells
 * (ipykernel 7). The question is opened there once that subshell exists, so the kernel answers at once even
 * while a cell runs on its main shell. A kernel without subshells (or a subshell slow to start) gets the
 * question on its main shell, where a running cell holds it up: the caller then gets its fallback after
 * `waitMs` and carries on.
 */

import { Kernel } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

/**
 * How long the `@` popup's questions (the current session, the variables) wait for the kernel before going
 * without its answer (milliseconds). A kernel with subshells answers in a few milliseconds even while a cell
 * runs, but a loaded machine can take a while; the popup asks them side by side and must answer JupyterLab
 * within its provider timeout (a second by default), or JupyterLab shows it without any of dsh's items.
 */
export const POPUP_ANSWER_MS = 800;

/** The longest share of `waitMs` spent waiting for the target's subshell before asking on the main shell. */
const SUBSHELL_SHARE = 0.5;

/**
 * Ask `target` on `kernel` with `data`: `answer(data)` of the kernel's one message, or `fallback()` when the
 * comm closes without one, cannot be opened, or no answer came within `waitMs` (`answer` is still called with
 * an answer that comes later).
 */
export function askKernel<T>(
  kernel: Kernel.IKernelConnection,
  target: string,
  data: JSONObject,
  answer: (data: unknown) => T,
  fallback: () => T,
  waitMs: number
): Promise<T> {
  return new Promise<T>(resolve => {
    let settled = false;
    const finish = (value: () => T): void => {
      if (!settled) {
        settled = true;
        resolve(value());
      }
    };
    window.setTimeout(() => finish(fallback), waitMs);
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(target);
    } catch {
      finish(fallback);
      return;
    }
    comm.onMsg = msg => {
      const value = answer(msg.content.data); // also when it comes too late: `answer` may keep it for later
      finish(() => value);
    };
    comm.onClose = () => finish(fallback);
    void onSubshell(kernel, comm, waitMs * SUBSHELL_SHARE).then(() => {
      if (settled) {
        comm.dispose(); // never opened: nobody waits for its answer
        return;
      }
      try {
        comm.open(data);
      } catch {
        finish(fallback);
      }
    });
  });
}

/**
 * Resolves once `comm` may be opened: when the subshell JupyterLab starts for its target is there, at once
 * when there will be none (an older JupyterLab, comms over subshells switched off, a kernel without
 * subshells, a subshell that failed to start), and after `capMs` at the latest.
 */
export async function onSubshell(kernel: Kernel.IKernelConnection, comm: Kernel.IComm, capMs: number): Promise<void> {
  // Not in Kernel.IComm: JupyterLab's comm class has it since 4.4.
  const started = (comm as { subshellStarted?: Promise<void> }).subshellStarted;
  if (!started || String(comm.commsOverSubshells ?? 'disabled') === 'disabled') {
    return;
  }
  const ready = kernel.info.then(() => (kernel.supportsSubshells ? started : undefined));
  let timer = 0;
  await Promise.race([
    ready.catch(() => undefined),
    new Promise<void>(resolve => {
      timer = window.setTimeout(resolve, capMs);
    })
  ]);
  window.clearTimeout(timer);
}
