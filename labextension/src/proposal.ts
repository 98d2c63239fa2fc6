/**
 * The DOM-free part of the live notebook: the messages the kernel sends (checked, since anything may
 * arrive on a comm), the edit they carry, and the line diff a proposed replacement is shown with.
 */

import { escapeText, hiddenWarning } from './escape.js';

export type CellType = 'code' | 'markdown' | 'raw';
export type EditAction = 'insert' | 'replace' | 'delete' | 'run';

/**
 * One edit the agent asks for, addressed by cell id (`null`: insert at the end). `run` is no edit: a
 * proposal to run the cell as it stands (`source`: what it holds when asked), answered like an edit's.
 */
export interface IEdit {
  action: EditAction;
  cellId: string | null;
  source: string;
  cellType: CellType;
  position: 'before' | 'after';
  /** Cell metadata keys to set (`null`: remove the key); `undefined`: leave the metadata alone. */
  metadata?: Record<string, unknown>;
  /** The cell's new tags (`[]`: none); `undefined`: leave them alone. */
  tags?: string[];
  /** A change of tags or metadata only: the source and type stay. */
  keepSource?: boolean;
}

/** A request of the kernel (`{type: "request", id, op, ...}`). */
export type KernelRequest =
  | { id: number; op: 'ping' }
  | { id: number; op: 'read' }
  | { id: number; op: 'apply'; edit: IEdit }
  | { id: number; op: 'propose'; edit: IEdit; reason: string | null }
  | {
      id: number;
      op: 'outputs';
      cellId: string;
      outputs: Record<string, unknown>[];
      executionCount: number | null;
    };

/** What the kernel may send: a request, or a proposal withdrawn (timeout, interrupt). */
export type KernelMessage =
  | { type: 'request'; request: KernelRequest }
  | { type: 'withdraw'; id: number; note: string };

const CELL_TYPES: ReadonlyArray<CellType> = ['code', 'markdown', 'raw'];

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The edit of a request, or `null` when its shape makes no sense. */
export function parseEdit(raw: unknown): IEdit | null {
  if (!isRecord(raw)) {
    return null;
  }
  const action = raw.action;
  if (action !== 'insert' && action !== 'replace' && action !== 'delete' && action !== 'run') {
    return null;
  }
  const cellId = raw.cell_id;
  if (cellId !== null && cellId !== undefined && typeof cellId !== 'string') {
    return null;
  }
  if (action !== 'insert' && typeof cellId !== 'string') {
    return null;
  }
  const source = raw.source ?? '';
  if (typeof source !== 'string') {
    return null;
  }
  const cellType = CELL_TYPES.includes(raw.cell_type as CellType)
    ? (raw.cell_type as CellType)
    : 'code';
  const metadata = raw.metadata;
  const tags = raw.tags;
  if (metadata !== undefined && metadata !== null && !isRecord(metadata)) {
    return null;
  }
  if (
    tags !== undefined &&
    tags !== null &&
    (!Array.isArray(tags) || !tags.every(tag => typeof tag === 'string'))
  ) {
    return null;
  }
  const edit: IEdit = {
    action,
    cellId: typeof cellId === 'string' ? cellId : null,
    source,
    cellType,
    position: raw.position === 'before' ? 'before' : 'after'
  };
  if (isRecord(metadata)) {
    edit.metadata = metadata;
  }
  if (Array.isArray(tags)) {
    edit.tags = tags as string[];
  }
  if (raw.keep_source === true) {
    edit.keepSource = true;
  }
  return edit;
}

/** A cell's metadata after `edit`'s metadata and tags (the kernel's `merged_metadata`, same rule). */
export function mergedMetadata(
  current: Record<string, unknown>,
  edit: IEdit
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...current };
  for (const [key, value] of Object.entries(edit.metadata ?? {})) {
    if (value === null) {
      delete merged[key];
    } else {
      merged[key] = value;
    }
  }
  if (edit.tags !== undefined) {
    if (edit.tags.length) {
      merged.tags = [...new Set(edit.tags)];
    } else {
      delete merged.tags;
    }
  }
  return merged;
}

