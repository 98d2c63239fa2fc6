/**
 * Where an `@` mention is being typed in a `%%dsh` cell.
 *
 * A `%%dsh` cell's first line holds the magic and its options; the body below it is the prompt. In the
 * body, `@` starts a mention when it opens the text or follows whitespace or an opening bracket or
 * quote, so `name@example.org` is left alone. The mention token runs up to the next whitespace, `@`,
 * bracket or parenthesis; `@"` starts a quoted file path that may hold spaces.
 */

/** The `%%dsh` cell magic on the first non-blank line of a cell. */
const DSH_CELL = /^\s*%%dsh(?=\s|$)/;

/**
 * A mention being typed at the end of a line prefix: `@` at the start or after whitespace, an opening
 * bracket or a quote, then either `"` and anything but a quote (a quoted path) or a plain token.
 */
const TYPED_MENTION = /(?<=^|[\s([{"'`])@("[^"]*|[^\s@[\]()"]*)$/;

/** Characters that end a plain (unquoted) mention token. */
const TOKEN_END = /[\s@[\]()"]/;

/** The mention token around a cursor. */
export interface IMentionToken {
  /** Offset of the `@`. */
  start: number;
  /** Offset just after the token (the cursor or later, when the cursor is inside the token). */
  end: number;
  /** The text typed after `@` (and after the opening quote of a quoted path) up to the cursor. */
  query: string;
  /** True for the `@"…` form. */
  quoted: boolean;
}

/**
 * True when `text` is a `%%dsh` cell.
 */
export function isDshCell(text: string): boolean {
  return DSH_CELL.test(text);
}

/**
 * The mention token that the cursor at `offset` is in, or `null`.
 *
 * Only the body of a `%%dsh` cell is considered; the magic line never completes.
 */
export function mentionAt(text: string, offset: number): IMentionToken | null {
  if (!isDshCell(text) || offset < 0 || offset > text.length) {
    return null;
  }
  const bodyStart = text.indexOf('\n', text.search(/%%dsh/));
  if (bodyStart < 0 || offset <= bodyStart) {
    return null;
  }
  const lineStart = text.lastIndexOf('\n', offset - 1) + 1;
  const match = TYPED_MENTION.exec(text.slice(lineStart, offset));
  if (!match) {
    return null;
  }
  const start = lineStart + match.index;
  const quoted = match[1].startsWith('"');
  let end = offset;
  if (quoted) {
    while (end < text.length && text[end] !== '"' && text[end] !== '\n') {
      end++;
    }
    if (text[end] === '"') {
      end++;
    }
  } else {
    while (end < text.length && !TOKEN_END.test(text[end])) {
      end++;
    }
  }
  return { start, end, query: quoted ? match[1].slice(1) : match[1], quoted };
}

/**
 * The prompt text that inserts a file path mention: `@path`, or `@"path"` when it holds whitespace.
 */
export function fileMention(path: string): string {
  return /[\s()[\]]/.test(path) && !path.includes('"') ? `@"${path}"` : `@${path}`;
}

/** One yjs text delta operation. */
export interface IDeltaOp {
  insert?: unknown;
  delete?: number;
  retain?: number;
}

/**
 * True for an edit a person makes key by key: one character typed (or a selection replaced by it),
 * one deleted, or a folder completion (text ending with `/`) inserted.
 */
export function isTypingEdit(delta: ReadonlyArray<IDeltaOp> | undefined): boolean {
  if (!delta) {
    return false;
  }
  const inserted = delta
    .map(op => (typeof op.insert === 'string' ? op.insert : ''))
    .join('');
  const deleted = delta.reduce((sum, op) => sum + (op.delete ?? 0), 0);
  if (inserted.length === 1) {
    return true;
  }
  if (inserted.length === 0) {
    return deleted === 1;
  }
  return inserted.endsWith('/') && !inserted.includes('\n');
}
