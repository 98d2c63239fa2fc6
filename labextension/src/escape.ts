/**
 * Display escaping shared by the completion popup, the reference-context renderer and the proposal cards.
 *
 * Every string from a session (label, id, cwd, path) is put into the DOM with `textContent`, never as
 * HTML. Terminal control characters are also made visible, the way the Python host shows them in
 * `text/plain`: each C0 control (U+0000–U+001F, line feed included, since these are one-line fields),
 * DEL and each C1 control (U+007F–U+009F) becomes the four characters `\xNN` (lowercase hex).
 *
 * Hidden characters (bidi controls, zero-width and other invisible characters) become visible marks
 * such as `⟨U+202E⟩`. This is the one twin of the Python rule in `dsh_jupyter/escape.py` (see its
 * docstring for the list and why); `tests/test_notebook_invisibles.py` feeds every code point through both.
 */

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const CONTROL_BODY = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** Characters shown as a visible mark, as `[first, last, name]` code point ranges. */
export const HIDDEN_RANGES: ReadonlyArray<readonly [number, number, string]> = [
  [0x00ad, 0x00ad, 'soft hyphen'],
  [0x034f, 0x034f, 'combining grapheme joiner'],
  [0x061c, 0x061c, 'arabic letter mark'],
  [0x115f, 0x1160, 'hangul filler'],
  [0x17b4, 0x17b5, 'khmer inherent vowel'],
  [0x180b, 0x180d, 'mongolian variation selector'],
  [0x180e, 0x180e, 'mongolian vowel separator'],
  [0x180f, 0x180f, 'mongolian variation selector'],
  [0x200b, 0x200b, 'zero width space'],
  [0x200c, 0x200c, 'zero width non-joiner'],
  [0x200d, 0x200d, 'zero width joiner'],
  [0x200e, 0x200e, 'left-to-right mark'],
  [0x200f, 0x200f, 'right-to-left mark'],
  [0x202a, 0x202a, 'left-to-right embedding'],
  [0x202b, 0x202b, 'right-to-left embedding'],
  [0x202c, 0x202c, 'pop directional formatting'],
  [0x202d, 0x202d, 'left-to-right override'],
  [0x202e, 0x202e, 'right-to-left override'],
  [0x2060, 0x2060, 'word joiner'],
  [0x2061, 0x2061, 'function application'],
  [0x2062, 0x2062, 'invisible times'],
  [0x2063, 0x2063, 'invisible separator'],
  [0x2064, 0x2064, 'invisible plus'],
  [0x2065, 0x2065, 'invisible reserved character'],
  [0x2066, 0x2066, 'left-to-right isolate'],
  [0x2067, 0x2067, 'right-to-left isolate'],
  [0x2068, 0x2068, 'first strong isolate'],
  [0x2069, 0x2069, 'pop directional isolate'],
  [0x206a, 0x206f, 'deprecated format character'],
  [0x3164, 0x3164, 'hangul filler'],
  [0xfeff, 0xfeff, 'zero width no-break space'],
  [0xffa0, 0xffa0, 'halfwidth hangul filler'],
  [0xfff9, 0xfffb, 'interlinear annotation character'],
  [0x1bca0, 0x1bca3, 'shorthand format control'],
  [0x1d173, 0x1d17a, 'musical format control'],
  [0xe0000, 0xe007f, 'tag character'],
  [0xe0080, 0xe00ff, 'invisible reserved character'],
  [0xe0100, 0xe01ef, 'variation selector'],
  [0xe01f0, 0xe0fff, 'invisible reserved character']
];

const JOINERS = '\u200c\u200d';
// Not "letters" for the joiner rule: ASCII, C1 controls and Unicode spaces.
const NOT_LETTER = '\\u{0}-\\u{9f}\\u{a0}\\u{1680}\\u{2000}-\\u{200a}\\u{2028}\\u{2029}\\u{202f}\\u{205f}\\u{3000}';

/** A regex class body for `ranges`, adjacent ranges merged. */
function rangeClass(ranges: ReadonlyArray<readonly [number, number, string]>): string {
  const merged: Array<[number, number]> = [];
  for (const [first, last] of ranges) {
    const previous = merged[merged.length - 1];
    if (previous && first === previous[1] + 1) {
      previous[1] = last;
    } else {
      merged.push([first, last]);
    }
  }
  const point = (code: number): string => `\\u{${code.toString(16)}}`;
  return merged.map(([a, b]) => (a === b ? point(a) : `${point(a)}-${point(b)}`)).join('');
}

// One character class (a single scan); whether a joiner is marked depends on its neighbours.
const HIDDEN_SOURCE = `[${rangeClass(HIDDEN_RANGES)}]`;
const NOT_LETTERS = new RegExp(`^[${NOT_LETTER}${rangeClass(HIDDEN_RANGES)}]`, 'u');

function hiddenPattern(): RegExp {
  return new RegExp(HIDDEN_SOURCE, 'gu');
}

/** The code point that ends just before UTF-16 offset `at` (a surrogate pair read as one). */
function pointBefore(text: string, at: number): string {
  const low = text.charCodeAt(at - 1);
  if (at >= 2 && low >= 0xdc00 && low <= 0xdfff) {
    const high = text.charCodeAt(at - 2);
    if (high >= 0xd800 && high <= 0xdbff) {
      return text.slice(at - 2, at);
    }
  }
  return text.charAt(at - 1);
}

