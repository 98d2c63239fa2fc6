/**
 * Mime renderer for the reference-context bundle the notebook host displays for each prompt that
 * referenced other sessions (`application/vnd.dsh.reference-context+json`).
 *
 * One line ("Referenced: Regional sales Q3 · 2 messages · complete") that opens to each source in
 * plain words and to a preview of what the agent received. The words come from the bundle's `view`
 * (made by the host, the same as its `text/html` and `text/plain` forms); every string is written
 * with `textContent`, with terminal controls shown as `\xNN`, so hostile labels stay inert text.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import {
  invalidReason,
  IPreviewView,
  ISourceView,
  REFERENCE_CONTEXT_MIME,
  referenceView
} from './context.js';
import { textElement } from './escape.js';

const CLASS = 'jp-DshReferenceContext';

function renderSource(source: ISourceView, position: number): HTMLElement {
  const item = document.createElement('li');
  item.className = `${CLASS}-source`;
  const head = document.createElement('div');
  head.className = `${CLASS}-sourceHead`;
  head.appendChild(textElement('span', source.title, `${CLASS}-label`));
  if (source.state) {
    head.appendChild(textElement('span', source.state, `${CLASS}-state`));
  }
  item.appendChild(head);
  if (source.rows.length) {
    const list = document.createElement('dl');
    list.className = `${CLASS}-fields`;
    for (const [term, words] of source.rows) {
      list.appendChild(textElement('dt', term));
      list.appendChild(textElement('dd', words));
    }
    item.appendChild(list);
  }
  item.dataset.position = String(position);
  return item;
}

function renderPreview(preview: IPreviewView): HTMLElement {
  const details = document.createElement('details');
  details.className = `${CLASS}-preview`;
  details.appendChild(textElement('summary', preview.heading));
  details.appendChild(textElement('pre', preview.text, `${CLASS}-previewText`));
  return details;
}

/**
 * The DOM of a reference-context bundle (or of the reason it cannot be shown).
 */
export function renderReferenceContext(data: unknown): HTMLElement {
  const host = document.createElement('div');
  host.className = CLASS;
  const reason = invalidReason(data);
  if (reason !== null) {
    host.classList.add(`${CLASS}-invalid`);
    host.appendChild(
      textElement('pre', `dsh: cannot show this reference context: ${reason}`)
    );
    return host;
  }
  const view = referenceView(data as Record<string, unknown>);
  const outer = document.createElement('details');
  outer.className = `${CLASS}-list`;
  const summary = document.createElement('summary');
  summary.appendChild(textElement('span', view.line, `${CLASS}-line`));
  outer.appendChild(summary);
  const items = document.createElement('ol');
  items.className = `${CLASS}-sources`;
  view.sources.forEach((source, position) => items.appendChild(renderSource(source, position)));
  outer.appendChild(items);
  if (view.preview !== null) {
    outer.appendChild(renderPreview(view.preview));
  }
  host.appendChild(outer);
  return host;
}

/**
 * The widget JupyterLab creates for each output of this mime type.
 */
export class ReferenceContextRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass(`${CLASS}-output`);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.textContent = '';
    this.node.appendChild(renderReferenceContext(model.data[this._mimeType]));
    return Promise.resolve();
  }

  private _mimeType: string;
}

/** Renderer factory: safe, since nothing is ever parsed as HTML. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [REFERENCE_CONTEXT_MIME],
  defaultRank: 40,
  createRenderer: options => new ReferenceContextRenderer(options)
};

const extension: IRenderMime.IExtension = {
  id: 'dsh-jupyter:reference-context',
  description: 'Shows the sessions a dsh prompt referenced, in plain words, and what the agent received.',
  rendererFactory,
  rank: 40,
  dataType: 'json'
};

export default extension;
