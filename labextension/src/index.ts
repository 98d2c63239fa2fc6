/**
 * dsh-jupyter front end for JupyterLab 4 and Notebook 7.
 *
 * - `dsh-jupyter:mentions` registers the `@` completion provider of `%%dsh` cells and opens the
 *   completer as soon as a mention is typed (no Tab needed; JupyterLab's own continuous hinting is off
 *   by default, so the plugin watches the active cell itself).
 * - `%%dsh` cells highlight as Markdown (they are prompts), other code cells as the kernel's language.
 * - `dsh-jupyter:chips` shows each mention of a `%%dsh` cell as an atomic chip (`./chips`).
 * - `dsh-jupyter:live-notebook` serves each open notebook to its kernel (the agent reads, edits and runs
 *   cells; its edits in "ask" mode appear as proposals with Accept / Reject), see `./notebook`.
 * - The mime renderer of reference contexts lives in `./mime` (the package's `mimeExtension`).
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry
} from '@jupyterlab/codemirror';
import { ICompletionProviderManager } from '@jupyterlab/completer';
import { INotebookTracker } from '@jupyterlab/notebook';

import { mentionChips } from './chips.js';
import { DshCompletionProvider } from './completion.js';
import { DshCellHighlighter } from './highlight.js';
import { CurrentSessions } from './kernel.js';
import { LiveNotebooks } from './notebook.js';
import { MentionTrigger } from './trigger.js';

const mentions: JupyterFrontEndPlugin<void> = {
  id: 'dsh-jupyter:mentions',
  description:
    'Completes @ mentions of sessions and files in %%dsh cells as you type.',
  autoStart: true,
  requires: [ICompletionProviderManager, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    manager: ICompletionProviderManager,
    tracker: INotebookTracker
  ): void => {
    manager.registerProvider(
      new DshCompletionProvider({
        serverSettings: app.serviceManager.serverSettings,
        contents: app.serviceManager.contents
      })
    );
    new MentionTrigger(tracker, id => manager.invoke(id));
    new CurrentSessions(tracker);
    new DshCellHighlighter(tracker);
    // A marker for tests and for users checking that the extension is active.
    document.body.dataset.dshJupyter = 'active';
  }
};

const chips: JupyterFrontEndPlugin<void> = {
  id: 'dsh-jupyter:chips',
  description: 'Shows the mentions of %%dsh cells as chips (the source keeps the markup).',
  autoStart: true,
  requires: [IEditorExtensionRegistry],
  activate: (_app: JupyterFrontEnd, registry: IEditorExtensionRegistry): void => {
    registry.addExtension({
      name: 'dsh-jupyter:mention-chips',
      factory: () => EditorExtensionRegistry.createImmutableExtension(mentionChips())
    });
  }
};

const liveNotebook: JupyterFrontEndPlugin<void> = {
  id: 'dsh-jupyter:live-notebook',
  description:
    'Serves the open notebook to its kernel: the agent reads, edits (as proposals) and runs cells.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    new LiveNotebooks(tracker);
  }
};

export default [mentions, chips, liveNotebook];
