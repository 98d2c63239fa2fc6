/**
 * Two changes made to one text at the same time, combined (DOM-free).
 *
 * A prompt box's view (`widgets/prompt.ts`) shows what its user types at once and tells the kernel after; the
 * kernel changes the same text too (the picker inserts a mention, a refused prompt comes back). A kernel change
 * computed before the last keys reached the kernel would replace what the box shows and drop those keys. The
 * view merges it instead: the kernel says which text its change started from (`base`), and the two changes, each
 * reduced to the one range it replaced, are applied together when the ranges do not touch.
 */

/** One change of a text: `[start, end)` of the text it started from became `text`. */
export interface ISplice {
  start: number;
  end: number;
  text: string;
}

/** The kernel's change applied to the text typed meanwhile: the new text and where the change landed in it. */
export interface IMerged {
  text: string;
  /** Where the change starts in the typed text (and in `text`). */
  at: number;
  /** How many characters of the typed text it replaced. */
  removed: number;
  /** How many characters it put there. */
  inserted: number;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** The one range that turns `before` into `after`: what they share at the start and at the end is kept, and
 * a range never splits a character written as two UTF-16 units. */
export function spliceBetween(before: string, after: string): ISplice {
  const limit = Math.min(before.length, after.length);
  let start = 0;
  while (start < limit && before.charCodeAt(start) === after.charCodeAt(start)) {
    start += 1;
  }
  if (start > 0 && isHighSurrogate(before.charCodeAt(start - 1))) {
    start -= 1;
  }
  let tail = 0;
  while (
    tail < limit - start &&
    before.charCodeAt(before.length - 1 - tail) === after.charCodeAt(after.length - 1 - tail)
  ) {
    tail += 1;
  }
  if (tail > 0 && isLowSurrogate(before.charCodeAt(before.length - tail))) {
    tail -= 1;
  }
  return { start, end: before.length - tail, text: after.slice(start, after.length - tail) };
}

/**
 * `theirs` and `ours` are two changes of `base`: `ours` with the change `theirs` made applied too, or `null` when
 * both changed the same part of `base` (one of them would be lost; the caller keeps `ours`). Where both only
 * inserted at the same place, the change of `theirs` comes first: it was made before the keys it raced with.
 * `joiner` goes between the text `theirs` put there and text typed right after it, unless one of them already
 * has it there (a refused prompt given back stays on its own line above what was typed since).
 */
export function mergeEdits(base: string, theirs: string, ours: string, joiner = ''): IMerged | null {
  if (ours === base) {
    return { text: theirs, at: 0, removed: ours.length, inserted: theirs.length };
  }
  if (theirs === base || theirs === ours) {
    return { text: ours, at: 0, removed: 0, inserted: 0 };
  }
  const kernel = spliceBetween(base, theirs);
  const typed = spliceBetween(base, ours);
  let at: number;
  let text = kernel.text;
  if (kernel.end <= typed.start) {
    at = kernel.start; // before what was typed: the typed text's positions there are the base's
    const meets = kernel.end === typed.start && text.length > 0 && typed.text.length > 0;
    if (meets && joiner && !text.endsWith(joiner) && !typed.text.startsWith(joiner)) {
      text += joiner;
    }
  } else if (typed.end <= kernel.start) {
    at = kernel.start + ours.length - base.length; // after it: shifted by what typing added
  } else {
    return null;
  }
  const removed = kernel.end - kernel.start;
  return {
    text: ours.slice(0, at) + text + ours.slice(at + removed),
    at,
    removed,
    inserted: text.length
  };
}

/** The box's text once a prompt the kernel did not take (`text`) is back: on its own line above what was `typed`
 * since it was sent. (The kernel's own give-back says the same with `mergeEdits`' joiner.) */
export function givenBack(text: string, typed: string): string {
  return typed ? `${text}\n${typed}` : text;
}

/** Where a caret at `caret` in the typed text is once `merged` applied the kernel's change: moved with the text
 * after the change, at the end of the change when it was inside the range the change replaced. */
export function caretAfter(merged: IMerged, caret: number): number {
  if (caret <= merged.at) {
    return caret === merged.at && merged.removed === 0 ? caret + merged.inserted : caret;
  }
  if (caret < merged.at + merged.removed) {
    return merged.at + merged.inserted;
  }
  return caret + merged.inserted - merged.removed;
}