/** A kernel message, or `null` when it makes no sense (the caller logs and ignores it). */
export function parseKernelMessage(data: unknown): KernelMessage | null {
  if (!isRecord(data) || typeof data.id !== 'number' || !Number.isInteger(data.id)) {
    return null;
  }
  const id = data.id;
  if (data.type === 'withdraw') {
    return { type: 'withdraw', id, note: typeof data.note === 'string' ? data.note : '' };
  }
  if (data.type !== 'request') {
    return null;
  }
  switch (data.op) {
    case 'ping':
    case 'read':
      return { type: 'request', request: { id, op: data.op } };
    case 'apply':
    case 'propose': {
      const edit = parseEdit(data.edit);
      if (!edit) {
        return null;
      }
      if (data.op === 'apply') {
        // a run is only ever proposed; applying one would overwrite the cell with its own source
        return edit.action === 'run' ? null : { type: 'request', request: { id, op: 'apply', edit } };
      }
      const reason = typeof data.reason === 'string' ? data.reason : null;
      return { type: 'request', request: { id, op: 'propose', edit, reason } };
    }
    case 'outputs': {
      if (typeof data.cell_id !== 'string' || !Array.isArray(data.outputs)) {
        return null;
      }
      const outputs = data.outputs.filter(isRecord);
      const count = data.execution_count;
      return {
        type: 'request',
        request: {
          id,
          op: 'outputs',
          cellId: data.cell_id,
          outputs,
          executionCount: typeof count === 'number' ? count : null
        }
      };
    }
    default:
      return null;
  }
}

/** One line of a diff: kept, removed (old source) or added (new source). */
export interface IDiffLine {
  kind: 'same' | 'removed' | 'added';
  text: string;
}

/** Above this many line pairs the diff is shown as all removed, then all added (no alignment). */
export const MAX_DIFF_PAIRS = 250_000;

function splitLines(text: string): string[] {
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

/** The line diff of `before` and `after` (a longest common subsequence of lines). */
export function lineDiff(before: string, after: string): IDiffLine[] {
  const a = splitLines(before);
  const b = splitLines(after);
  if (a.length * b.length > MAX_DIFF_PAIRS) {
    return [
      ...a.map(text => ({ kind: 'removed' as const, text })),
      ...b.map(text => ({ kind: 'added' as const, text }))
    ];
  }
  // lengths[i][j]: the longest common subsequence of a[i:] and b[j:].
  const lengths: number[][] = Array.from({ length: a.length + 1 }, () =>
    new Array<number>(b.length + 1).fill(0)
  );
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lengths[i][j] =
        a[i] === b[j]
          ? lengths[i + 1][j + 1] + 1
          : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  const lines: IDiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      lines.push({ kind: 'same', text: a[i] });
      i++;
      j++;
    } else if (lengths[i + 1][j] >= lengths[i][j + 1]) {
      lines.push({ kind: 'removed', text: a[i++] });
    } else {
      lines.push({ kind: 'added', text: b[j++] });
    }
  }
  while (i < a.length) {
    lines.push({ kind: 'removed', text: a[i++] });
  }
  while (j < b.length) {
    lines.push({ kind: 'added', text: b[j++] });
  }
  return lines;
}

/** The card's heading for a proposed edit. */
export function proposalTitle(edit: IEdit): string {
  const kind = edit.cellType === 'code' ? 'code cell' : `${edit.cellType} cell`;
  switch (edit.action) {
    case 'insert':
      return `The agent proposes a new ${kind}`;
    case 'replace':
      return 'The agent proposes a change to this cell';
    case 'delete':
      return 'The agent proposes to delete this cell';
    case 'run':
      return 'The agent asks to run this cell';
  }
}

/** Counts of a diff for its summary line: `+added −removed`. */
export function diffSummary(lines: ReadonlyArray<IDiffLine>): string {
  const added = lines.filter(line => line.kind === 'added').length;
  const removed = lines.filter(line => line.kind === 'removed').length;
  return `+${added} −${removed}`;
}

/** Source text as shown in a card: control characters escaped, hidden ones marked, line breaks and tabs kept. */
export function codeText(text: string): string {
  return escapeText(text);
}

/**
 * The card's warning when the edit's new source holds hidden characters (`null`: it holds none), e.g.
 * "This edit contains 2 hidden characters (…), shown as ⟨U+…⟩ marks: the cell would not be what it looks like."
 */
export function proposalWarning(edit: IEdit): string | null {
  if (edit.action === 'delete') {
    return null;
  }
  return edit.action === 'run' ? hiddenWarning(edit.source, 'code') : hiddenWarning(edit.source, 'edit');
}
