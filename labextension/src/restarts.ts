/**
 * Kernel restarts made where this page could not see them: in another tab, or through the REST API.
 *
 * After such a restart jupyter-server may not tell this page's kernel socket (jupyter-server/jupyter_server#247,
 * open): the new kernel's "starting" can be lost, and the socket's channels can stay on the old kernel's, so what
 * the new kernel broadcasts (the ping `%load_ext` sends the notebook panels, a chat's updates) may never arrive.
 * The server's event bus does tell (schema `kernel_actions/v1`, action `restart`). Whoever holds a connection to
 * that kernel then has it made again, as JupyterLab does after a restart it asked for itself: once per restart,
 * however many of this page's parts ask (the live notebook and the chat sidebar both do).
 */

import { Event, Kernel } from '@jupyterlab/services';

/** The schema of jupyter-server's events for kernel actions (start, interrupt, restart, shutdown). */
export const KERNEL_ACTIONS = 'https://events.jupyter.org/jupyter_server/kernel_actions/v1';

/** The restarts the server reports, and one reconnection of a kernel connection per restart. */
export class KernelRestarts {
  constructor(events: Event.IManager) {
    events.stream.connect(this._onEvent, this);
  }

  /** Call `listener` with the id of each kernel the server restarts, whoever asked for it (this page included);
   * returns what stops it. */
  onRestart(listener: (kernelId: string) => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /** `kernel`'s connection made again after its latest restart; the same promise for everyone who asks. A failed
   * reconnection resolves too: the connection's own status says so. */
  reconnect(kernel: Kernel.IKernelConnection): Promise<void> {
    let pending = this._reconnects.get(kernel);
    if (pending === undefined) {
      pending = kernel.reconnect().catch(() => undefined);
      this._reconnects.set(kernel, pending);
    }
    return pending;
  }

  private _onEvent(_sender: unknown, event: Event.Emission): void {
    if (event.schema_id !== KERNEL_ACTIONS || event.action !== 'restart' || event.status !== 'success') {
      return;
    }
    const kernelId = event.kernel_id;
    if (typeof kernelId === 'string') {
      this._reconnects = new WeakMap(); // a new restart: its own reconnection
      for (const listener of [...this._listeners]) {
        listener(kernelId);
      }
    }
  }

  private _reconnects = new WeakMap<Kernel.IKernelConnection, Promise<void>>();
  private readonly _listeners = new Set<(kernelId: string) => void>();
}

const watchers = new WeakMap<Event.IManager, KernelRestarts>();

/** The one watcher of `events` (a page's plugins share it, so a restart reconnects each connection once). */
export function kernelRestarts(events: Event.IManager): KernelRestarts {
  let watcher = watchers.get(events);
  if (watcher === undefined) {
    watcher = new KernelRestarts(events);
    watchers.set(events, watcher);
  }
  return watcher;
}
