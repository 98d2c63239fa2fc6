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
 * - `dsh-jupyter:chat-sidebar` puts the chat with the active notebook's agent in a side panel, opened by
 *   the command `dsh-jupyter:open-chat` (palette, and the Chat button of each notebook's toolbar), see
 *   `./sidebar`.
 * - `dsh-jupyter:inline-completion` offers ghost-text completions of cells from the dsh model through
 *   JupyterLab's inline completer (off until switched on), see `./inline_completion`.
 * - The mime renderer of reference contexts lives in `./mime` (the package's `mimeExtension`).
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ISessionContextDialogs } from '@jupyterlab/apputils';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';
import { ICompletionProviderManager } from '@jupyterlab/completer';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { CommandToolbarButton } from '@jupyterlab/ui-components';

import { mentionChips } from './chips.js';
import { DshCompletionProvider } from './completion.js';
import { DshCellHighlighter, registerPromptLanguage } from './highlight.js';
import { inlineCompletion } from './inline_completion.js';
import { CurrentSessions } from './kernel.js';
import { LiveNotebooks } from './notebook.js';
import { kernelRestarts } from './restarts.js';
import { chatIcon, DshSidebar, OPEN_COMMAND } from './sidebar.js';
import { MentionTrigger } from './trigger.js';

const mentions: JupyterFrontEndPlugin<void> = {
  id: 'dsh-jupyter:mentions',
  description:
    'Completes @ mentions of sessions and files in %%dsh cells as you type.',
  autoStart: true,
  requires: [ICompletionProviderManager, INotebookTracker, IEditorLanguageRegistry],
  activate: (
    app: JupyterFrontEnd,
    manager: ICompletionProviderManager,
    tracker: INotebookTracker,
    languages: IEditorLanguageRegistry
  ): void => {
    registerPromptLanguage(languages);
    manager.registerProvider(
      new DshCompletionProvider({
        serverSettings: app.serviceManager.serverSettings,
        contents: app.serviceManager.contents,
        invoke: id => manager.invoke(id)
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
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    new LiveNotebooks(tracker, app.serviceManager.user ?? null, kernelRestarts(app.serviceManager.events));
  }
};

const chatSidebar: JupyterFrontEndPlugin<void> = {
  id: 'dsh-jupyter:chat-sidebar',
  description: "A side panel with the chat of the active notebook's agent (transcript, approvals, prompt box).",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer, ISessionContextDialogs],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    dialogs: ISessionContextDialogs | null
  ): void => {
    const sidebar = new DshSidebar({
      tracker,
      contents: app.serviceManager.contents,
      serverSettings: app.serviceManager.serverSettings,
      restarts: kernelRestarts(app.serviceManager.events),
      selectKernel: dialogs ? context => dialogs.selectKernel(context) : undefined
    });
    app.shell.add(sidebar, 'right', { rank: 650 });
    restorer?.add(sidebar, sidebar.id);
    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Open the dsh Chat Sidebar',
      caption: "Chat with the notebook's agent in a side panel",
      icon: args => (args.toolbar ? chatIcon : undefined),
      execute: () => {
        app.shell.activateById(sidebar.id);
        sidebar.focusPrompt();
      }
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'dsh' });
    const addButton = (panel: NotebookPanel): void => {
      const button = new CommandToolbarButton({
        commands: app.commands,
        id: OPEN_COMMAND,
        args: { toolbar: true },
        label: 'Chat'
      });
      button.addClass('dsh-sidebar-toolbar-button');
      if (!panel.toolbar.insertAfter('cellType', 'dsh-chat', button)) {
        panel.toolbar.addItem('dsh-chat', button);
      }
    };
    tracker.forEach(addButton);
    tracker.widgetAdded.connect((_sender, panel) => addButton(panel));
  }
};

export default [mentions, chips, liveNotebook, chatSidebar, inlineCompletion];
