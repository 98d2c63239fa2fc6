/**
 * Prompt box (anywidget view of `dsh_jupyter/ui/widgets/prompt.py`): a textarea synced to `value`, the
 * caret synced to `cursor`, and a Send button (Ctrl/Cmd+Enter) that empties the box and invokes the
 * "send_command" command with the text (prompts sent quickly queue up, in order). Python decides whether
 * the prompt starts a turn or is steered into the running one; a prompt it refuses comes back into the box. Text is set with
 * textContent only, status texts through `../escape.ts`.
 *
 * Keys typed here stay here (`keepKeysInside`): Enter is a newline, and no key reaches the notebook's
 * shortcuts.
 */

import type { RenderProps } from '@anywidget/types';

import { displayBody } from '../escape.js';
import { keepKeysInside, node, subscribe } from './dom.js';

export { keepKeys } from './dom.js';

/** The traits of `PromptBox` this view reads and writes. */
export interface IPromptState {
  value: string;
  cursor: number;
  placeholder: string;
  busy: boolean;
  disabled: boolean;
  status: string;
  status_level: string;
  focused: boolean;
}

const SEND_TIMEOUT_MS = 30000;

/** How long after its predecessor was last used a new view of the same box takes the focus back. */
const HAND_OVER_MS = 5000;

/** Where the caret of a focused box was, by its model. */
interface IFocusRecord {
  start: number;
  end: number;
  at: number;
}

/**
 * The boxes that had the focus, by model. JupyterLab and Notebook 7 re-create a widget's views when the
 * kernel updates its output (the chat panel's saved copy), without a blur: the new view of a box that
 * was being typed in takes the focus and the caret back, so the keys typed next land in it.
 */
const focused = new WeakMap<object, IFocusRecord>();

