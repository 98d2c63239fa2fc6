/**
 * Opens the completer while a mention is typed in a `%%dsh` cell, without waiting for Tab.
 *
 * JupyterLab asks providers about "continuous hinting" only when the user turned on the completer's
 * `autoCompletion` setting (off by default). This watcher listens to the active notebook cell instead:
 * after a one-character edit (typing or backspace) that leaves the cursor in an `@` mention of a
 * `%%dsh` body, it invokes the completer of that notebook. An already open completer ignores the
 * invocation, so only the first keystroke (or the first after the list ran empty) fetches.
 */

import { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { IDeltaOp, isTypingEdit, mentionAt } from './mentions.js';

/**
 * Watches the active cell of the current notebook and calls `invoke(panel.id)` when a mention is typed.
 */
export class MentionTrigger {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _invoke: (panelId: string) => void
  ) {
    _tracker.activeCellChanged.connect(this._onActiveCell, this);
    this._onActiveCell(_tracker, _tracker.activeCell);
  }

  private _onActiveCell(_: INotebookTracker, cell: Cell | null): void {
    if (this._cell && !this._cell.isDisposed) {
      this._cell.model.sharedModel.changed.disconnect(this._onChange, this);
    }
    this._cell = cell;
    if (cell) {
      cell.model.sharedModel.changed.connect(this._onChange, this);
    }
  }

  private _onChange(_: unknown, change: { sourceChange?: ReadonlyArray<IDeltaOp> }): void {
    if (!isTypingEdit(change.sourceChange)) {
      return;
    }
    const cell = this._cell;
    const panel = this._tracker.currentWidget;
    if (!cell || !panel) {
      return;
    }
    // Let the editor settle its cursor and the completer handler see the same edit first.
    requestAnimationFrame(() => this._check(panel, cell));
  }

  private _check(panel: NotebookPanel, cell: Cell): void {
    const editor = cell.editor;
    if (
      panel.isDisposed ||
      cell.isDisposed ||
      !editor ||
      this._tracker.currentWidget !== panel ||
      this._tracker.activeCell !== cell ||
      !editor.hasFocus()
    ) {
      return;
    }
    const text = editor.model.sharedModel.getSource();
    const offset = editor.getOffsetAt(editor.getCursorPosition());
    if (mentionAt(text, offset)) {
      this._invoke(panel.id);
    }
  }

  private _cell: Cell | null = null;
}
