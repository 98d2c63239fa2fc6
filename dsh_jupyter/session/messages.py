"""Message and content-block shapes, and the sources that tell who wrote a message.

The blocks and sources this package writes have :class:`~typing.TypedDict` shapes (:class:`TextBlock`,
:class:`ToolResultBlock`, :class:`ImageBlock`, :class:`UserSource`, :class:`PluginSource`…), the fields
the log stores. :data:`Block` and :data:`Message` stay ``dict[str, Any]``: a block or a message read back
from a log is whatever JSON the file holds (another writer's, an older version's, a damaged line's), so
readers check each field before they use it; a user message also carries open-ended extras (``envelope``,
``meta``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

#: A block or a message as read from a log: arbitrary JSON, checked field by field where it is used.
Block = dict[str, Any]
Message = dict[str, Any]


class UserSource(TypedDict):
    """A human prompt or steer."""

    kind: Literal["user"]


class ToolSource(TypedDict):
    """A tool result: ``callId`` is the ``id`` of the tool call it answers."""

    kind: Literal["tool"]
    callId: str


class PluginSource(TypedDict):
    """A message a part of dsh wrote (``plugin`` names it: ``compact``, ``hooks-claude-code``…)."""

    kind: Literal["plugin"]
    plugin: str
    compactionId: NotRequired[str]
    sourceCommandId: NotRequired[str]


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    type: Literal["reasoning"]
    text: str


class ToolCallBlock(TypedDict):
    """A call the model asked for; ``arguments`` is the raw JSON string it streamed."""

    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str


class ToolResultBlock(TypedDict):
    """The one block of a tool result message (its content: text and image blocks)."""

    type: Literal["tool-result"]
    toolCallId: str
    content: list[Block]
    isError: bool


class ImageBlock(TypedDict):
    """An image a tool handed back, as the log keeps it (:mod:`dsh_jupyter.images`): never the bytes, except
    ``data`` (base64) in a copy made for a model that accepts images."""

    type: Literal["image"]
    artifact: NotRequired[str]  # missing when the store had no place for it (``unavailable`` says why)
    mediaType: str
    width: int
    height: int
    bytes: int
    originalWidth: NotRequired[int]
    originalHeight: NotRequired[int]
    tool: NotRequired[str]
    unavailable: NotRequired[str]
    data: NotRequired[str]


#: Source of a human prompt or steer.
USER_SOURCE: UserSource = {"kind": "user"}

#: Plugin name that marks a compaction checkpoint (``{"kind": "plugin", "plugin": "compact", ...}``).
COMPACTION_PLUGIN = "compact"

#: ``source.kind`` of a prepared cross-session reference context.
SESSION_REFERENCE_KIND = "session-reference"


def new_message_id() -> str:
    return str(uuid.uuid4())


def text_block(text: str) -> TextBlock:
    return {"type": "text", "text": text}


def user_message(content: Sequence[Mapping[str, Any]] | str, source: Mapping[str, Any] | None = None,
                 message_id: str | None = None, **extra: Any) -> Message:
    """A ``user/message`` body in the reference's key order (``content, source, role, id``)."""
    blocks = [text_block(content)] if isinstance(content, str) else [dict(b) for b in content]
    message: Message = {"content": blocks, "source": dict(source or USER_SOURCE), "role": "user",
                        "id": message_id or new_message_id()}
    message.update(extra)
    return message


def assistant_message(content: Sequence[Mapping[str, Any]], source: Mapping[str, Any],
                      message_id: str | None = None) -> Message:
    return {"role": "assistant", "content": [dict(b) for b in content], "source": dict(source),
            "id": message_id or new_message_id()}


def tool_result_message(call_id: str, content: Sequence[Mapping[str, Any]], is_error: bool = False,
                        message_id: str | None = None) -> Message:
    """A tool result: exactly one ``tool-result`` block whose ``toolCallId`` is its source's ``callId``."""
    source: ToolSource = {"kind": "tool", "callId": call_id}
    result: ToolResultBlock = {"type": "tool-result", "toolCallId": call_id, "content": [dict(b) for b in content],
                               "isError": bool(is_error)}
    return {
        "source": source,
        "content": [result],
        "role": "user",
        "id": message_id or new_message_id(),
    }


def compaction_source(compaction_id: str, source_command_id: str | None = None) -> PluginSource:
    source: PluginSource = {"kind": "plugin", "plugin": COMPACTION_PLUGIN, "compactionId": compaction_id}
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    return source


def is_checkpoint_source(source: Any) -> bool:
    """A compaction checkpoint is recognised only by its source marker, never by its text."""
    return isinstance(source, Mapping) and source.get("kind") == "plugin" and source.get("plugin") == COMPACTION_PLUGIN


def is_direct_user_source(source: Any) -> bool:
    return isinstance(source, Mapping) and source.get("kind") == "user"


def block_texts(blocks: Iterable[Any], kinds: type | tuple[type, ...] = str) -> Iterator[Any]:
    """The ``text`` of every ``text`` block whose text is of ``kinds`` (a ``str``; a reader of long logs also
    takes the store's undecoded strings), in order. Reasoning, tool calls and images are skipped."""
    return (b["text"] for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), kinds))


def blocks_text(blocks: Iterable[Any], joiner: str = "\n") -> str:
    """The texts of :func:`block_texts`, joined."""
    return joiner.join(block_texts(blocks))


def message_text(message: Mapping[str, Any] | None) -> str:
    if not message:
        return ""
    content = message.get("content")
    return blocks_text(content) if isinstance(content, list) else ""


def display_content(message: Mapping[str, Any]) -> list[Any]:
    """The direct content of a prompt: the envelope's ``displayContent`` when a snapshot was baked in."""
    envelope = message.get("envelope")
    if isinstance(envelope, Mapping) and isinstance(envelope.get("displayContent"), list):
        return list(envelope["displayContent"])
    content = message.get("content")
    return list(content) if isinstance(content, list) else []
