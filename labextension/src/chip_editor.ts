/**
 * Editable text whose mentions are chips: the prompt box of the chat sidebar and the anywidget prompt box
 * of `%dsh chat` / `%dsh pick` (where the picker inserts mentions) are both a {@link ChipEditor}.
 *
 * Each mention is an uneditable chip holding its markup (`data-markup`): the caret steps over it and never
 * lands inside the markup, one Backspace or Delete removes it whole, and what is read back, sent, copied or
 * cut is the markup. Pasted text that holds mentions gets chips too.
 */

import { chipElement, findMentions, IMention } from './chip_text.js';

/** `Node.TEXT_NODE` and `Node.ELEMENT_NODE` (named here: the views also run where `Node` is not a global). */
const TEXT_NODE = 3;
const ELEMENT_NODE = 1;

/** The elements a browser makes of Enter in editable content: each starts a line. */
const BLOCKS = new Set(['DIV', 'P', 'LI']);

/**
 * A chip for editable text: uneditable, with the mention it stands for in `data-markup` (what
 * {@link editableText} gives back).
 */
export function editableChip(mention: IMention, markup: string): HTMLSpanElement {
  const chip = chipElement(mention);
  chip.contentEditable = 'false';
  chip.dataset.markup = markup;
  return chip;
}

/** `text` as DOM nodes: plain text, and an editable chip for each mention in it. */
export function textWithChips(text: string): Node[] {
  const nodes: Node[] = [];
  let last = 0;
  for (const mention of findMentions(text)) {
    if (mention.from > last) {
      nodes.push(document.createTextNode(text.slice(last, mention.from)));
    }
    nodes.push(editableChip(mention, text.slice(mention.from, mention.to)));
    last = mention.to;
  }
  if (last < text.length) {
    nodes.push(document.createTextNode(text.slice(last)));
  }
  return nodes;
}

/** A stretch of an editable element's text: a text node's characters, or one chip or line break. */
interface IPiece {
  node: Node;
  /** Offset of its first character in the whole text. */
  start: number;
  /** A chip or a `<br>`: the caret goes before or after it, never inside. */
  atomic: boolean;
}

/** The text of an editable element, and where each node's part of it starts. */
function readEditable(root: Node): { text: string; pieces: IPiece[] } {
  let text = '';
  const pieces: IPiece[] = [];
  if (isEmptied(root)) {
    return { text, pieces: [{ node: root.firstChild as Node, start: 0, atomic: true }] };
  }
  const walk = (node: Node): void => {
    for (const child of Array.from(node.childNodes)) {
      if (child.nodeType === TEXT_NODE) {
        pieces.push({ node: child, start: text.length, atomic: false });
        text += child.nodeValue ?? '';
      } else if (child.nodeType === ELEMENT_NODE) {
        const element = child as HTMLElement;
        if (element.dataset.markup !== undefined) {
          pieces.push({ node: child, start: text.length, atomic: true });
          text += element.dataset.markup;
        } else if (element.tagName === 'BR') {
          pieces.push({ node: child, start: text.length, atomic: true });
          text += '\n';
        } else {
          if (BLOCKS.has(element.tagName) && text !== '' && !text.endsWith('\n')) {
            text += '\n';
          }
          walk(child);
        }
      }
    }
  };
  walk(root);
  return { text, pieces };
}

/** A box whose text was all deleted: the browser leaves one `<br>` in it (so the empty line keeps its height),
 * which is no text. Only the whole box: a `<br>` alone in a part of it (the part before the caret) is a newline. */
function isEmptied(root: Node): boolean {
  const only = root.firstChild;
  return (
    root.nodeType === ELEMENT_NODE &&
    only !== null &&
    only === root.lastChild &&
    only.nodeType === ELEMENT_NODE &&
    (only as HTMLElement).tagName === 'BR'
  );
}

/**
 * The text an editable element holds, each chip as the mention it stands for: what is sent. Line breaks
 * (`<br>`, and the blocks a browser makes of Enter in editable content) become `\n`.
 */
export function editableText(root: Node): string {
  return readEditable(root).text;
}

/** The selection of this document, where there is one (not in a view rendered without a window). */
function currentSelection(): Selection | null {
  return typeof globalThis.getSelection === 'function' ? globalThis.getSelection() : null;
}

/**
 * An editable box of text with mention chips. The host adds its own keys (send, a popup); this class keeps
 * the chips whole through typing, paste, copy and cut, and translates the caret to and from text offsets.
 */
export class ChipEditor {
  readonly node: HTMLDivElement;

