/**
 * `%%dsh` cells are prompts, not Python: their editor highlights Markdown.
 *
 * A code cell's editor language follows its model's `mimeType`, which the notebook sets from the
 * kernel's language for every code cell. This watcher switches a cell to Markdown while its source is
 * a `%%dsh` cell and back to the notebook's language when it stops being one; when the notebook resets
 * the language (kernel change), the cell is switched again.
 */

import { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { isDshCell } from './mentions.js';

/** JupyterLab's Markdown mode (the one Markdown cells use). */
export const MARKDOWN_MIME = 'text/x-ipythongfm';

/**
 * Keeps the editor language of every code cell of every notebook in step with its source.
 */
export class DshCellHighlighter {
  constructor(tracker: INotebookTracker) {
    tracker.widgetAdded.connect((_, panel) => this._watchPanel(panel));
    tracker.forEach(panel => this._watchPanel(panel));
  }

  private _watchPanel(panel: NotebookPanel): void {
    const notebook = panel.content;
    const update = (): void => {
      const cells = notebook.model?.cells;
      if (!cells) {
        return;
      }
      for (let i = 0; i < cells.length; i++) {
        this._watchCell(cells.get(i));
      }
    };
    const watchModel = (): void => {
      const model = notebook.model;
      if (model && !this._models.has(model)) {
        this._models.add(model);
        model.cells.changed.connect(update);
      }
      update();
    };
    notebook.modelChanged.connect(watchModel);
    panel.context.ready.then(watchModel).catch(() => undefined);
    watchModel();
  }

  private _watchCell(model: ICellModel): void {
    if (model.type !== 'code' || this._watched.has(model)) {
      return;
    }
    this._watched.add(model);
    const apply = (): void => {
      const dsh = isDshCell(model.sharedModel.getSource());
      if (dsh && model.mimeType !== MARKDOWN_MIME) {
        this._language.set(model, model.mimeType);
        model.mimeType = MARKDOWN_MIME;
      } else if (!dsh && model.mimeType === MARKDOWN_MIME && this._language.has(model)) {
        model.mimeType = this._language.get(model)!;
      }
    };
    model.sharedModel.changed.connect(apply);
    model.mimeTypeChanged.connect(() => {
      if (model.mimeType !== MARKDOWN_MIME) {
        this._language.set(model, model.mimeType); // the notebook set its language: follow it
        apply();
      }
    });
    apply();
  }

  private _watched = new WeakSet<ICellModel>();
  private _models = new WeakSet<object>();
  private _language = new WeakMap<ICellModel, string>();
}
