/**
 * The one rule of mention chips, free of any editor: which text is a mention and what its chip shows.
 *
 * A mention is markup in a prompt's source, `@[label](dsh-session:…)` or `@[label](dsh-variable:…)`; its URI
 * is long and means nothing to a person, so every view shows it as a chip reading `@label` (the kind as a
 * class, what it names in the tooltip) while the text keeps the markup the kernel resolves.
 *
 * - {@link findMentions} finds the mentions of a text (the rule of `dsh_jupyter/references/mentions.py`).
 * - {@link chipElement} builds one chip's DOM (text only, no HTML parsed).
 *
 * The `%%dsh` cells' CodeMirror decoration (`chips.ts`) and the editable prompt boxes (`chip_editor.ts`:
 * the chat sidebar's and the anywidget prompt box of `%dsh chat` / `%dsh pick`) both build on these.
 */

import { displayText } from './escape.js';

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
