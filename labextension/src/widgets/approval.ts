/**
 * Approval question (anywidget view of `dsh_jupyter/ui/approval_widget.py`): the exact command or code the
 * agent wants to run, highlighted, with Allow once / Allow for this session (/ commands starting with a
 * word) / Deny and an optional reason the agent receives. An answered question leaves nothing here: the decision
 * is shown once, on the call's tool line in the transcript ("allowed once by you"). The
 * view tells the kernel it was drawn ("rendered"), so a kernel without a frontend refuses at once instead
 * of waiting.
 *
 * Keyboard: focus lands on the question's default answer (Allow once; Deny when the command holds hidden
 * characters); Enter activates the focused button; Escape denies (with the reason typed so far).
 *
 * Every text arrives escaped by the kernel (dsh_jupyter/escape.py: terminal controls as \xNN, hidden
 * characters as separate "mark" parts such as ⟨U+202E⟩), so this view applies no escaping of its own; it
 * is set with textContent only.
 */

import type { RenderProps } from '@anywidget/types';

import { node, subscribe } from './dom.js';

/** One piece of the command as the kernel split it: escaped text, or a hidden character's mark. */
export type ApprovalPart = [kind: 'text' | 'mark', text: string];

export interface IApprovalQuestion {
  callId?: string;
  tool?: string;
  language?: string;
  reason?: string;
  warning?: string;
  parts?: ApprovalPart[];
  shown?: string;
  choices?: Array<[choice: string, label: string]>;
  focus?: string;
}

export interface IApprovalRecord {
  allowed: boolean;
  text: string;
}

/** The traits of `ApprovalWidget` this view reads. */
export interface IApprovalState {
  records: IApprovalRecord[];
  question: IApprovalQuestion | null;
  state: string;
}

const KEYWORDS: Readonly<Record<string, ReadonlySet<string>>> = {
  bash: new Set([
    'if', 'then', 'else', 'elif', 'fi', 'for', 'while', 'do', 'done', 'case', 'esac', 'in',
    'function', 'export', 'local', 'return', 'sudo', 'rm', 'mv', 'cp', 'chmod', 'chown', 'git', 'cd'
  ]),
  python: new Set([
    'False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break', 'class',
    'continue', 'def', 'del', 'elif', 'else', 'except', 'finally', 'for', 'from', 'global', 'if', 'import',
    'in', 'is', 'lambda', 'nonlocal', 'not', 'or', 'pass', 'raise', 'return', 'try', 'while', 'with', 'yield'
  ])
};

