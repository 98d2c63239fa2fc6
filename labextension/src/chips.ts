/**
 * Mention chips: a session or variable mention (`@[label](dsh-session:…)`, `@[df](dsh-variable:df)`) shown as
 * one `@label` token while the text keeps the whole mention, URI included.
 *
 * The one place that reads mention markup in the browser: the chat sidebar's prompt box builds its chips
 * here, and `%%dsh` cells and the picker are to use the same functions (the grammar is the Python rule of
 * `dsh_jupyter/references/mentions.py`: a label with `\]` and `\\` escaped, then a `dsh-session:` or
 * `dsh-variable:` URI without whitespace or `)`).
 */

import { escapeControls } from './escape.js';

/** JavaScript's `\s` is the Python rule's whitespace; `.` stops at its line terminators. */
const MENTION = /@\[((?:\\[^\n\r\u2028\u2029]|[^\\\]])*)\]\(((?:dsh-session|dsh-variable):[^\s)]*)\)/g;

/** One mention found in a text. */
export interface IMention {
  /** Offset of the `@`. */
  start: number;
  /** Offset just after the closing `)`. */
  end: number;
  /** The label as the user reads it (escapes undone). */
  label: string;
  /** The `dsh-session:` or `dsh-variable:` URI. */
  uri: string;
  /** The mention exactly as written. */
  markup: string;
}

/** The label of a mention with its `\x` escapes undone. */
export function unescapeLabel(raw: string): string {
  return raw.replace(/\\(.)/g, '$1');
}

/** Every well-formed mention in `text`, in order. */
export function findMentions(text: string): IMention[] {
  const found: IMention[] = [];
  const pattern = new RegExp(MENTION.source, 'g');
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    const start = match.index;
    found.push({
      start,
      end: start + match[0].length,
      label: unescapeLabel(match[1]),
      uri: match[2],
      markup: match[0]
    });
  }
  return found;
}

/** `session` or `variable`: what a mention's URI names. */
export function mentionKind(uri: string): 'session' | 'variable' {
  return uri.startsWith('dsh-variable:') ? 'variable' : 'session';
}

/** The text a chip shows: `@label`, controls and hidden characters made visible. */
export function chipLabel(mention: Pick<IMention, 'label'>): string {
  return '@' + escapeControls(mention.label);
}

/** The class every chip carries (styled in style/sidebar.css). */
export const CHIP_CLASS = 'dsh-chip';

/**
 * A chip element for `mention`: one uneditable token showing `@label`, with the markup it stands for in
 * `data-markup` (what {@link chipText} gives back) and the URI in its tooltip.
 */
export function chipElement(mention: Pick<IMention, 'label' | 'uri' | 'markup'>): HTMLSpanElement {
  const chip = document.createElement('span');
  chip.className = `${CHIP_CLASS} ${CHIP_CLASS}-${mentionKind(mention.uri)}`;
  chip.contentEditable = 'false';
  chip.dataset.markup = mention.markup;
  chip.textContent = chipLabel(mention);
  chip.title = `${mentionKind(mention.uri) === 'variable' ? 'Variable' : 'Session'} ${escapeControls(
    mention.label
  )}\n${mention.uri}`;
  return chip;
}

/** `text` as DOM nodes: plain text, and a chip for each mention in it. */
export function textWithChips(text: string): Node[] {
  const nodes: Node[] = [];
  let last = 0;
  for (const mention of findMentions(text)) {
    if (mention.start > last) {
      nodes.push(document.createTextNode(text.slice(last, mention.start)));
    }
    nodes.push(chipElement(mention));
    last = mention.end;
  }
  if (last < text.length) {
    nodes.push(document.createTextNode(text.slice(last)));
  }
  return nodes;
}

const BLOCKS = new Set(['DIV', 'P', 'LI']);

/**
 * The text an editable element holds, each chip as the mention it stands for: what is sent. Line breaks
 * (`<br>`, and the blocks a browser makes of Enter in editable content) become `\n`.
 */
export function chipText(root: Node): string {
  let text = '';
  const walk = (node: Node): void => {
    for (const child of Array.from(node.childNodes)) {
      if (child.nodeType === Node.TEXT_NODE) {
        text += child.nodeValue ?? '';
      } else if (child instanceof HTMLElement) {
        if (child.dataset.markup !== undefined) {
          text += child.dataset.markup;
        } else if (child.tagName === 'BR') {
          text += '\n';
        } else {
          if (BLOCKS.has(child.tagName) && text !== '' && !text.endsWith('\n')) {
            text += '\n';
          }
          walk(child);
        }
      }
    }
  };
  walk(root);
  return text;
}
