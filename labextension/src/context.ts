/**
 * The reference-context bundle the notebook host emits, and the words shown for it.
 *
 * The words are made once, in Python (`dsh_jupyter/ui/display.py`), and carried in the bundle's
 * `view`: the one line, each source's title, state and `[term, words]` rows, and the preview of what
 * the agent received. The `text/html` and `text/plain` forms of the same bundle say the same words.
 * A bundle saved before the `view` existed gets a line built from its labels alone.
 *
 * No DOM here: {@link ./mime} renders the view.
 */

import { displayText } from './escape.js';

/** The mime type of a prepared reference context. */
export const REFERENCE_CONTEXT_MIME = 'application/vnd.dsh.reference-context+json';

/** One referenced source as the host emits it (raw values, as in the session log). */
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

/** One source in words: its title, whether it is complete, and its rows. */
export interface ISourceView {
  title: string;
  state: string;
  rows: [string, string][];
}

/** The preview of what the agent received (already bounded and control-escaped by the host). */
export interface IPreviewView {
  heading: string;
  text: string;
}

/** What people read: the one line, each source, the preview. */
export interface IReferenceView {
  line: string;
  sources: ISourceView[];
  preview: IPreviewView | null;
}

/** The bundle: `{kind: 'session-reference', form, version, references, targetSessionId, capturedAt, view}`. */
export interface IReferenceContext {
  kind: 'session-reference';
  form?: string;
  version?: number;
  references: IReferenceSource[];
  targetSessionId?: string;
  capturedAt?: string;
  view?: IReferenceView;
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

function isRow(value: unknown): value is [string, string] {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    typeof value[0] === 'string' &&
    typeof value[1] === 'string'
  );
}

function sourceView(value: unknown): ISourceView | null {
  if (
    !isObject(value) ||
    typeof value.title !== 'string' ||
    typeof value.state !== 'string' ||
    !Array.isArray(value.rows) ||
    !value.rows.every(isRow)
  ) {
    return null;
  }
  return {
    title: displayText(value.title),
    state: displayText(value.state),
    rows: value.rows.map(([term, words]) => [displayText(term), displayText(words)])
  };
}

function previewView(value: unknown): IPreviewView | null {
  if (!isObject(value) || typeof value.heading !== 'string' || typeof value.text !== 'string') {
    return null;
  }
  // A multi-line body: line feeds stay, every other control becomes visible.
  const text = value.text
    .split('\n')
    .map(line => displayText(line))
    .join('\n');
  return { heading: displayText(value.heading), text };
}

/** The view of a bundle from before the host sent one: a line naming the sources. */
function labelsView(references: Record<string, unknown>[]): IReferenceView {
  const titles = references.map(source =>
    displayText(typeof source.label === 'string' ? source.label : source.sessionId)
  );
  return {
    line: `Referenced: ${titles.join(', ')}`,
    sources: titles.map(title => ({ title, state: '', rows: [] })),
    preview: null
  };
}

/**
 * The words to show for a valid bundle (see {@link invalidReason}): the host's `view` when it is
 * well formed, else a line from the sources' labels. Every string is control-escaped again here, so
 * a hand-edited notebook cannot smuggle a control character through.
 */
export function referenceView(data: Record<string, unknown>): IReferenceView {
  const references = data.references as Record<string, unknown>[];
  const view = data.view;
  if (isObject(view) && typeof view.line === 'string' && Array.isArray(view.sources)) {
    const sources = view.sources.map(sourceView);
    if (sources.every((source): source is ISourceView => source !== null)) {
      return { line: displayText(view.line), sources, preview: previewView(view.preview) };
    }
  }
  return labelsView(references);
}