/** Whether the hidden character `char` at `at` is marked: always, except a joiner between two letters. */
function marked(text: string, at: number, char: string): boolean {
  if (!JOINERS.includes(char)) {
    return true;
  }
  const end = at + char.length;
  if (at === 0 || end >= text.length) {
    return true;
  }
  const after = String.fromCodePoint(text.codePointAt(end) ?? 0);
  return NOT_LETTERS.test(pointBefore(text, at)) || NOT_LETTERS.test(after);
}

/** Each marked hidden character of `text` as `[index, character]`, in order. */
function hiddenMatches(text: string): Array<[number, string]> {
  const pattern = hiddenPattern();
  const found: Array<[number, string]> = [];
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    if (marked(text, match.index, match[0])) {
      found.push([match.index, match[0]]);
    }
  }
  return found;
}

/** One hidden character found in a text: its code (`U+202E`) and name. */
export interface IHiddenChar {
  code: string;
  name: string;
}

/** What kind of text a warning speaks of. */
export type HiddenNoun = 'command' | 'code' | 'edit' | 'text';

function codeOf(char: string): string {
  return 'U+' + (char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
}

function nameOf(char: string): string {
  const point = char.codePointAt(0) ?? 0;
  const found = HIDDEN_RANGES.find(([a, b]) => a <= point && point <= b);
  return found ? found[2] : 'invisible character';
}

function markOf(char: string): string {
  return `⟨${codeOf(char)}⟩`;
}

/** Every hidden character of `text` that the escaping functions mark, in order. */
export function hiddenCharacters(text: string): IHiddenChar[] {
  return hiddenMatches(text).map(([, char]) => ({ code: codeOf(char), name: nameOf(char) }));
}

/** A sentence for a question whose `text` holds hidden characters (`null` when it holds none). */
export function hiddenWarning(text: string, what: HiddenNoun = 'command'): string | null {
  const found = hiddenCharacters(text);
  if (found.length === 0) {
    return null;
  }
  const distinct = [...new Map(found.map(char => [char.code, char])).values()];
  const listed =
    distinct
      .slice(0, 4)
      .map(char => `${char.name} ${char.code}`)
      .join(', ') + (distinct.length > 4 ? ', …' : '');
  const noun = found.length === 1 ? 'hidden character' : 'hidden characters';
  const consequence = {
    command: 'what runs is not what it looks like',
    code: 'what runs is not what it looks like',
    edit: 'the cell would not be what it looks like',
    text: 'it is not what it looks like'
  }[what];
  return `This ${what} contains ${found.length} ${noun} (${listed}), shown as ⟨U+…⟩ marks: ${consequence}.`;
}

/** `text` with each hidden character replaced by its mark (controls untouched). */
export function revealHidden(text: string): string {
  return text.replace(hiddenPattern(), (char: string, at: number) =>
    marked(text, at, char) ? markOf(char) : char
  );
}

function hexOf(char: string): string {
  return '\\x' + char.charCodeAt(0).toString(16).padStart(2, '0');
}

/** A piece of a body for a styled view: escaped text, or a hidden character's mark. */
export interface IDisplayPart {
  kind: 'text' | 'mark';
  text: string;
}

/**
 * A multi-line body in pieces: text with controls escaped (line feeds and tabs kept) and marks.
 * Joined, the pieces equal `escapeText(text)`.
 */
export function displayParts(text: string): IDisplayPart[] {
  const parts: IDisplayPart[] = [];
  const body = text.replace(/\r\n/g, '\n');
  let last = 0;
  for (const [at, char] of hiddenMatches(body)) {
    if (at > last) {
      parts.push({ kind: 'text', text: body.slice(last, at).replace(CONTROL_BODY, hexOf) });
    }
    parts.push({ kind: 'mark', text: markOf(char) });
    last = at + char.length;
  }
  if (last < body.length) {
    parts.push({ kind: 'text', text: body.slice(last).replace(CONTROL_BODY, hexOf) });
  }
  return parts;
}

/** A multi-line body for display: `\r\n` to `\n`, controls but line feed and tab as `\xNN`, marks. */
export function escapeText(text: string): string {
  return displayParts(text)
    .map(part => part.text)
    .join('');
}

/**
 * Replace every C0 control, DEL and C1 control in `text` with its `\xNN` spelling, and every hidden
 * character with its mark.
 */
export function escapeControls(text: string): string {
  return revealHidden(text).replace(CONTROL, hexOf);
}

/**
 * A one-line, control-free display form of any value that should have been a string.
 */
export function displayText(value: unknown): string {
  if (typeof value === 'string') {
    return escapeControls(value);
  }
  if (value === null || value === undefined) {
    return '';
  }
  return escapeControls(String(value));
}

/**
 * A multi-line display form (`escapeText`) of any value that should have been a string: the message
 * bodies, tool arguments and results the anywidget views show.
 */
export function displayBody(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  return escapeText(typeof value === 'string' ? value : String(value));
}

/**
 * Create an element whose text is `text`, set through `textContent` (never parsed as HTML).
 */
export function textElement<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text: string,
  className?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.textContent = text;
  if (className) {
    node.className = className;
  }
  return node;
}
