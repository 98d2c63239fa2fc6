/**
 * The notebook's variables, asked of its kernel: what `@` offers before sessions in a `%%dsh` cell.
 *
 * A comm to the target below is answered at once with `{variables: [{name, kind, type, brief, mention}]}`
 * (data frames first) and closed, also while a cell runs when the kernel has subshells (ask.ts). A kernel
 * without subshells answers late while a cell runs, one without the dsh extension never: callers get `[]`
 * after a short wait and carry on with sessions and files. (The kernel's status cannot tell: the stock
 * completer's own request makes an idle kernel busy for a moment.)
 */

import { NotebookPanel } from '@jupyterlab/notebook';

import { askKernel, POPUP_ANSWER_MS } from './ask.js';

/** The comm target of the kernel side (dsh_jupyter/workspace/variable_refs.py). */
export const VARIABLES_TARGET = 'dsh.variables';

/** How many variables one request asks for. */
export const VARIABLE_LIMIT = 50;

/** One variable as the kernel lists it. */
export interface IVariableCandidate {
  name: string;
  /** `dataframe`, `series`, `array` or `other`. */
  kind: string;
  /** The value's type name, e.g. `DataFrame`. */
  type: string;
  /** Type and shape for people, e.g. `DataFrame 1,000×4`. */
  brief: string;
  /** The mention to insert: `@[df](dsh-variable:df)`. */
  mention: string;
}

/** The well-formed entries of a kernel answer (anything else is dropped). */
export function parseVariables(data: unknown): IVariableCandidate[] {
  const list = (data as { variables?: unknown } | null)?.variables;
  if (!Array.isArray(list)) {
    return [];
  }
  return list.filter(
    (entry): entry is IVariableCandidate =>
      typeof entry === 'object' &&
      entry !== null &&
      ['name', 'kind', 'type', 'brief', 'mention'].every(
        key => typeof (entry as Record<string, unknown>)[key] === 'string'
      ) &&
      /^@\[[^\]]*\]\(dsh-variable:[^)\s]+\)$/.test((entry as IVariableCandidate).mention)
  );
}

/**
 * The kernel's variables whose name contains `query`, data frames first; `[]` when the kernel is
 * missing, has no dsh extension loaded, or does not answer in time (busy, without subshells).
 */
export async function listVariables(
  panel: NotebookPanel,
  query: string
): Promise<IVariableCandidate[]> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.status === 'dead') {
    return [];
  }
  return askKernel(kernel, VARIABLES_TARGET, { query, limit: VARIABLE_LIMIT }, parseVariables, () => [],
    POPUP_ANSWER_MS);
}
