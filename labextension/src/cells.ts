/**
 * The `@cell` rows of the `@` popup: first `@cell` (the cell the prompt means, with its first line), and after the
 * variables `@cell:<id>` for the notebook's other cells.
 *
 * The kernel decides what `@cell` means when the prompt is sent (`dsh_jupyter/workspace/cell_refs.py`);
 * the popup shows the same choice: in a `%%dsh` cell the cell just above it (the prompt cell is the selection
 * while it is typed in, and running it moves the selection on), in the sidebar the cell selected in the page.
 * This module holds no DOM or JupyterLab runtime code, so it can be tested on plain Node.
 */

import { escapeControls } from './escape.js';
import type { IDshCompletionItem } from './items.js';

/** Most `@cell:<id>` rows one popup lists. */
export const CELL_LIMIT = 30;

/** A cell id the kernel takes in `@cell:<id>` (nbformat's: letters, digits, `-`, `_`). */
const CELL_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Characters of a cell's first line shown in its row. */
const LINE_CHARS = 80;

/** A notebook cell as the popup offers it. */
export interface ICellChoice {
  id: string;
  type: string;
  source: string;
}

/** The part of a cell model the popup reads (JupyterLab's `ICellModel` has it). */
export interface ICellModelLike {
  id: string;
  type: string;
  sharedModel: { getSource(): string };
}

/** The cells of a notebook model, in order. */
export function cellChoices(models: Iterable<ICellModelLike>): ICellChoice[] {
  return Array.from(models, model => ({ id: model.id, type: model.type, source: model.sharedModel.getSource() }));
}

/** The first line of a cell that is not blank, clipped (`(empty)` for an empty cell); for a `%%dsh` prompt,
 * `%%dsh` and the prompt's first line (its magic line alone says nothing). */
export function firstLine(source: string): string {
  const lines = source.split(/\r\n|[\n\r\u2028\u2029]/).filter(text => text.trim() !== '');
  let line = lines[0]?.trim() ?? '';
  if (line === '') {
    return '(empty)';
  }
  if (/^%%dsh(\s|$)/.test(line) && lines.length > 1) {
    line = `%%dsh ${lines[1].trim()}`;
  }
  return line.length > LINE_CHARS ? line.slice(0, LINE_CHARS - 1) + '…' : line;
}

/**
 * The cell a bare `@cell` means: typed in the prompt cell `promptId`, the cell just above it; else the
 * selected cell `activeId`. `null` when there is none (a prompt in the first cell, nothing selected).
 */
export function meantCell(
  cells: ReadonlyArray<ICellChoice>,
  activeId: string | null,
  promptId: string | null
): ICellChoice | null {
  if (promptId !== null) {
    const index = cells.findIndex(cell => cell.id === promptId);
    if (index >= 0) {
      return index > 0 ? cells[index - 1] : null;
    }
  }
  return cells.find(cell => cell.id === activeId) ?? null;
}

function row(insert: string, title: string, detail: string, search: string): IDshCompletionItem {
  return {
    label: title,
    insertText: insert,
    type: 'cell',
    dsh: { kind: 'cell', title, detail, search: search.toLowerCase() }
  };
}

/**
 * The popup's `@cell` row (the first of the popup), naming the cell it means by its first line; `null` when a
 * bare `@cell` would mean no cell (a prompt in the first cell, nothing selected).
 */
export function meantItem(
  cells: ReadonlyArray<ICellChoice>,
  activeId: string | null,
  promptId: string | null
): IDshCompletionItem | null {
  const meant = meantCell(cells, activeId, promptId);
  if (meant === null) {
    return null;
  }
  const where = promptId !== null ? 'cell above' : 'selected';
  return row('@cell', 'cell', `${where} · ${escapeControls(firstLine(meant.source))}`, 'cell');
}

/**
 * The popup's `@cell:<id>` rows: every cell but the prompt cell itself, at most {@link CELL_LIMIT}, each with
 * its type and first line (they come after the variables: a name typed is more often a variable's).
 */
export function cellIdItems(cells: ReadonlyArray<ICellChoice>, promptId: string | null): IDshCompletionItem[] {
  const rows: IDshCompletionItem[] = [];
  for (const cell of cells) {
    if (rows.length >= CELL_LIMIT) {
      break;
    }
    if (cell.id === promptId || !CELL_ID.test(cell.id)) {
      continue;
    }
    const line = firstLine(cell.source);
    rows.push(
      row(
        `@cell:${cell.id}`,
        `cell:${escapeControls(cell.id)}`,
        `${cell.type} · ${escapeControls(line)}`,
        `cell:${cell.id}\n${line}`
      )
    );
  }
  return rows;
}
