/**
 * A chat transcript's items, rendered incrementally into a log element and keyed by item id, so open or
 * closed sections and the scroll position survive the ~20 updates per second of a streaming turn.
 *
 * The items are what `dsh_jupyter/ui/widgets/view_items.py` sends: raw text, escaped here through
 * `../escape.ts` (terminal controls as `\xNN`, hidden characters as `⟨U+…⟩` marks), and answers as the
 * document tree Python parsed from the one sanitiser's HTML (`doc`: Markdown's elements only, links and
 * images with allowed targets), built with `createElement` and `textContent`, never parsed as HTML.
 * Reasoning is collapsed by default; a tool call shows its name and one-line arguments, with the result
 * behind a disclosure.
 *
 * The chat widget (`chat.ts`) renders its `items` trait with `ChatLog`; any other front end that shows a
 * conversation (a side panel) can do the same with the same items and the `dsh-chat-*` styles of
 * `dsh_jupyter/ui/static/widgets.css`.
 */

import { displayBody, displayText } from '../escape.js';
import { node, setText } from './dom.js';

/** One node of an answer's document tree: text, or an element with attributes and children. */
export type DocNode = string | IDocElement;

export interface IDocElement {
  tag: string;
  attrs?: Record<string, unknown>;
  children?: DocNode[];
}

/** What a context item says of one referenced session. */
export interface IReferenceFacts {
  sessionId: string;
  label?: string | null;
  capturedThroughSeq?: number | null;
  compacted?: boolean;
  truncated?: boolean;
  omittedMessages?: number | null;
  omittedBytes?: number | null;
}

/** The kinds of item; an unknown kind is shown as a notice. */
export type ChatItemKind = 'user' | 'assistant' | 'reasoning' | 'tool' | 'context' | 'notice' | 'end';

/** One transcript item as `view_items.py` sends it (each kind uses some of the fields). */
export interface IChatItem {
  id: string | number;
  kind: ChatItemKind | string;
  /** user, assistant, reasoning, notice: the text; the assistant's `doc` is its document tree. */
  text?: string;
  steered?: boolean;
  streaming?: boolean;
  doc?: DocNode[];
  /** tool */
  callId?: string;
  name?: string;
  summary?: string;
  arguments?: string;
  result?: string;
  isError?: boolean;
  done?: boolean;
  status?: string;
  /** How the call was allowed or refused ("allowed once by you"; empty when no approval was asked). */
  approval?: string;
  /** context (and `summary`) */
  references?: IReferenceFacts[];
  /** notice */
  level?: string;
  /** end */
  reason?: string;
  error?: string | null;
}

/** The elements an answer's document tree may hold, and the attributes each keeps (markdown.py's TREE_ATTRIBUTES). */
const DOC_TAGS: Readonly<Record<string, readonly string[]>> = {
  p: [],
  blockquote: [],
  strong: [],
  em: [],
  del: [],
  code: ['class'],
  pre: [],
  br: [],
  hr: [],
  h1: [],
  h2: [],
  h3: [],
  h4: [],
  h5: [],
  h6: [],
  ul: [],
  ol: ['start'],
  li: [],
  span: [],
  table: [],
  thead: [],
  tbody: [],
  tr: [],
  th: ['align'],
  td: ['align'],
  a: ['href', 'title'],
  img: ['src', 'alt', 'title']
};

