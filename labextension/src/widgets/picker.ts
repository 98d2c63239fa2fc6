/**
 * Mention picker (anywidget view of `dsh_jupyter/ui/widgets/picker.py`). Filtering happens in Python:
 * every keystroke invokes the "search_command" command, aborting the previous request; responses carry a
 * sequence number and only the newest one is shown. The "search message bodies" checkbox (model trait
 * `body`) is sent with every search. All text is set with textContent, never parsed as HTML.
 *
 * The kernel sends each row's fields already as shown (`row.shown`: dsh_jupyter/escape.py, hidden
 * characters marked); the raw fallbacks and error texts go through the same rule here (`../escape.ts`).
 */

import type { RenderProps } from '@anywidget/types';

import { displayText } from '../escape.js';
import { keepKeysInside, node, subscribe } from './dom.js';

/** The traits of `MentionPicker` this view reads and writes. */
export interface IPickerState {
  query: string;
  placeholder: string;
  body: boolean;
  _revision: number;
  /** The prompt box the mentions go into (`IPY_MODEL_<id>`), or `null`. */
  target: string | null;
}

/** What this view reads of the target prompt box's model. */
interface IPromptShown {
  value: string;
  cursor: number;
}

const MODEL_REF = 'IPY_MODEL_';

/** One search result as `search_command` answers it. */
export interface IPickerRow {
  sessionId: string;
  label?: unknown;
  cwd?: unknown;
  createdAt?: unknown;
  sameWorkspace?: boolean;
  shown?: { label?: string; notebook?: string | null; sessionId?: string; cwd?: string | null };
}

interface ISearchResponse {
  stale?: boolean;
  error?: unknown;
  results?: IPickerRow[];
}

const TIMEOUT_MS = 10000;

function formatCreated(ms: unknown): string {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) {
    return '';
  }
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleString();
}

function newViewId(): string {
  if (globalThis.crypto && typeof globalThis.crypto.randomUUID === 'function') {
    return globalThis.crypto.randomUUID();
  }
  return 'view-' + Math.random().toString(36).slice(2) + Date.now().toString(36);
}

/** A row's label as written: the session's title, or its id when it has none. */
function rawLabel(row: IPickerRow): string {
  return typeof row.label === 'string' ? row.label : row.sessionId;
}

