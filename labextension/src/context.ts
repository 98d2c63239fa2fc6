/**
 * The reference-context bundle the notebook host emits, and the rows shown for each source.
 *
 * No DOM here: {@link ./mime} renders these rows.
 */

import { displayText } from './escape.js';

/** The mime type of a prepared reference context. */
export const REFERENCE_CONTEXT_MIME = 'application/vnd.dsh.reference-context+json';

/** One referenced source as the host emits it. */
export interface IReferenceSource {
  sessionId: string;
  label: string;
  capturedFormatVersion?: number;
  capturedThroughSeq: number | null;
  compacted: boolean;
  originalMessages: number;
  retainedMessages: number;
  omittedMessages: number;
  omittedBytes: number;
  truncated: boolean;
  inputIndex: number;
  spillPath?: string | null;
}

/** The bundle: `{kind: 'session-reference', form: 'recall', version: 1, references, targetSessionId}`. */
export interface IReferenceContext {
  kind: 'session-reference';
  form?: string;
  version?: number;
  references: IReferenceSource[];
  targetSessionId?: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Why `data` is not a displayable reference context, or `null` when it is.
 */
export function invalidReason(data: unknown): string | null {
  if (!isObject(data)) {
    return 'the data is not a JSON object';
  }
  if (data.kind !== 'session-reference') {
    return `kind is ${JSON.stringify(data.kind ?? null)}, not "session-reference"`;
  }
  if (!Array.isArray(data.references)) {
    return 'references is not a list';
  }
  const bad = data.references.findIndex(item => !isObject(item));
  if (bad >= 0) {
    return `reference ${bad} is not an object`;
  }
  return null;
}

function yesNo(value: unknown): string {
  return value === true ? 'yes' : value === false ? 'no' : displayText(value);
}

function count(value: unknown): string {
  return typeof value === 'number' && Number.isFinite(value)
    ? value.toLocaleString('en-US')
    : value === undefined || value === null
      ? '—'
      : displayText(value);
}

/** The `[term, value]` rows shown for one source. */
export function sourceRows(source: Record<string, unknown>): [string, string][] {
  const seq = source.capturedThroughSeq;
  return [
    ['Label', displayText(source.label)],
    ['Session id', displayText(source.sessionId)],
    ['Captured through seq', seq === null ? 'none (empty log)' : count(seq)],
    ['Format version', count(source.capturedFormatVersion ?? 0)],
    ['Compacted', yesNo(source.compacted)],
    ['Messages retained', `${count(source.retainedMessages)} of ${count(source.originalMessages)}`],
    ['Omitted messages', count(source.omittedMessages)],
    ['Omitted bytes', count(source.omittedBytes)],
    ['Truncated', yesNo(source.truncated)],
    [
      'Full snapshot',
      typeof source.spillPath === 'string' && source.spillPath !== ''
        ? displayText(source.spillPath)
        : source.truncated === true
          ? 'not saved'
          : '—'
    ]
  ];
}
