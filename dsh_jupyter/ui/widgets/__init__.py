"""Notebook widgets (anywidget): a mention picker, a prompt box and the chat and pick panels.

This package imports anywidget; nothing else in the package imports it at load time, so loading the
extension stays fast. The views live in ``dsh_jupyter/ui/static/`` (``picker.js``, ``prompt.js``, ``chat.js``,
bundled by ``jlpm build`` from ``labextension/src/widgets/*.ts``, and ``widgets.css``), escape through the
labextension's ``escape.ts`` and set every piece of text with ``textContent``; keys typed in them stay there
(Enter: newline, Ctrl/Cmd+Enter: send; the notebook's shortcuts never see them).

The widgets depend on the host seams of :mod:`dsh_jupyter.ui.protocols`: the picker (:mod:`.picker`) on
``SessionCandidates`` (its "search message bodies" toggle needs a host whose ``candidates`` also takes
``body=True``, ``BodySearch``), the prompt box (:mod:`.prompt`) on ``PromptHost`` (``submit_async`` sends or
steers; its listener receives :mod:`dsh_jupyter.agent.events` from the agent thread) and the panels
(:mod:`.panel`) on ``ChatHost``. The transcript is folded by :class:`dsh_jupyter.conversation.fold.Transcript`;
:mod:`.view_items` only converts its items to the form ``chat.js`` reads. Answers are Markdown:
:func:`dsh_jupyter.ui.markdown.markdown_tree` gives the tree of allowed elements parsed from the one
sanitiser's HTML, which the view builds without parsing HTML; the static copy (:mod:`.static_copy`) holds
that sanitised HTML itself.

:class:`ChatPanel` (``%dsh chat``; ``kind="pick"`` for ``%dsh pick``) is one output whose bundle also
carries ``text/html`` and ``text/plain`` copies of the conversation (:func:`.static_copy.conversation_html`,
:func:`.static_copy.conversation_text`), kept current through its ``display_id`` (nbclient, VS Code) and, in
JupyterLab and Notebook 7, by the view itself: it writes the copy into the document before each save
and replaces the dead widget with the copy when the kernel restarts.

Requests from a view arrive as anywidget commands (``anywidget.experimental.command``): each
returns ``(response, buffers)`` and never raises; failures come back as ``{"error": message}``.
"""

from __future__ import annotations

from ...conversation.fold import STEERED_NOTE
from ..markdown import DocNode, markdown_tree
from .chat import ChatTranscript
from .panel import ChatPanel
from .picker import MentionPicker
from .prompt import PromptBox
from .static_copy import PanelFacts, conversation_html, conversation_text, session_facts
from .submission import PromptSubmission, readable_prompt, submit_to_host
from .view_items import view_item, view_items

__all__ = [
    "STEERED_NOTE",
    "ChatPanel",
    "ChatTranscript",
    "DocNode",
    "MentionPicker",
    "PanelFacts",
    "PromptBox",
    "PromptSubmission",
    "conversation_html",
    "conversation_text",
    "markdown_tree",
    "readable_prompt",
    "session_facts",
    "submit_to_host",
    "view_item",
    "view_items",
]
