/**
 * Mentions shown as chips in `%%dsh` cells.
 *
 * {@link mentionChips} is the CodeMirror 6 extension of `%%dsh` cells: each mention (the rule of
 * `chip_text.ts`) becomes an atomic chip (the cursor steps over it, Backspace or Delete removes it whole),
 * so the long URI neither shows nor makes the cell scroll sideways. Other cells are left alone.
 */

import { Extension, RangeSetBuilder } from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  ViewPlugin,
  ViewUpdate,
  WidgetType
} from '@codemirror/view';

import { chipElement, findMentions, IMention } from './chip_text.js';
import { isDshCell } from './mentions.js';

export { chipElement, chipText, findMentions, mentionTarget, unescapeLabel } from './chip_text.js';
export type { IMention, MentionKind } from './chip_text.js';

class ChipWidget extends WidgetType {
  constructor(private readonly _mention: IMention) {
    super();
  }

  eq(other: ChipWidget): boolean {
    return (
      other._mention.label === this._mention.label &&
      other._mention.uri === this._mention.uri
    );
  }

  toDOM(): HTMLElement {
    return chipElement(this._mention);
  }

  ignoreEvent(): boolean {
    return false;
  }
}

/** The chip decorations of a `%%dsh` cell's document (none for other cells). */
function chipDecorations(view: EditorView): DecorationSet {
  const text = view.state.doc.toString();
  if (!isDshCell(text)) {
    return Decoration.none;
  }
  const builder = new RangeSetBuilder<Decoration>();
  for (const mention of findMentions(text)) {
    builder.add(mention.from, mention.to, Decoration.replace({ widget: new ChipWidget(mention) }));
  }
  return builder.finish();
}

/** The CodeMirror 6 extension that shows the mentions of a `%%dsh` cell as atomic chips. */
export function mentionChips(): Extension {
  const plugin = ViewPlugin.fromClass(
    class {
      decorations: DecorationSet;

      constructor(view: EditorView) {
        this.decorations = chipDecorations(view);
      }

      update(update: ViewUpdate): void {
        if (update.docChanged) {
          this.decorations = chipDecorations(update.view);
        }
      }
    },
    { decorations: value => value.decorations }
  );
  return [
    plugin,
    EditorView.atomicRanges.of(view => view.plugin(plugin)?.decorations ?? Decoration.none)
  ];
}
