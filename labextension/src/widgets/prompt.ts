/**
 * Prompt box (anywidget view of `dsh_jupyter/ui/widgets/prompt.py`): editable text synced to `value` in which
 * each mention (the picker inserts them) shows as a chip reading `@label` while `value` keeps the markup
 * (`../chip_editor.ts`, the sidebar's prompt box too), the caret synced to `cursor`, and a Send button
 * (Ctrl/Cmd+Enter) that empties the box and invokes the "send_command" command with the text (prompts sent
 * quickly queue up, in order). Python decides whether the prompt starts a turn or is steered into the running
 * one; a prompt it refuses comes back into the box. Text is set with textContent only, status texts through
 * `../escape.ts`.
 *
 * Keys typed here stay here (`keepKeysInside`): Enter is a line break, and no key reaches the notebook's
 * shortcuts.
 */

import type { RenderProps } from '@anywidget/types';

import { ChipEditor } from '../chip_editor.js';
import { displayBody } from '../escape.js';
import { caretAfter, givenBack, mergeEdits } from '../merge.js';
import { keepKeysInside, node, subscribe } from './dom.js';

export { keepKeys } from './dom.js';

/** The kernel's last change of `value`: the text it started from, and its number (each change a new one). */
export interface IKernelEdit {
  base: string;
  n: number;
  /** Put between the kernel's inserted text and text typed right after it (see `mergeEdits`). */
  joiner?: string;
}

/** A prompt this box sent that the kernel refused after taking it: back in the box once (`applied` then). */
export interface IReturned {
  text: string;
  n: number;
  applied: boolean;
}

/** The traits of `PromptBox` this view reads and writes. */
export interface IPromptState {
  value: string;
  cursor: number;
  kernel_edit: IKernelEdit;
  /** The number of the kernel's latest edit this view had applied when it last sent `value`. */
  seen_edit: number;
  returned: IReturned;
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

/** Where the caret of a focused box was (an offset in its text), by its model. */
interface IFocusRecord {
  caret: number;
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
  const editor = new ChipEditor('dsh-prompt-input', 'Prompt');
  const area = editor.node;
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
    if (editor.value !== model.get('value')) {
      editor.value = model.get('value');
    }
    editor.placeholder = model.get('placeholder');
    const busy = model.get('busy');
    button.textContent = pending ? 'Sending…' : busy ? 'Steer' : 'Send';
    button.title = busy ? 'Add this prompt to the running turn' : 'Start a turn with this prompt';
    button.disabled = model.get('disabled');
    editor.editable = !model.get('disabled');
    status.textContent = displayBody(localError ?? model.get('status'));
    status.dataset.level = localError === null ? model.get('status_level') : 'error';
  }

  function caretChanged(): boolean {
    const at = editor.caret;
    if (at === null) {
      return false; // the caret is elsewhere: the box keeps where it was
    }
    const caret = at >= editor.value.length ? -1 : at;
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
    const length = editor.value.length;
    if (editor.focused) {
      editor.caret = caret < 0 || caret > length ? length : caret;
    }
  }

  function setBox(text: string): void {
    editor.value = text;
    model.set('value', text);
    model.set('cursor', -1);
    saveValue();
  }

  /**
   * Sends the `value` (and caret) just set, with the number of the kernel's latest edit this view has applied: an
   * update that left before an edit of the kernel reached this view (ipywidgets holds a model's updates back while
   * the kernel works on the one before, and a pick overtakes them) is then known as older in the kernel, which
   * keeps its edit instead of going back to the text the edit started from.
   */
  function saveValue(): void {
    model.set('seen_edit', seenEdit);
    model.save_changes();
  }

  /** A prompt the kernel did not take goes back in the box, before whatever was typed since. */
  function giveBack(text: string): void {
    if (!disposed) {
      setBox(givenBack(text, editor.value));
      placeCaret(); // after what was typed, for the keys that follow
    }
  }

  /**
   * A prompt sent from here that the kernel refused once it had taken it (a mention of a session gone, say): back
   * above what the box shows, which the kernel may not have seen yet. The first view of the box to see it does it
   * (also one drawn after the refusal, when no view was showing) and marks it applied for the others.
   */
  function onReturned(): void {
    const back = model.get('returned');
    if (disposed || !back || back.applied !== false || typeof back.text !== 'string') {
      return;
    }
    model.set('returned', { ...back, applied: true });
    giveBack(back.text);
    sync();
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
    const text = editor.value;
    localError = null;
    pending += 1;
    setBox('');
    sync();
    queue = queue.then(() => deliver(text));
  }

  function onInput(): void {
    localError = null;
    model.set('value', editor.value);
    caretChanged();
    saveValue();
  }

  function onKeyDown(event: KeyboardEvent): void {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send();
    } else if (event.key === 'Enter') {
      // Plain Enter and Shift+Enter insert a newline (a line break, not the block the browser would make).
      event.preventDefault();
      editor.lineBreak();
    }
  }

  let seenEdit = model.get('kernel_edit')?.n ?? 0;
  // A value change is applied a microtask later: the rest of its update is in by then (the kernel's edit may
  // come after it), and so is the caret of a key typed here (applied inside onInput, placeCaret put the caret
  // back where the last key-up left it, and keys typed in the middle of the text came out reversed).
  let settling = false;

  /**
   * A new `value`. From the kernel's own change (a mention inserted, a prompt given back) while keys typed here
   * had not reached it yet, the change is merged into what the box shows (`../merge.ts`) and the result goes back
   * to the kernel: no key typed is lost. Any other new value is shown as it is.
   */
  function onValue(): void {
    if (!settling) {
      settling = true;
      queueMicrotask(settle);
    }
  }

  function settle(): void {
    settling = false;
    if (disposed) {
      return;
    }
    const edit = model.get('kernel_edit');
    const fresh = edit !== undefined && edit !== null && edit.n !== seenEdit;
    if (fresh) {
      seenEdit = edit.n;
    }
    const incoming = model.get('value');
    const typed = editor.value;
    if (fresh && typed !== incoming && typed !== edit.base) {
      const merged = mergeEdits(edit.base, incoming, typed, typeof edit.joiner === 'string' ? edit.joiner : '');
      const caret = editor.focused ? editor.caret : null;
      const text = merged === null ? typed : merged.text; // both changed the same words: what was typed stays
      editor.value = text;
      if (caret !== null) {
        editor.caret = merged === null ? caret : caretAfter(merged, caret);
      }
      model.set('value', text);
      caretChanged();
      saveValue();
      sync();
      return;
    }
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
    if (editor.focused) {
      focused.set(model, { caret: editor.caret ?? editor.value.length, at: Date.now() });
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
    editor.focus();
    editor.caret = Math.min(record.caret, editor.value.length);
    noteFocus();
  }

  for (const type of ['focus', 'input', 'keyup', 'click', 'mouseup']) {
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
    [['change:value', 'change:kernel_edit'], onValue],
    ['change:returned', onReturned],
    [['change:placeholder', 'change:busy', 'change:status_level', 'change:disabled'], sync],
    ['change:status', onStatus]
  ]);
  sync();
  onReturned();

  return () => {
    disposed = true;
    unsubscribe();
  };
}

export default { render };
