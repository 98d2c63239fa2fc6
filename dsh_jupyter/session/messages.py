"""Message and content-block shapes, and the sources that tell who wrote a message."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Source of a human prompt or steer.
USER_SOURCE: dict[str, Any] = {"kind": "user"}

#: Plugin name that marks a compaction checkpoint (``{"kind": "plugin", "plugin": "compact", ...}``).
COMPACTION_PLUGIN = "compact"

#: ``source.kind`` of a prepared cross-session reference context.
SESSION_REFERENCE_KIND = "session-reference"

Block = dict[str, Any]
Message = dict[str, Any]


def new_message_id() -> str:
    return str(uuid.uuid4())


def text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def user_message(content: Sequence[Block] | str, source: Mapping[str, Any] | None = None,
                 message_id: str | None = None, **extra: Any) -> Message:
    """A ``user/message`` body in the reference's key order (``content, source, role, id``)."""
    blocks = [text_block(content)] if isinstance(content, str) else [dict(b) for b in content]
    message: Message = {"content": blocks, "source": dict(source or USER_SOURCE), "role": "user",
                        "id": message_id or new_message_id()}
    message.update(extra)
    return message


def assistant_message(content: Sequence[Block], source: Mapping[str, Any],
                      message_id: str | None = None) -> Message:
    return {"role": "assistant", "content": [dict(b) for b in content], "source": dict(source),
            "id": message_id or new_message_id()}


def tool_result_message(call_id: str, content: Sequence[Block], is_error: bool = False,
                        message_id: str | None = None) -> Message:
    """A tool result: exactly one ``tool-result`` block whose ``toolCallId`` is its source's ``callId``."""
    return {
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": [dict(b) for b in content],
                     "isError": bool(is_error)}],
        "role": "user",
        "id": message_id or new_message_id(),
    }


def compaction_source(compaction_id: str, source_command_id: str | None = None) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "plugin", "plugin": COMPACTION_PLUGIN, "compactionId": compaction_id}
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    return source


def is_checkpoint_source(source: Any) -> bool:
    """A compaction checkpoint is recognised only by its source marker, never by its text."""
    return isinstance(source, Mapping) and source.get("kind") == "plugin" and source.get("plugin") == COMPACTION_PLUGIN


def is_direct_user_source(source: Any) -> bool:
    return isinstance(source, Mapping) and source.get("kind") == "user"


def blocks_text(blocks: Iterable[Any], joiner: str = "\n") -> str:
    """The ``text`` of every ``text`` block, joined (reasoning, tool calls and images are skipped)."""
    return joiner.join(
        b["text"] for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


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
