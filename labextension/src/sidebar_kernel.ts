/**
 * The chat sidebar's line to a notebook's kernel: one comm to `dsh.sidebar` (dsh_jupyter/notebook/sidebar_comm.py),
 * kept open, carrying numbered requests (`bind`, `send`, `model`, `variables`) and the state the kernel sends
 * when a turn ends.
 *
 * A kernel without `%load_ext dsh_jupyter` has no such target and closes the comm at once: {@link connect}
 * rejects with a {@link NotLoadedError}. A kernel busy with a cell answers when the cell is done.
 */

import { Kernel, KernelMessage } from '@jupyterlab/services';

import { IVariableCandidate, parseVariables, VARIABLE_LIMIT } from './variables.js';

/** The comm target of the kernel side. */
export const SIDEBAR_TARGET = 'dsh.sidebar';

/** One row of the model picker. */
export interface IModelChoice {
  /** The model spec sent back (`null`: the notebook's `DshMagics.model`). */
  spec: string | null;
  label: string;
  available: boolean;
  note: string;
}

/** What the kernel says the sidebar shows. */
export interface ISidebarState {
  /** The widget model of the chat panel bound to the current session. */
  modelId: string;
  sessionId: string | null;
  busy: boolean;
  /** The model the sidebar's prompts use (`null`: the notebook's setting). */
  model: string | null;
  models: IModelChoice[];
}

/** The kernel answered a request with an error (its message is in the user's terms). */
export class SidebarRequestError extends Error {
  name = 'SidebarRequestError';
}

/** The kernel has no dsh extension loaded: it refused the comm. */
export class NotLoadedError extends Error {
  name = 'NotLoadedError';
}

function isModelChoice(value: unknown): value is IModelChoice {
  const row = value as Partial<IModelChoice> | null;
  return (
    typeof row === 'object' &&
    row !== null &&
    (row.spec === null || typeof row.spec === 'string') &&
    typeof row.label === 'string' &&
    typeof row.available === 'boolean' &&
    typeof row.note === 'string'
  );
}

/** The well-formed state in a kernel message, or `null`. */
export function parseState(data: unknown): ISidebarState | null {
  const state = data as Record<string, unknown> | null;
  if (
    typeof state !== 'object' ||
    state === null ||
    state.kind !== 'state' ||
    typeof state.modelId !== 'string' ||
    !(state.sessionId === null || typeof state.sessionId === 'string')
  ) {
    return null;
  }
  return {
    modelId: state.modelId,
    sessionId: state.sessionId as string | null,
    busy: state.busy === true,
    model: typeof state.model === 'string' ? state.model : null,
    models: Array.isArray(state.models) ? state.models.filter(isModelChoice) : []
  };
}

interface IPending {
  resolve: (value: Record<string, unknown>) => void;
  reject: (reason: Error) => void;
}

/** One open comm to a kernel's sidebar target. */
export class SidebarConnection {
  /** Called with each state the kernel sends unasked (a turn ended). */
  onState: ((state: ISidebarState) => void) | null = null;
  /** Called with a prompt sent from here that the kernel refused after taking it (before it reached the log),
   * and why. */
  onReturned: ((text: string, why: string) => void) | null = null;
  /** Called once when the comm closes (the kernel restarted, shut down or unloaded the extension). */
  onClosed: (() => void) | null = null;

  private constructor(private readonly _comm: Kernel.IComm) {}

  /**
   * Open the comm and bind: resolves with the first state; rejects with a {@link NotLoadedError} when the
   * kernel refuses the comm (no `%load_ext dsh_jupyter`).
   */
  static connect(kernel: Kernel.IKernelConnection): Promise<{ connection: SidebarConnection; state: ISidebarState }> {
    const comm = kernel.createComm(SIDEBAR_TARGET);
    const connection = new SidebarConnection(comm);
    return new Promise((resolve, reject) => {
      let bound = false;
      connection._pending.set(0, {
        resolve: data => {
          const state = parseState(data);
          if (state === null) {
            reject(new SidebarRequestError(String(data.message ?? 'the kernel gave no chat panel')));
            return;
          }
          bound = true;
          resolve({ connection, state });
        },
        reject
      });
      comm.onMsg = msg => connection._received(msg);
      comm.onClose = () => {
        connection._closed = true;
        for (const pending of connection._pending.values()) {
          pending.reject(new NotLoadedError('the kernel has no dsh extension loaded'));
        }
        connection._pending.clear();
        if (bound) {
          connection.onClosed?.();
        }
      };
      try {
        comm.open({ kind: 'bind', request: 0 });
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  get closed(): boolean {
    return this._closed || this._comm.isDisposed;
  }

  /** Ask the kernel for the state again. */
  async bind(): Promise<ISidebarState> {
    const state = parseState(await this._request({ kind: 'bind' }));
    if (state === null) {
      throw new SidebarRequestError('the kernel gave no chat panel');
    }
    return state;
  }

  /** Send a prompt; resolves with `sent` or `steered`, rejects with the kernel's error. */
  async send(text: string, model: string | null): Promise<string> {
    const reply = await this._request({ kind: 'send', text, model });
    return String(reply.mode ?? 'sent');
  }

  /** Choose the model of the sidebar's next prompts. */
  async chooseModel(model: string | null): Promise<ISidebarState> {
    const state = parseState(await this._request({ kind: 'model', model }));
    if (state === null) {
      throw new SidebarRequestError('the kernel did not take the model');
    }
    return state;
  }

  /** The notebook's variables whose name contains `query` (data frames first), for the `@` popup. */
  async variables(query: string): Promise<IVariableCandidate[]> {
    return parseVariables(await this._request({ kind: 'variables', query, limit: VARIABLE_LIMIT }));
  }

  /** Close the comm (the notebook closed or its kernel changed). */
  dispose(): void {
    this.onClosed = null;
    if (!this.closed) {
      try {
        this._comm.close();
      } catch {
        // the kernel is gone already
      }
    }
  }

  private _request(data: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.closed) {
      return Promise.reject(new NotLoadedError('the connection to the kernel is closed'));
    }
    const request = ++this._counter;
    return new Promise((resolve, reject) => {
      this._pending.set(request, { resolve, reject });
      this._comm.send({ ...data, request });
    });
  }

  private _received(msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as Record<string, unknown>;
    const request = typeof data.request === 'number' ? data.request : null;
    const pending = request === null ? undefined : this._pending.get(request);
    if (pending === undefined) {
      if (data.kind === 'returned' && typeof data.text === 'string') {
        this.onReturned?.(data.text, String(data.message ?? ''));
        return;
      }
      const state = parseState(data);
      if (state !== null) {
        this.onState?.(state);
      }
      return;
    }
    this._pending.delete(request as number);
    if (data.kind === 'error') {
      pending.reject(new SidebarRequestError(String(data.message ?? 'the kernel refused the request')));
    } else {
      pending.resolve(data);
    }
  }

  private _pending = new Map<number, IPending>();
  private _counter = 0;
  private _closed = false;
}
