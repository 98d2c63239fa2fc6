/**
 * The chat sidebar's prompt box: editable text where each mention is a chip (`@label`, the URI kept in what
 * is sent), an `@` popup of the notebook's cells (`@cell`: the selected one), variables, other sessions and
 * files, a model picker, Send and Ctrl/Cmd+Enter. Keys typed here stay here (the notebook's shortcuts never
 * see them).
 */

import { caretDownEmptyIcon } from '@jupyterlab/ui-components';

import { ChipEditor } from './chip_editor.js';
import { textElement } from './escape.js';
import { filterDshItems, IDshCompletionItem } from './items.js';
import { givenBack } from './merge.js';
import { IModelChoice } from './sidebar_kernel.js';

/** A mention being typed just before the caret: `@` after a space, a bracket or a quote, or at the start. */
const TYPED = /(?:^|[\s([{"'`])@([^\s@[\]()"]*)$/;

/** What the prompt box needs from its sidebar. */
export interface IPromptHost {
  /** The popup rows for `query` (typed after `@`): variables, sessions, files. */
  candidates(query: string): Promise<{ items: IDshCompletionItem[]; note: string | null }>;
  /** Send `text` with `model`; resolves with a line to show once the kernel took it (rejects with its error). */
  send(text: string, model: string | null): Promise<string>;
  /** The model picker changed. */
  chooseModel(model: string | null): Promise<void>;
}

const MAC = /Mac|iPhone|iPad/.test(globalThis.navigator?.platform ?? '');

/** The prompt box of one notebook's chat. */
export class SidebarPrompt {
  readonly node: HTMLDivElement;

  constructor(private readonly _host: IPromptHost) {
    this.node = document.createElement('div');
    this.node.className = 'dsh-sidebar-prompt';
    this.node.setAttribute('data-lm-suppress-shortcuts', 'true');
    this._editor = new ChipEditor('dsh-sidebar-input', 'Prompt');
    this._input = this._editor.node;
    this._editor.placeholder = `Ask the agent… (@ mentions a cell, variable, session or file; ${
      MAC ? '⌘' : 'Ctrl'
    }+Enter sends)`;
    this._popup = document.createElement('ul');
    this._popup.className = 'dsh-sidebar-popup';
    this._popup.setAttribute('role', 'listbox');
    this._popup.hidden = true;
    const bar = document.createElement('div');
    bar.className = 'dsh-sidebar-bar';
    // JupyterLab's own select look (as the notebook toolbar's cell type): its font, and a caret that says it opens.
    this._picker = document.createElement('div');
    this._picker.className = 'dsh-sidebar-picker jp-HTMLSelect jp-DefaultStyle';
    this._model = document.createElement('select');
    this._model.className = 'dsh-sidebar-model';
    this._model.title = 'The model of the prompts sent from here';
    this._model.setAttribute('aria-label', 'Model');
    this._picker.append(
      this._model,
      caretDownEmptyIcon.element({ tag: 'span', stylesheet: 'select', right: '4px', top: '4px' })
    );
    const hint = document.createElement('span');
    hint.className = 'dsh-sidebar-hint';
    this._send = textElement('button', 'Send', 'dsh-sidebar-send jp-Button jp-mod-styled jp-mod-accept');
    this._send.type = 'button';
    this._status = textElement('div', '', 'dsh-sidebar-status');
    this._status.setAttribute('aria-live', 'polite');
    bar.append(this._picker, hint, this._send);
    this.node.append(this._popup, this._input, bar, this._status);

    for (const type of ['keydown', 'keyup', 'keypress']) {
      this.node.addEventListener(type, event => event.stopPropagation());
    }
    this._input.addEventListener('keydown', event => this._onKey(event));
    this._input.addEventListener('input', () => this._onInput());
    // Late, so that a click on a row lands first; and only if the box is still left then (focus that went
    // away and came back, as a click elsewhere and back does, keeps the popup the new `@` opens).
    this._input.addEventListener('blur', () =>
      window.setTimeout(() => {
        if (document.activeElement !== this._input) {
          this._closePopup();
        }
      }, 150)
    );
    this._send.addEventListener('click', () => void this.send());
    this._model.addEventListener('change', () => void this._onModel());
  }

  /** The text to send: each chip as its mention. */
  get value(): string {
    return this._editor.value;
  }

  /** Replace the text (mentions become chips). */
  set value(text: string) {
    this._editor.value = text;
  }

  /** Enable or disable sending (no kernel, or one without dsh). */
  set enabled(on: boolean) {
    this._enabled = on;
    this._editor.editable = on;
    this._sync();
  }

  /** The agent is working: Send reads "Steer" (the prompt joins the running turn). */
  set busy(on: boolean) {
    this._busy = on;
    this._sync();
  }

  /** Show the model choices, `current` selected. */
  setModels(models: IModelChoice[], current: string | null): void {
    const options = models.map(choice => {
      const option = textElement('option', choice.available ? choice.label : `${choice.label} (${choice.note})`);
      option.value = choice.spec ?? '';
      option.disabled = !choice.available;
      option.title = choice.note;
      return option;
    });
    this._model.replaceChildren(...options);
    this._model.value = current ?? '';
    this._chosen = current;
    this._picker.hidden = options.length === 0;
  }

  /** A line under the box (`error` level in red). */
  setStatus(text: string, level: 'info' | 'error' = 'info'): void {
    this._status.textContent = text;
    this._status.dataset.level = level;
  }

  focus(): void {
    this._editor.focus();
  }

  /** Send the box's text. The box empties at once, so what is typed while the prompt travels is the next
   * prompt, never glued to this one; a prompt the kernel did not take comes back, before whatever was
   * typed since, with the error under the box. */
  async send(): Promise<void> {
    const text = this.value;
    if (this._sending || !this._enabled) {
      return;
    }
    if (!text.trim()) {
      this.setStatus('Nothing to send: type a prompt first.', 'error');
      return;
    }
    this._sending = true;
    this._closePopup();
    this.value = '';
    this._sync();
    const returns = this._returns;
    try {
      const note = await this._host.send(text, this._model.value || null);
      if (this._returns === returns) {
        this.setStatus(note); // (a refusal that overtook the answer keeps its own line)
      }
    } catch (error) {
      this.giveBack(text, error instanceof Error ? error.message : String(error));
    } finally {
      this._sending = false;
      this._sync();
    }
  }

  /** A prompt the kernel did not take: back in the box, above whatever was typed since, with why under it. */
  giveBack(text: string, why: string): void {
    this.value = givenBack(text, this.value);
    if (this._editor.focused) {
      this._editor.caret = this.value.length; // after what was typed, for the keys that follow
    }
    this._returns += 1;
    this.setStatus(`Not sent: ${why}`, 'error');
  }

  private _sync(): void {
    this._send.textContent = this._sending ? 'Sending…' : this._busy ? 'Steer' : 'Send';
    this._send.title = this._busy ? 'Add this prompt to the running turn' : 'Start a turn with this prompt';
    this._send.disabled = this._sending || !this._enabled;
    this._model.disabled = !this._enabled;
    this.node.classList.toggle('dsh-disabled', !this._enabled);
  }

  private async _onModel(): Promise<void> {
    const previous = this._chosen;
    const wanted = this._model.value || null;
    try {
      await this._host.chooseModel(wanted);
      this._chosen = wanted;
      this.setStatus('');
    } catch (error) {
      this._model.value = previous ?? '';
      this.setStatus(`Model not changed: ${error instanceof Error ? error.message : String(error)}`, 'error');
    }
  }

  private _onKey(event: KeyboardEvent): void {
    if (!this._popup.hidden) {
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
        event.preventDefault();
        this._highlight(this._active + (event.key === 'ArrowDown' ? 1 : -1));
        return;
      }
      if ((event.key === 'Enter' && !event.ctrlKey && !event.metaKey) || event.key === 'Tab') {
        event.preventDefault();
        this._pick(this._active);
        return;
      }
      if (event.key === 'Escape') {
        event.preventDefault();
        this._closePopup();
        return;
      }
    }
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      void this.send();
    } else if (event.key === 'Enter') {
      event.preventDefault(); // a plain line break, not the block the browser would make
      this._editor.lineBreak();
    }
  }

  private _onInput(): void {
    if (this._status.dataset.level === 'error') {
      this.setStatus('');
    }
    const typed = this._typedMention();
    if (typed === null) {
      this._closePopup();
      return;
    }
    const asked = ++this._asked;
    void this._host.candidates(typed.query).then(({ items, note }) => {
      if (asked !== this._asked || this._typedMention()?.query !== typed.query) {
        return;
      }
      this._showPopup(filterDshItems(items, '@' + typed.query) as IDshCompletionItem[], note);
    });
  }

  /** The `@query` typed just before the caret, in the caret's text node. */
  private _typedMention(): { node: Text; start: number; end: number; query: string } | null {
    const selection = window.getSelection();
    if (!selection || selection.rangeCount === 0 || !selection.isCollapsed) {
      return null;
    }
    const node = selection.anchorNode;
    if (!(node instanceof Text) || !this._input.contains(node)) {
      return null;
    }
    const before = (node.nodeValue ?? '').slice(0, selection.anchorOffset);
    const match = TYPED.exec(before);
    if (match === null) {
      return null;
    }
    const start = selection.anchorOffset - match[1].length - 1;
    return { node, start, end: selection.anchorOffset, query: match[1] };
  }

  private _showPopup(items: IDshCompletionItem[], note: string | null): void {
    this._items = items;
    const rows = items.map((item, index) => {
      const row = document.createElement('li');
      row.className = `dsh-sidebar-option dsh-sidebar-option-${item.dsh.kind}`;
      row.setAttribute('role', 'option');
      row.append(
        textElement('span', item.dsh.kind === 'directory' ? 'folder' : item.dsh.kind, 'dsh-sidebar-option-kind'),
        textElement('span', item.dsh.title, 'dsh-sidebar-option-title'),
        textElement('span', item.dsh.detail, 'dsh-sidebar-option-detail')
      );
      row.title = `${item.dsh.title}\n${item.dsh.detail}`;
      row.addEventListener('mousedown', event => {
        event.preventDefault(); // keep the caret in the box
        this._pick(index);
      });
      return row;
    });
    if (note !== null) {
      rows.push(textElement('li', note, 'dsh-sidebar-option-note'));
    } else if (rows.length === 0) {
      rows.push(textElement('li', 'Nothing matches.', 'dsh-sidebar-option-note'));
    }
    this._popup.replaceChildren(...rows);
    this._popup.hidden = false;
    this._highlight(0);
  }

  private _highlight(index: number): void {
    const rows = Array.from(this._popup.querySelectorAll<HTMLLIElement>('.dsh-sidebar-option'));
    if (rows.length === 0) {
      this._active = -1;
      return;
    }
    this._active = (index + rows.length) % rows.length;
    rows.forEach((row, at) => {
      row.classList.toggle('dsh-active', at === this._active);
      row.setAttribute('aria-selected', String(at === this._active));
    });
    rows[this._active].scrollIntoView({ block: 'nearest' });
  }

  private _pick(index: number): void {
    const item = this._items[index];
    const typed = this._typedMention();
    this._closePopup();
    if (item === undefined || typed === null) {
      return;
    }
    const range = document.createRange();
    range.setStart(typed.node, typed.start);
    range.setEnd(typed.node, typed.end);
    this._editor.insert((item.insertText ?? item.label) + ' ', range);
  }

  private _closePopup(): void {
    this._asked++;
    this._popup.hidden = true;
    this._popup.replaceChildren();
    this._items = [];
    this._active = -1;
  }

  private _editor: ChipEditor;
  private _input: HTMLDivElement;
  private _popup: HTMLUListElement;
  private _picker: HTMLDivElement;
  private _model: HTMLSelectElement;
  private _send: HTMLButtonElement;
  private _status: HTMLDivElement;
  private _items: IDshCompletionItem[] = [];
  private _active = -1;
  private _asked = 0;
  private _busy = false;
  private _enabled = true;
  private _sending = false;
  /** Prompts given back so far (see {@link giveBack}). */
  private _returns = 0;
  private _chosen: string | null = null;
}