  /** `className` styles the box; `label` names it for screen readers. */
  constructor(className: string, label: string) {
    this.node = document.createElement('div');
    this.node.className = className;
    this.node.contentEditable = 'true';
    this.node.setAttribute('role', 'textbox');
    this.node.setAttribute('aria-multiline', 'true');
    this.node.setAttribute('aria-label', label);
    this.node.classList.add('dsh-empty');
    // Like a textarea's, the element's `value` reads the text with each chip as its markup (for scripts and
    // tests; set it through this class).
    Object.defineProperty(this.node, 'value', { get: () => this.value, configurable: true });
    this.node.addEventListener('input', () => this._markEmpty());
    this.node.addEventListener('paste', event => this._onPaste(event));
    this.node.addEventListener('copy', event => this._onCopy(event, false));
    this.node.addEventListener('cut', event => this._onCopy(event, true));
  }

  /** The text: each chip as its mention. */
  get value(): string {
    return editableText(this.node);
  }

  /** Replace the text (mentions become chips). */
  set value(text: string) {
    this.node.replaceChildren(...textWithChips(text));
    this._markEmpty();
  }

  /** The grey hint shown while the box is empty. */
  set placeholder(text: string) {
    this.node.dataset.placeholder = text;
  }

  /** Typing allowed. */
  set editable(on: boolean) {
    this.node.contentEditable = on ? 'true' : 'false';
    this.node.setAttribute('aria-disabled', on ? 'false' : 'true');
  }

  /** True while the box has the keyboard focus. */
  get focused(): boolean {
    return document.activeElement === this.node;
  }

  /** The caret (the selection's end) as an offset in {@link value}, or `null` when it is not in the box. */
  get caret(): number | null {
    const selection = currentSelection();
    if (!selection || selection.rangeCount === 0) {
      return null;
    }
    const range = selection.getRangeAt(0);
    if (!this.node.contains(range.endContainer)) {
      return null;
    }
    const before = document.createRange();
    before.selectNodeContents(this.node);
    before.setEnd(range.endContainer, range.endOffset);
    return editableText(before.cloneContents()).length;
  }

  /**
   * Put the caret at `offset` of {@link value} (the end when it is past it); an offset inside a mention's
   * markup puts it after the chip.
   */
  set caret(offset: number) {
    const selection = currentSelection();
    if (!selection) {
      return;
    }
    const range = document.createRange();
    range.selectNodeContents(this.node);
    range.collapse(false);
    for (const piece of readEditable(this.node).pieces) {
      const length = piece.atomic
        ? (piece.node as HTMLElement).dataset.markup?.length ?? 1
        : (piece.node.nodeValue ?? '').length;
      if (offset > piece.start + length) {
        continue;
      }
      if (!piece.atomic) {
        range.setStart(piece.node, offset - piece.start);
      } else if (offset === piece.start) {
        range.setStartBefore(piece.node);
      } else {
        range.setStartAfter(piece.node);
      }
      range.collapse(true);
      break;
    }
    selection.removeAllRanges();
    selection.addRange(range);
  }

  focus(): void {
    this.node.focus();
  }

  /** A line break at the caret (what plain Enter types; not the block the browser would make). */
  lineBreak(): void {
    document.execCommand('insertLineBreak');
  }

  /** Insert `text` in place of the selection, each mention in it as a chip; the caret ends after it. */
  insert(text: string, range: Range | null = this._range()): void {
    if (range === null) {
      this.value = this.value + text;
      this.caret = this.value.length;
      return;
    }
    range.deleteContents();
    const nodes = textWithChips(text);
    if (nodes.length === 0) {
      return;
    }
    for (const node of [...nodes].reverse()) {
      range.insertNode(node);
    }
    this._caretAfter(nodes[nodes.length - 1]);
    this._markEmpty();
    this.node.dispatchEvent(new Event('input', { bubbles: true }));
  }

  /** The selection's range when it lies in the box. */
  private _range(): Range | null {
    const selection = currentSelection();
    if (!selection || selection.rangeCount === 0) {
      return null;
    }
    const range = selection.getRangeAt(0);
    return this.node.contains(range.commonAncestorContainer) ? range : null;
  }

  private _caretAfter(node: Node): void {
    const selection = currentSelection();
    if (!selection) {
      return;
    }
    const range = document.createRange();
    range.setStartAfter(node);
    range.collapse(true);
    selection.removeAllRanges();
    selection.addRange(range);
  }

  private _markEmpty(): void {
    this.node.classList.toggle('dsh-empty', this.value === '');
  }

  private _onPaste(event: ClipboardEvent): void {
    const text = event.clipboardData?.getData('text/plain');
    if (text === undefined) {
      return;
    }
    event.preventDefault();
    if (findMentions(text).length === 0) {
      document.execCommand('insertText', false, text);
    } else {
      this.insert(text);
    }
  }

  /** Copy and cut give the selection's text with each chip as its markup. */
  private _onCopy(event: ClipboardEvent, cut: boolean): void {
    const range = this._range();
    if (range === null || range.collapsed || !event.clipboardData) {
      return;
    }
    event.preventDefault();
    event.clipboardData.setData('text/plain', editableText(range.cloneContents()));
    if (cut && this.node.isContentEditable) {
      range.deleteContents();
      this._markEmpty();
      this.node.dispatchEvent(new Event('input', { bubbles: true }));
    }
  }
}