function render({ model, el, experimental }: RenderProps<IPromptState>): () => void {
  const root = node('div', 'dsh-prompt');
  const area = node('textarea', 'dsh-prompt-input');
  area.rows = 3;
  area.setAttribute('aria-label', 'Prompt');
  const bar = node('div', 'dsh-prompt-bar');
  const mac = /Mac|iPhone|iPad/.test(globalThis.navigator?.platform ?? '');
  const hint = node('span', 'dsh-prompt-hint', `Enter: new line · ${mac ? '⌘' : 'Ctrl'}+Enter: send`);
  const button = node(
    'button',
    'dsh-prompt-send dsh-button dsh-button-accept jp-Button jp-mod-styled jp-mod-accept'
  );
  button.type = 'button';
  const status = node('span', 'dsh-prompt-status');
  status.setAttribute('aria-live', 'polite');
  bar.append(status, hint, button);
  root.append(area, bar);
  el.append(root);
  keepKeysInside(root);

  let pending = 0; // prompts handed to the kernel and not answered yet
  let queue: Promise<void> = Promise.resolve(); // delivered one after another, in the order sent
  let disposed = false;
  let localError: string | null = null; // a failure only this view knows about (no answer, or an error reply)

  function sync(): void {
    if (area.value !== model.get('value')) {
      area.value = model.get('value');
    }
    area.placeholder = model.get('placeholder');
    const busy = model.get('busy');
    button.textContent = pending ? 'Sending…' : busy ? 'Steer' : 'Send';
    button.title = busy ? 'Add this prompt to the running turn' : 'Start a turn with this prompt';
    button.disabled = model.get('disabled');
    area.disabled = model.get('disabled');
    status.textContent = displayBody(localError ?? model.get('status'));
    status.dataset.level = localError === null ? model.get('status_level') : 'error';
  }

  function caretChanged(): boolean {
    const caret = area.selectionStart === area.value.length ? -1 : area.selectionStart;
    if (model.get('cursor') === caret) {
      return false;
    }
    model.set('cursor', caret);
    return true;
  }

  function saveCaret(): void {
    if (caretChanged()) {
      model.save_changes();
    }
  }

  function placeCaret(): void {
    const caret = model.get('cursor');
    const position = caret < 0 || caret > area.value.length ? area.value.length : caret;
    if (document.activeElement === area) {
      area.setSelectionRange(position, position);
    }
  }

  function setBox(text: string): void {
    area.value = text;
    model.set('value', text);
    model.set('cursor', -1);
    model.save_changes();
  }

  /** A prompt the kernel did not take goes back in the box, before whatever was typed since. */
  function giveBack(text: string): void {
    if (!disposed) {
      setBox(area.value ? text + '\n' + area.value : text);
    }
  }

  async function deliver(text: string): Promise<void> {
    try {
      const [response] = await experimental.invoke<{ error?: unknown } | null>(
        'send_command',
        { value: text },
        { signal: AbortSignal.timeout(SEND_TIMEOUT_MS) }
      );
      if (response && response.error) {
        localError = String(response.error);
        giveBack(text);
      }
    } catch {
      localError = 'The kernel did not answer; your prompt is back in the box.';
      giveBack(text);
    } finally {
      pending -= 1;
      if (!disposed) {
        sync();
      }
    }
  }

  function send(): void {
    if (model.get('disabled')) {
      return;
    }
    // The box empties here, at once, and the text travels in the command itself: a "value" update
    // still on its way (ipywidgets holds updates back while the kernel is busy) is overtaken by this
    // empty value, so the kernel can never put the text just sent back in the box.
    const text = area.value;
    localError = null;
    pending += 1;
    setBox('');
    sync();
    queue = queue.then(() => deliver(text));
  }

  function onInput(): void {
    localError = null;
    model.set('value', area.value);
    caretChanged();
    model.save_changes();
  }

  function onKeyDown(event: KeyboardEvent): void {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send();
    }
    // Plain Enter and Shift+Enter insert a newline (the textarea's own behaviour).
  }

  function onValue(): void {
    sync();
    placeCaret();
  }

  function onStatus(): void {
    localError = null;
    sync();
  }

  function setFocused(value: boolean): void {
    // The kernel holds back what would re-create this view (an output update) while someone types here.
    if (model.get('focused') !== value) {
      model.set('focused', value);
      model.save_changes();
    }
  }

  function noteFocus(): void {
    if (document.activeElement === area) {
      focused.set(model, { start: area.selectionStart, end: area.selectionEnd, at: Date.now() });
      setFocused(true);
    }
  }

  function onBlur(): void {
    saveCaret();
    // A blur the user made (the box is still on the page) ends the hand-over; a removed box keeps it.
    setTimeout(() => {
      if (area.isConnected && document.activeElement !== area) {
        focused.delete(model);
        setFocused(false);
      }
    }, 0);
  }

  function takeFocusBack(): void {
    const record = focused.get(model);
    const elsewhere = document.activeElement && document.activeElement !== document.body;
    if (!record || Date.now() - record.at > HAND_OVER_MS || elsewhere || disposed || !area.isConnected) {
      return;
    }
    area.focus();
    const end = area.value.length;
    area.setSelectionRange(Math.min(record.start, end), Math.min(record.end, end));
    noteFocus();
  }

  for (const type of ['focus', 'input', 'keyup', 'click', 'select']) {
    area.addEventListener(type, noteFocus);
  }
  area.addEventListener('blur', onBlur);
  setTimeout(takeFocusBack, 0); // once the new view is on the page
  area.addEventListener('input', onInput);
  area.addEventListener('keydown', onKeyDown);
  area.addEventListener('keyup', saveCaret);
  area.addEventListener('click', saveCaret);
  button.addEventListener('click', send);
  const unsubscribe = subscribe(model, [
    ['change:value', onValue],
    [['change:placeholder', 'change:busy', 'change:status_level', 'change:disabled'], sync],
    ['change:status', onStatus]
  ]);
  sync();

  return () => {
    disposed = true;
    unsubscribe();
  };
}

export default { render };
