"""The chat view's item form: a transcript item as ``chat.js`` reads it, answers as the Markdown tree of
:func:`~dsh_jupyter.ui.markdown.markdown_tree` (the view builds it without parsing HTML).
"""

from __future__ import annotations

from typing import Any

from ..markdown import markdown_tree
from ..transcript import (
    ContextItem,
    Item,
    NoticeItem,
    ReasoningItem,
    TextItem,
    ToolItem,
    UserItem,
    item_id,
)


def view_item(item: Item) -> dict[str, Any]:
    """A transcript item as ``chat.js`` reads it (raw text, and answers as a document tree; the view escapes)."""
    view: dict[str, Any] = {"id": item_id(item)}
    if isinstance(item, UserItem):
        view.update(kind="user", text=item.text, steered=item.steered)
    elif isinstance(item, TextItem):
        view.update(kind="assistant", text=item.text, streaming=item.streaming,
                    doc=markdown_tree(item.text, partial=item.streaming))
    elif isinstance(item, ReasoningItem):
        view.update(kind="reasoning", text=item.text, streaming=item.streaming)
    elif isinstance(item, ToolItem):
        view.update(kind="tool", callId=item.call_id, name=item.name, summary=item.summary,
                    arguments=item.arguments, result=item.result, isError=item.is_error, done=item.done,
                    status=item.status)
    elif isinstance(item, ContextItem):
        view.update(kind="context", summary=item.summary, references=[dict(r) for r in item.references])
    elif isinstance(item, NoticeItem):
        view.update(kind="notice", text=item.text, level=item.level)
    else:
        view.update(kind="end", reason=item.reason, error=item.error)
    return view
