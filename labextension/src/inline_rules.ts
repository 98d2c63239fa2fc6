/**
 * When a ghost-text completion would be pointless, so nothing is sent (DOM-free, unit-tested on Node).
 *
 * The page decides before any request leaves it: an empty cell, the cursor inside a word, after a comment
 * hash, inside a string that holds a path being typed, on the `%%dsh` magic line, or in an `@` mention (the
 * mention popup completes those).
 */

import { isDshCell, mentionAt } from './mentions.js';

/** What a cell completes as: code, or prose for a `%%dsh` prompt. */
export type CompletionMode = 'code' | 'prose';

/** The mode of a cell holding `text`. */
export function completionMode(text: string): CompletionMode {
  return isDshCell(text) ? 'prose' : 'code';
}

const WORD_CHAR = /[\p{L}\p{N}_]/u;
const PATH_LIKE = /^(?:~|\.{1,2})?[\\/]|[\\/]|^[A-Za-z]:\\|\.\w{1,5}$/;

/**
 * Where the current line of code stands: in a comment, or in a string (and which text it holds so far).
 *
 * Python-style: `#` starts a comment outside strings; `'`, `"` and their triple forms open strings; a
 * backslash escapes the next character inside a string.
 */
export function lineState(line: string): { comment: boolean; string: string | null } {
  let quote: string | null = null;
  let start = 0;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === '\\') {
        i++;
      } else if (line.startsWith(quote, i)) {
        i += quote.length - 1;
        quote = null;
      }
    } else if (ch === '#') {
      return { comment: true, string: null };
    } else if (ch === '"' || ch === "'") {
      quote = line.startsWith(ch.repeat(3), i) ? ch.repeat(3) : ch;
      i += quote.length - 1;
      start = i + 1;
    }
  }
  return { comment: false, string: quote ? line.slice(start) : null };
}

/**
 * Why a completion at `offset` of a cell holding `text` is pointless, or `null` when it is worth asking.
 */
export function pointlessReason(text: string, offset: number): string | null {
  const prefix = text.slice(0, offset);
  const after = text.slice(offset);
  if (!prefix.trim()) {
    return 'empty cell';
  }
  if (after.length && WORD_CHAR.test(after[0])) {
    return 'inside a word';
  }
  const line = prefix.slice(prefix.lastIndexOf('\n') + 1);
  if (completionMode(text) === 'prose') {
    if (!prefix.includes('\n')) {
      return 'on the %%dsh line';
    }
    return mentionAt(text, offset) ? 'in an @ mention' : null;
  }
  const state = lineState(line);
  if (state.comment) {
    return 'after a comment hash';
  }
  if (state.string !== null && PATH_LIKE.test(state.string)) {
    return 'typing a path in a string';
  }
  return null;
}