// One pass over the text: comments, strings, numbers, keywords and operators get a class each.
const TOKENS =
  /(#[^\n]*)|("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)|(\b\d[\d_.]*\b)|([A-Za-z_][\w-]*)|([|&;<>]+|\$\{?\w+\}?)/g;

/** The command as the kernel split it: text parts highlighted, hidden characters as visible marks. */
export function drawParts(parts: readonly ApprovalPart[], language: string | undefined): DocumentFragment {
  const out = document.createDocumentFragment();
  for (const [kind, text] of parts) {
    if (kind === 'mark') {
      const mark = node('span', 'dsh-hidden-mark', String(text));
      mark.title = 'hidden character ' + String(text).slice(1, -1);
      out.append(mark);
    } else {
      out.append(highlight(String(text), language));
    }
  }
  return out;
}

/** `code` with comments, strings, numbers, keywords and (bash) operators in their own spans. */
export function highlight(code: string, language: string | undefined): DocumentFragment {
  const out = document.createDocumentFragment();
  const words = language === undefined ? undefined : KEYWORDS[language];
  if (!words) {
    out.append(code);
    return out;
  }
  let last = 0;
  for (const match of code.matchAll(TOKENS)) {
    const [text, comment, string, number, word, operator] = match;
    const at = match.index ?? 0;
    let kind: string | null = null;
    if (comment !== undefined && (language === 'python' || /^#/.test(text))) {
      kind = 'comment';
    } else if (string !== undefined) {
      kind = 'string';
    } else if (number !== undefined) {
      kind = 'number';
    } else if (word !== undefined && words.has(word)) {
      kind = 'keyword';
    } else if (operator !== undefined) {
      kind = language === 'bash' ? 'operator' : null;
    }
    if (kind === null) {
      continue;
    }
    if (at > last) {
      out.append(code.slice(last, at));
    }
    out.append(node('span', `dsh-approval-tok-${kind}`, text));
    last = at + text.length;
  }
  if (last < code.length) {
    out.append(code.slice(last));
  }
  return out;
}

function editing(): boolean {
  // Someone typing elsewhere (another cell, a text field) keeps their focus.
  const active = document.activeElement;
  return Boolean(active && active.closest && active.closest('.cm-editor, input, textarea, [contenteditable]'));
}

/**
 * Focus the first answer now and again shortly after: a notebook in command mode hands the focus back to
 * its active cell when outputs change. Never taken from someone typing (an editor or a text field).
 */
function claimFocus(card: HTMLElement, button: HTMLButtonElement): void {
  const attempt = (): void => {
    if (!button.isConnected || button.disabled || editing() || card.contains(document.activeElement)) {
      return;
    }
    button.focus({ preventScroll: false });
  };
  attempt();
  for (const delay of [60, 250, 700, 1500]) {
    setTimeout(attempt, delay);
  }
}

function render({ model, el }: RenderProps<IApprovalState>): () => void {
  const root = node('div', 'dsh-approval');
  root.dataset.lmSuppressShortcuts = 'true';
  const card = node('div', 'dsh-approval-card');
  card.setAttribute('role', 'group');
  root.append(card);
  el.append(root);
  let askedFor: string | undefined | null = null; // the call id whose question is on screen

  function answer(choice: string, reason: string): void {
    const question = model.get('question') || {};
    for (const button of card.querySelectorAll('button')) {
      button.disabled = true;
    }
    model.send({ kind: 'answer', choice, reason: reason || '', callId: question.callId });
  }

  function drawQuestion(): void {
    const question = model.get('question') || {};
    const asking = model.get('state') === 'asking';
    card.hidden = !asking;
    if (!asking) {
      card.replaceChildren();
      askedFor = null;
      return;
    }
    if (askedFor === question.callId) {
      return;
    }
    askedFor = question.callId;
    card.replaceChildren();
    const title = `The agent wants to run ${question.tool}`;
    card.setAttribute('aria-label', title);
    const head = node('div', 'dsh-approval-head');
    head.append(node('span', 'dsh-approval-icon', '⚠'), node('span', 'dsh-approval-title', title));
    head.append(node('span', 'dsh-approval-lang', String(question.language || 'text')));
    card.append(head);
    if (question.reason) {
      card.append(node('div', 'dsh-approval-reason', String(question.reason)));
    }
    if (question.warning) {
      const warning = node('div', 'dsh-approval-warning', String(question.warning));
      warning.setAttribute('role', 'alert');
      card.append(warning);
      card.dataset.hidden = 'true';
    } else {
      delete card.dataset.hidden;
    }
    const pre = node('pre', 'dsh-approval-code');
    pre.dir = 'ltr';
    const code = node('code');
    code.append(drawParts(question.parts || [['text', String(question.shown || '')]], question.language));
    pre.append(code);
    card.append(pre);

    const bar = node('div', 'dsh-approval-bar');
    const reason = node('input', 'dsh-approval-why');
    reason.type = 'text';
    reason.placeholder = 'Reason for denying (optional, the agent reads it)';
    reason.setAttribute('aria-label', 'Reason for denying (optional)');
    let first: HTMLButtonElement | null = null;
    for (const [choice, label] of question.choices || []) {
      const button = node('button', `dsh-approval-btn dsh-approval-${choice}`, String(label));
      button.type = 'button';
      button.dataset.choice = choice;
      button.addEventListener('click', () => answer(choice, choice === 'deny' ? reason.value : ''));
      bar.append(button);
      if (first === null || choice === question.focus) {
        first = button;
      }
    }
    card.append(bar, reason);
    card.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        answer('deny', reason.value);
      } else if (event.key === 'Enter' && event.target === reason) {
        event.preventDefault();
        event.stopPropagation();
        answer('deny', reason.value);
      } else if (event.key === 'Enter' || event.key === ' ') {
        event.stopPropagation(); // the button's own click follows; the notebook must not act on it
      }
    });
    if (first) {
      claimFocus(card, first);
    }
  }

  function draw(): void {
    drawQuestion();
    root.dataset.state = model.get('state');
  }

  const unsubscribe = subscribe(model, [[['change:question', 'change:state'], draw]]);
  draw();
  model.send({ kind: 'rendered' });
  return unsubscribe;
}

export default { render };
