/**
 * Mentions shown as chips.
 *
 * A mention is markup in the prompt's source, `@[label](dsh-session:…)` or `@[label](dsh-variable:…)`; its
 * URI is long and means nothing to a person. Here it is shown as a chip reading `@label` (the kind as a
 * letter, the URI in the tooltip), while the source keeps the markup the kernel resolves.
 *
 * - {@link findMentions} finds the mentions of a text (the rule of `dsh_jupyter/references/mentions.py`).
 * - {@link chipElement} builds one chip's DOM (text only, no HTML parsed): for any view that shows a prompt.
 * - {@link mentionChips} is the CodeMirror 6 extension of `%%dsh` cells: each mention becomes an atomic
 *   chip (the cursor steps over it, Backspace or Delete removes it whole), so the long URI neither shows
 *   nor makes the cell scroll sideways. Other cells are left alone.
 */

import { Extension, RangeSetBuilder } from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  ViewPlugin,
  ViewUpdate,
  WidgetType
} from '@codemirror/view';

import { displayText } from './escape.js';
import { isDshCell } from './mentions.js';

/** JavaScript's line terminators (a label may hold none). */
const LINE_TERMINATORS = '\n\r\u2028\u2029';

/**
 * `@[label](dsh-session:…)` or `@[label](dsh-variable:…)`; in the label `\` escapes the next character.
 * The same markup `references/mentions.py` parses (its bare-URI form is not a chip: it has no label).
 */
const MENTION = new RegExp(
  `@\\[((?:\\\\[^${LINE_TERMINATORS}]|[^\\\\\\]])*)\\]\\(((dsh-session|dsh-variable):[^\\s)]*)\\)`,
  'g'
);

/** What a chip is of. */
export type MentionKind = 'session' | 'variable';

/** One mention in a text. */
export interface IMention {
  /** Offset of its `@`. */
  from: number;
  /** Offset just after its `)`. */
  to: number;
  /** The label, unescaped. */
  label: string;
  /** The `dsh-session:` or `dsh-variable:` URI. */
  uri: string;
  kind: MentionKind;
}

/** The label of a mention as written between `@[` and `]`, unescaped. */
export function unescapeLabel(raw: string): string {
  return raw.replace(new RegExp(`\\\\([^${LINE_TERMINATORS}])`, 'g'), '$1');
}

/** Every mention of `text`, in order. */
export function findMentions(text: string): IMention[] {
  const found: IMention[] = [];
  const pattern = new RegExp(MENTION.source, 'g');
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    const from = match.index;
    found.push({
      from,
      to: from + match[0].length,
      label: unescapeLabel(match[1]),
      uri: match[2],
      kind: match[3] === 'dsh-variable' ? 'variable' : 'session'
    });
  }
  return found;
}

/**
 * What a mention's URI names: the session id (a `dsh-session:` payload is the id's JSON, base64url-encoded)
 * or the variable name; `null` when the payload cannot be read.
 */
export function mentionTarget(uri: string): string | null {
  const colon = uri.indexOf(':');
  const payload = uri.slice(colon + 1);
  if (uri.startsWith('dsh-variable:')) {
    return payload;
  }
  try {
    const base64 = payload.replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4)), c => c.charCodeAt(0));
    const value: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    return typeof value === 'string' ? value : null;
  } catch {
    return null;
  }
}

/** The one-line text a chip shows for `label` (controls and hidden characters made visible). */
export function chipText(label: string): string {
  return '@' + displayText(label);
}

/**
 * One chip: `<span class="jp-DshChip jp-DshChip-session" title="…">@label</span>`, built from text.
 */
export function chipElement(mention: Pick<IMention, 'label' | 'uri' | 'kind'>): HTMLSpanElement {
  const chip = document.createElement('span');
  chip.className = `jp-DshChip jp-DshChip-${mention.kind}`;
  chip.textContent = chipText(mention.label);
  const target = mentionTarget(mention.uri);
  const what = mention.kind === 'variable' ? 'variable' : 'session';
  chip.title =
    target === null
      ? `${displayText(mention.label)}: a ${what} mention whose reference cannot be read (${mention.uri})`
      : `${displayText(mention.label)}: ${what} ${displayText(target)}`;
  chip.setAttribute('data-uri', mention.uri);
  return chip;
}

class ChipWidget extends WidgetType {
  constructor(private readonly _mention: IMention) {
    super();
  }

  eq(other: ChipWidget): boolean {
    return (
      other._mention.label === this._mention.label &&
      other._mention.uri === this._mention.uri
    );
  }

  toDOM(): HTMLElement {
    return chipElement(this._mention);
  }

  ignoreEvent(): boolean {
    return false;
  }
}

/** The chip decorations of a `%%dsh` cell's document (none for other cells). */
function chipDecorations(view: EditorView): DecorationSet {
  const text = view.state.doc.toString();
  if (!isDshCell(text)) {
    return Decoration.none;
  }
  const builder = new RangeSetBuilder<Decoration>();
  for (const mention of findMentions(text)) {
    builder.add(mention.from, mention.to, Decoration.replace({ widget: new ChipWidget(mention) }));
  }
  return builder.finish();
}

/** The CodeMirror 6 extension that shows the mentions of a `%%dsh` cell as atomic chips. */
export function mentionChips(): Extension {
  const plugin = ViewPlugin.fromClass(
    class {
      decorations: DecorationSet;

      constructor(view: EditorView) {
        this.decorations = chipDecorations(view);
      }

      update(update: ViewUpdate): void {
        if (update.docChanged) {
          this.decorations = chipDecorations(update.view);
        }
      }
    },
    { decorations: value => value.decorations }
  );
  return [
    plugin,
    EditorView.atomicRanges.of(view => view.plugin(plugin)?.decorations ?? Decoration.none)
  ];
}

// -- chips in editable text (the chat sidebar's prompt box) ------------------------------------------------

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

const BLOCKS = new Set(['DIV', 'P', 'LI']);

/**
 * The text an editable element holds, each chip as the mention it stands for: what is sent. Line breaks
 * (`<br>`, and the blocks a browser makes of Enter in editable content) become `\n`.
 */
export function editableText(root: Node): string {
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
