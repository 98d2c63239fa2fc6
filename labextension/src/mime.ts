/**
 * Mime renderer for the reference-context bundle the notebook host displays for each prompt that
 * referenced other sessions (`application/vnd.dsh.reference-context+json`).
 *
 * It shows a collapsible list of the sources with their metadata. Every value is written with
 * `textContent` and terminal controls are shown as `\xNN`, so hostile labels stay inert text.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { invalidReason, REFERENCE_CONTEXT_MIME, sourceRows } from './context.js';
import { displayText, textElement } from './escape.js';

const CLASS = 'jp-DshReferenceContext';

function renderSource(source: Record<string, unknown>, position: number): HTMLElement {
  const details = document.createElement('details');
  details.className = `${CLASS}-source`;
  details.dataset.inputIndex = String(
    typeof source.inputIndex === 'number' ? source.inputIndex : position
  );
  const summary = document.createElement('summary');
  summary.appendChild(textElement('span', displayText(source.label), `${CLASS}-label`));
  if (source.label !== source.sessionId) {
    summary.appendChild(textElement('span', displayText(source.sessionId), `${CLASS}-id`));
  }
  const flags = [
    source.compacted === true ? 'compacted' : '',
    source.truncated === true ? 'truncated' : ''
  ].filter(Boolean);
  if (flags.length) {
    summary.appendChild(textElement('span', flags.join(', '), `${CLASS}-flags`));
  }
  details.appendChild(summary);
  const list = document.createElement('dl');
  list.className = `${CLASS}-fields`;
  for (const [term, value] of sourceRows(source)) {
    list.appendChild(textElement('dt', term));
    list.appendChild(textElement('dd', value));
  }
  details.appendChild(list);
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
  const bundle = data as Record<string, unknown>;
  const sources = (bundle.references as Record<string, unknown>[]);
  const outer = document.createElement('details');
  outer.className = `${CLASS}-list`;
  const summary = document.createElement('summary');
  const noun = sources.length === 1 ? 'session' : 'sessions';
  summary.appendChild(
    textElement('span', `Referenced ${sources.length} ${noun}: `, `${CLASS}-heading`)
  );
  summary.appendChild(
    textElement(
      'span',
      sources.map(source => displayText(source.label)).join(', '),
      `${CLASS}-labels`
    )
  );
  outer.appendChild(summary);
  if (typeof bundle.targetSessionId === 'string') {
    outer.appendChild(
      textElement('div', `For session ${displayText(bundle.targetSessionId)}`, `${CLASS}-target`)
    );
  }
  const items = document.createElement('ol');
  items.className = `${CLASS}-sources`;
  sources.forEach((source, position) => {
    const item = document.createElement('li');
    item.appendChild(renderSource(source, position));
    items.appendChild(item);
  });
  outer.appendChild(items);
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
  description: 'Shows the sessions a dsh prompt referenced, with their snapshot metadata.',
  rendererFactory,
  rank: 40,
  dataType: 'json'
};

export default extension;