function render({ model, el, experimental }: RenderProps<IPickerState>): () => void {
  const root = node('div', 'dsh-picker');
  keepKeysInside(root);
  const input = node('input', 'dsh-picker-input');
  input.type = 'search';
  input.setAttribute('role', 'combobox');
  input.setAttribute('aria-autocomplete', 'list');
  input.setAttribute('aria-label', 'Search sessions');
  input.placeholder = model.get('placeholder');
  input.value = model.get('query');
  const toggle = node('label', 'dsh-picker-body');
  const bodyBox = node('input', 'dsh-picker-body-toggle');
  bodyBox.type = 'checkbox';
  bodyBox.checked = model.get('body') === true;
  toggle.title = 'Also find sessions whose prompts or answers contain every word (never tool output)';
  toggle.append(bodyBox, node('span', '', ' search message bodies'));
  const list = node('ul', 'dsh-picker-list');
  list.setAttribute('role', 'listbox');
  const status = node('div', 'dsh-picker-status');
  status.setAttribute('aria-live', 'polite');
  root.append(input, toggle, list, status);
  el.append(root);

  const viewId = newViewId();
  let seq = 0;
  let controller: AbortController | null = null;
  let rows: IPickerRow[] = [];
  let active = -1;
  let disposed = false;

  function setStatus(text: string, level?: string): void {
    status.textContent = text;
    status.dataset.level = level || 'info';
  }

  function highlight(index: number): void {
    active = rows.length ? Math.max(0, Math.min(index, rows.length - 1)) : -1;
    const items = list.children;
    for (let i = 0; i < items.length; i++) {
      const on = i === active;
      const item = items[i];
      item.classList.toggle('dsh-active', on);
      item.setAttribute('aria-selected', on ? 'true' : 'false');
      if (on && typeof item.scrollIntoView === 'function') {
        item.scrollIntoView({ block: 'nearest' });
      }
    }
  }

  function renderRows(): void {
    list.replaceChildren();
    rows.forEach((row, index) => {
      const item = node('li', 'dsh-picker-row');
      item.setAttribute('role', 'option');
      // The kernel sends each field as shown (row.shown: controls escaped, hidden characters marked).
      const shown = row.shown || {};
      const label = rawLabel(row);
      const head = node('div', 'dsh-picker-head');
      head.append(node('span', 'dsh-picker-label', displayText(shown.label ?? label)));
      if (row.sameWorkspace === true) {
        const mark = node('span', 'dsh-picker-same', '✓ same workspace');
        mark.title = "Started in the same folder as this notebook's session";
        head.append(mark);
      }
      const detail = node('div', 'dsh-picker-detail');
      const parts: string[] = [];
      if (typeof shown.notebook === 'string') {
        parts.push(displayText(shown.notebook));
      }
      if (label !== row.sessionId) {
        parts.push(displayText(shown.sessionId ?? row.sessionId));
      }
      const cwd = shown.cwd ?? row.cwd;
      parts.push(typeof cwd === 'string' ? displayText(cwd) : '(no cwd)');
      const created = formatCreated(row.createdAt);
      if (created) {
        parts.push(created);
      }
      detail.textContent = parts.join(' · ');
      item.append(head, detail);
      item.addEventListener('mousedown', event => event.preventDefault());
      item.addEventListener('click', () => void choose(index));
      item.addEventListener('mouseenter', () => highlight(index));
      list.append(item);
    });
    highlight(rows.length ? 0 : -1);
  }

  async function search(query: string): Promise<void> {
    seq += 1;
    const mine = seq;
    controller?.abort();
    const own = new AbortController();
    controller = own;
    const timer = setTimeout(() => own.abort(), TIMEOUT_MS);
    setStatus('Searching…');
    try {
      const [response] = await experimental.invoke<ISearchResponse | null>(
        'search_command',
        { query, seq: mine, view: viewId, body: bodyBox.checked },
        { signal: own.signal }
      );
      if (disposed || mine !== seq || !response || response.stale) {
        return;
      }
      if (response.error) {
        rows = [];
        renderRows();
        setStatus(displayText(response.error), 'error');
        return;
      }
      rows = Array.isArray(response.results) ? response.results : [];
      renderRows();
      setStatus(rows.length ? '' : query ? 'No session matches.' : 'No other sessions yet.');
    } catch {
      if (disposed || mine !== seq) {
        return; // superseded by a newer keystroke
      }
      setStatus('The kernel did not answer (is a cell still running?). Type to try again.', 'error');
    } finally {
      clearTimeout(timer);
      if (controller === own) {
        controller = null;
      }
    }
  }

  /**
   * The prompt box's text and caret as this page shows them, sent with a pick: the kernel's copy can lag behind
   * (ipywidgets holds the box's updates back while the kernel is busy, and the pick's command overtakes them), and
   * the mention goes where the caret is here. `{}` when the box cannot be read (the kernel then uses its copy).
   */
  async function promptShown(): Promise<{ text?: string; cursor?: number }> {
    const ref = model.get('target');
    if (typeof ref !== 'string' || !ref.startsWith(MODEL_REF)) {
      return {};
    }
    try {
      const box = await model.widget_manager.get_model<IPromptShown>(ref.slice(MODEL_REF.length));
      const text = box.get('value');
      const cursor = box.get('cursor');
      return typeof text === 'string' && Number.isInteger(cursor) ? { text, cursor } : {};
    } catch {
      return {};
    }
  }

  async function choose(index: number): Promise<void> {
    const row = rows[index];
    if (!row) {
      return;
    }
    try {
      const [response] = await experimental.invoke<{ error?: unknown } | null>('choose_command', {
        sessionId: row.sessionId,
        index,
        ...(await promptShown())
      });
      if (disposed) {
        return;
      }
      if (response && response.error) {
        setStatus(displayText(response.error), 'error');
      } else {
        setStatus('Inserted ' + displayText(row.shown?.label ?? rawLabel(row)));
      }
    } catch {
      if (!disposed) {
        setStatus('The kernel did not answer; the mention was not inserted.', 'error');
      }
    }
  }

  function onInput(): void {
    model.set('query', input.value);
    model.save_changes();
    void search(input.value);
  }

  function onKeyDown(event: KeyboardEvent): void {
    if (event.key === 'ArrowDown') {
      event.preventDefault();
      highlight(active + 1);
    } else if (event.key === 'ArrowUp') {
      event.preventDefault();
      highlight(active - 1);
    } else if (event.key === 'Enter') {
      event.preventDefault();
      if (active >= 0) {
        void choose(active);
      }
    } else if (event.key === 'Escape' && input.value !== '') {
      event.preventDefault();
      input.value = '';
      onInput();
    }
  }

  function onQueryChanged(): void {
    const query = model.get('query');
    if (query !== input.value) {
      input.value = query;
      void search(query);
    }
  }

  function onRevision(): void {
    void search(input.value);
  }

  function onPlaceholder(): void {
    input.placeholder = model.get('placeholder');
  }

  function onToggle(): void {
    model.set('body', bodyBox.checked);
    model.save_changes();
    void search(input.value);
  }

  function onBodyChanged(): void {
    const body = model.get('body') === true;
    if (body !== bodyBox.checked) {
      bodyBox.checked = body;
      void search(input.value);
    }
  }

  input.addEventListener('input', onInput);
  input.addEventListener('keydown', onKeyDown);
  bodyBox.addEventListener('change', onToggle);
  const unsubscribe = subscribe(model, [
    ['change:query', onQueryChanged],
    ['change:_revision', onRevision],
    ['change:placeholder', onPlaceholder],
    ['change:body', onBodyChanged]
  ]);
  void search(input.value);

  return () => {
    disposed = true;
    controller?.abort();
    unsubscribe();
  };
}

export default { render };
