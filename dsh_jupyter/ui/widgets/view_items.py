"""The chat view's item form: a transcript item as ``chat.js`` reads it, answers as the Markdown tree of
:func:`~dsh_jupyter.ui.markdown.markdown_tree` (the view builds it without parsing HTML).

The chat view shows prompts, answers, reasoning, tool calls, reference contexts, notices and turn ends;
compaction checkpoints and harness notes stay in the log and its exports (a notice says a compaction happened).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ...conversation.items import (
    Answer,
    Checkpoint,
    Context,
    Item,
    Note,
    Notice,
    Prompt,
    Reasoning,
    ToolCall,
    item_id,
)
from ..display import reference_summary
from ..markdown import markdown_tree

log = logging.getLogger(__name__)


def context_summary(item: Context) -> str | None:
    """``Referenced: Regional sales Q3 · 2 messages · complete``; ``None`` (the context is not shown) when its
    metadata is malformed."""
    try:
        return reference_summary(item.source)
    except ValueError:
        log.debug("dsh: a reference context with malformed metadata is not shown", exc_info=True)
        return None


def view_item(item: Item) -> dict[str, Any] | None:
    """A transcript item as ``chat.js`` reads it (raw text, and answers as a document tree; the view escapes);
    ``None`` for an item the chat view does not show."""
    view: dict[str, Any] = {"id": item_id(item)}
    if isinstance(item, Prompt):
        view.update(kind="user", text=item.text, steered=item.steered)
    elif isinstance(item, Answer):
        view.update(kind="assistant", text=item.text, streaming=item.streaming,
                    doc=markdown_tree(item.text, partial=item.streaming))
    elif isinstance(item, Reasoning):
        view.update(kind="reasoning", text=item.text, streaming=item.streaming)
    elif isinstance(item, ToolCall):
        view.update(kind="tool", callId=item.call_id, name=item.name, summary=item.summary,
                    arguments=item.arguments, result=item.result or "", isError=item.is_error, done=item.done,
                    status=item.status, approval=item.approval_note or "")
    elif isinstance(item, Context):
        summary = context_summary(item)
        if summary is None:
            return None
        view.update(kind="context", summary=summary, references=item.references)
    elif isinstance(item, Notice):
        view.update(kind="notice", text=item.text, level=item.level)
    elif isinstance(item, Checkpoint | Note):
        return None
    else:
        view.update(kind="end", reason=item.reason, error=item.error)
    return view


def view_items(items: Iterable[Item]) -> list[dict[str, Any]]:
    """The items the chat view shows, in its form."""
    return [view for view in map(view_item, items) if view is not None]
