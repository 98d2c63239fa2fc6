/**
 * Prompt box (anywidget view of `dsh_jupyter/ui/widgets/prompt.py`): a textarea synced to `value`, the
 * caret synced to `cursor`, and a Send button (Ctrl/Cmd+Enter) that invokes the "send_command" command.
 * Python decides whether the prompt starts a turn or is steered into the running one. Text is set with
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
}

const SEND_TIMEOUT_MS = 30000;

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

  let sending = false;
  let disposed = false;
  let localError: string | null = null; // a failure only this view knows about (no answer, or an error reply)

  function sync(): void {
    if (area.value !== model.get('value')) {
      area.value = model.get('value');
    }
    area.placeholder = model.get('placeholder');
    const busy = model.get('busy');
    button.textContent = sending ? 'Sending…' : busy ? 'Steer' : 'Send';
    button.title = busy ? 'Add this prompt to the running turn' : 'Start a turn with this prompt';
    button.disabled = sending || model.get('disabled');
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

  async function send(): Promise<void> {
    if (sending || model.get('disabled')) {
      return;
    }
    sending = true;
    sync();
    const sent = area.value;
    try {
      const [response] = await experimental.invoke<{ error?: unknown } | null>(
        'send_command',
        { value: sent },
        { signal: AbortSignal.timeout(SEND_TIMEOUT_MS) }
      );
      if (response && response.error) {
        localError = String(response.error);
      } else if (!disposed && area.value === sent) {
        // Sent: the box is empty now, whatever order the kernel's own "value" update arrives in.
        area.value = '';
        if (model.get('value') !== '') {
          model.set('value', '');
          model.set('cursor', -1);
          model.save_changes();
        }
      }
    } catch {
      localError = 'The kernel did not answer; your prompt is still here.';
    } finally {
      sending = false;
      if (!disposed) {
        sync();
      }
    }
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
      void send();
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

  area.addEventListener('input', onInput);
  area.addEventListener('keydown', onKeyDown);
  area.addEventListener('keyup', saveCaret);
  area.addEventListener('click', saveCaret);
  area.addEventListener('blur', saveCaret);
  button.addEventListener('click', () => void send());
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
