/**
 * `%%dsh` cells are prompts, not Python: their editor highlights them as a prompt (Markdown's emphasis,
 * code and headings, but no links: a prompt is sent as written, so `['north', 'south']` or `[x]` is text,
 * and the only markup that stands for something is a mention, shown as a chip by `chips.ts`).
 *
 * A code cell's editor language follows its model's `mimeType`, which the notebook sets from the
 * kernel's language for every code cell. This watcher switches a cell to the prompt language while its
 * source is a `%%dsh` cell and back to the notebook's language when it stops being one; when the notebook
 * resets the language (kernel change), the cell is switched again.
 */

import { ICellModel } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Language, LanguageSupport } from '@codemirror/language';

import { isDshCell } from './mentions.js';

/** JupyterLab's Markdown mode (the one Markdown cells use): what the prompt language is made from. */
export const MARKDOWN_MIME = 'text/x-ipythongfm';

/** The editor language of `%%dsh` cells. */
export const PROMPT_MIME = 'text/x-dsh-prompt';

/**
 * The Markdown syntax a prompt leaves out: link and image brackets (`[text]`, `[text](url)`, `![alt](src)`).
 * Markdown reads any `[…]` as a link (a reference defined elsewhere), which in a prompt is a list or a word
 * in brackets.
 */
const NOT_IN_PROMPTS = ['Link', 'Image', 'LinkEnd', 'LinkReference'];

/** The part of `@lezer/markdown`'s parser used here (typed locally: the package is not a dependency). */
interface IMarkdownParser {
  configure(spec: { remove: readonly string[] }): Language['parser'];
}

/**
 * Register the prompt language: JupyterLab's Markdown (math, code blocks and all) without links. Falls back
 * to Markdown as it is when the registered one is not Lezer's Markdown.
 */
export function registerPromptLanguage(registry: IEditorLanguageRegistry): void {
  registry.addLanguage({
    name: 'dsh-prompt',
    displayName: 'dsh prompt',
    mime: PROMPT_MIME,
    load: async () => {
      const markdown = await registry.getLanguage(MARKDOWN_MIME);
      const support = markdown?.support;
      if (!(support instanceof LanguageSupport)) {
        throw new Error(`dsh-jupyter: no ${MARKDOWN_MIME} language to highlight %%dsh cells with`);
      }
      const parser = support.language.parser as unknown as Partial<IMarkdownParser>;
      if (typeof parser.configure !== 'function') {
        return support;
      }
      const prompt = parser.configure({ remove: NOT_IN_PROMPTS });
      const language = new Language(support.language.data, prompt, [], 'dsh-prompt');
      return new LanguageSupport(language, support.support);
    }
  });
}

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
      if (dsh && model.mimeType !== PROMPT_MIME) {
        this._language.set(model, model.mimeType);
        model.mimeType = PROMPT_MIME;
      } else if (!dsh && model.mimeType === PROMPT_MIME && this._language.has(model)) {
        model.mimeType = this._language.get(model)!;
      }
    };
    model.sharedModel.changed.connect(apply);
    model.mimeTypeChanged.connect(() => {
      if (model.mimeType !== PROMPT_MIME) {
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