/** A last guard for targets Python already allowed: http, https, mailto or relative (no scheme). */
const SAFE_URL = /^(https?:|mailto:|[^:/?#]*([/?#]|$))/i;

/** Build a document tree (from Python's markdown_tree) into `parent`; unknown tags become plain spans. */
export function buildDoc(parent: ParentNode, children: readonly DocNode[] | undefined): void {
  for (const child of children ?? []) {
    if (typeof child === 'string') {
      parent.append(displayBody(child));
      continue;
    }
    if (!child || typeof child !== 'object') {
      continue;
    }
    const allowed = Object.prototype.hasOwnProperty.call(DOC_TAGS, child.tag) ? DOC_TAGS[child.tag] : null;
    const element = document.createElement(allowed ? child.tag : 'span');
    for (const name of allowed ?? []) {
      const value = child.attrs?.[name];
      if (typeof value !== 'string') {
        continue;
      }
      if ((name === 'href' || name === 'src') && !SAFE_URL.test(value.replace(/[\u0000-\u0020]/g, ''))) {
        continue;
      }
      element.setAttribute(name, value);
    }
    if (child.tag === 'a') {
      element.setAttribute('target', '_blank');
      element.setAttribute('rel', 'noopener noreferrer');
    }
    buildDoc(element, child.children);
    parent.append(element);
  }
}

/** One item on screen: its element and how it takes the item's next state. */
interface IItemView {
  kind: string;
  element: HTMLElement;
  update(item: IChatItem): void;
}

type Builder = () => Omit<IItemView, 'kind'>;

/**
 * `displayBody` remembering its last text: a streaming turn updates the items ~20 times a second and most
 * texts (a finished tool's output) stay the same, so each is escaped once, not at every update.
 */
function bodyShown(): (value: unknown) => string {
  let last: { value: unknown; shown: string } | null = null;
  return value => {
    if (last === null || last.value !== value) {
      last = { value, shown: displayBody(value) };
    }
    return last.shown;
  };
}

const builders: Readonly<Record<ChatItemKind, Builder>> = {
  user() {
    const box = node('div', 'dsh-chat-item dsh-chat-user');
    const who = node('div', 'dsh-chat-who');
    const body = node('div', 'dsh-chat-text');
    box.append(who, body);
    const shown = bodyShown();
    const update = (next: IChatItem): void => {
      setText(who, next.steered ? 'You · steered into running turn' : 'You');
      setText(body, shown(next.text));
    };
    return { element: box, update };
  },
  assistant() {
    const box = node('div', 'dsh-chat-item dsh-chat-assistant');
    const body = node('div', 'dsh-chat-markdown jp-RenderedHTMLCommon jp-RenderedMarkdown');
    box.append(body);
    let shown: string | null = null;
    const update = (next: IChatItem): void => {
      const doc = Array.isArray(next.doc) ? next.doc : [String(next.text ?? '')];
      const key = JSON.stringify(doc);
      if (key !== shown) {
        shown = key;
        body.replaceChildren();
        buildDoc(body, doc);
      }
      box.classList.toggle('dsh-streaming', !!next.streaming);
    };
    return { element: box, update };
  },
  reasoning() {
    const box = node('details', 'dsh-chat-item dsh-chat-reasoning');
    const summary = node('summary', '', 'Reasoning');
    const body = node('div', 'dsh-chat-text');
    box.append(summary, body);
    const shown = bodyShown();
    const update = (next: IChatItem): void => {
      setText(summary, next.streaming ? 'Reasoning…' : 'Reasoning');
      setText(body, shown(next.text));
    };
    return { element: box, update };
  },
  tool() {
    const box = node('details', 'dsh-chat-item dsh-chat-tool');
    const summary = node('summary');
    const name = node('span', 'dsh-chat-tool-name');
    const args = node('span', 'dsh-chat-tool-args');
    const state = node('span', 'dsh-chat-tool-state');
    const approval = node('span', 'dsh-chat-tool-approval');
    summary.append(name, args, state, approval);
    const fullArgs = node('pre', 'dsh-chat-tool-full');
    const result = node('pre', 'dsh-chat-tool-result');
    box.append(summary, fullArgs, result);
    const shownArgs = bodyShown();
    const shownResult = bodyShown();
    const update = (next: IChatItem): void => {
      setText(name, displayText(next.name));
      setText(args, '(' + displayText(next.summary) + ')');
      setText(state, toolState(next));
      setText(approval, next.approval ? ' · ' + displayText(next.approval) : '');
      box.classList.toggle('dsh-error', !!next.isError);
      setText(fullArgs, shownArgs(next.arguments));
      setText(result, next.done ? shownResult(next.result) : '');
    };
    return { element: box, update };
  },
  context() {
    const box = node('details', 'dsh-chat-item dsh-chat-context');
    const summary = node('summary');
    const list = node('ul', 'dsh-chat-sources');
    box.append(summary, list);
    const update = (next: IChatItem): void => {
      setText(summary, displayText(next.summary));
      list.replaceChildren();
      for (const source of next.references ?? []) {
        const row = node('li');
        row.append(node('span', 'dsh-chat-source-label', displayText(source.label ?? source.sessionId)));
        row.append(node('span', 'dsh-chat-source-facts', ' · ' + referenceFacts(source).join(' · ')));
        list.append(row);
      }
    };
    return { element: box, update };
  },
  notice() {
    const box = node('div', 'dsh-chat-item dsh-chat-notice');
    const update = (next: IChatItem): void => {
      box.dataset.level = next.level || 'info';
      setText(box, displayBody(next.text));
    };
    return { element: box, update };
  },
  end() {
    const box = node('div', 'dsh-chat-item dsh-chat-end');
    const update = (next: IChatItem): void => {
      box.dataset.reason = next.reason || '';
      setText(box, 'Turn ' + displayText(next.reason) + (next.error ? ': ' + displayBody(next.error) : ''));
    };
    return { element: box, update };
  }
};

/** A tool call's state after its arguments: stopped, running, failed, or nothing once it succeeded. */
function toolState(item: IChatItem): string {
  if (item.status === 'stopped') {
    return ' stopped';
  }
  if (!item.done) {
    return ' running…';
  }
  return item.isError ? ' failed' : '';
}

/** The facts shown after a referenced session's label. */
function referenceFacts(source: IReferenceFacts): string[] {
  const facts = [displayText(source.sessionId)];
  if (source.capturedThroughSeq !== null && source.capturedThroughSeq !== undefined) {
    facts.push('through seq ' + source.capturedThroughSeq);
  }
  if (source.compacted) {
    facts.push('compacted');
  }
  if (source.truncated) {
    facts.push(
      `truncated: ${source.omittedMessages ?? 0} messages, ${source.omittedBytes ?? 0} bytes omitted`
    );
  }
  return facts;
}

function isKind(kind: string): kind is ChatItemKind {
  return Object.prototype.hasOwnProperty.call(builders, kind);
}

/** Pixels from the bottom within which the log keeps following new output. */
const FOLLOW_SLACK = 40;

/**
 * The items of one conversation in `log`, updated in place: an item keeps its element while its id and
 * kind stay, only elements out of place move, and a log scrolled to the bottom stays there.
 */
export class ChatLog {
  constructor(readonly log: HTMLElement) {}

  /** Show `items` (in order); items no longer listed are removed. */
  update(items: readonly IChatItem[]): void {
    const log = this.log;
    const nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < FOLLOW_SLACK;
    const seen = new Set<string>();
    for (const item of items) {
      const key = String(item.id);
      seen.add(key);
      let view = this._views.get(key);
      if (!view || view.kind !== item.kind) {
        view?.element.remove();
        const build = isKind(item.kind) ? builders[item.kind] : builders.notice;
        view = { kind: item.kind, ...build() };
        this._views.set(key, view);
      }
      view.update(item);
    }
    for (const [key, view] of this._views) {
      if (!seen.has(key)) {
        view.element.remove();
        this._views.delete(key);
      }
    }
    // Attach in order (only nodes not already in place move).
    let cursor = log.firstChild;
    for (const item of items) {
      const element = this._views.get(String(item.id))?.element;
      if (!element) {
        continue;
      }
      if (element === cursor) {
        cursor = cursor.nextSibling;
      } else {
        log.insertBefore(element, cursor);
      }
    }
    if (nearBottom) {
      log.scrollTop = log.scrollHeight;
    }
  }

  private readonly _views = new Map<string, IItemView>();
}
