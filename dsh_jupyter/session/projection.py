"""Projection: the part of a session's current surface that a reference carries across.

Kept, in model order: direct human messages (prompts and steers, ``source.kind == 'user'``),
compaction checkpoints (recognised only by their ``plugin: 'compact'`` source marker) and assistant
messages, each as the ``text`` of its text blocks joined with ``\\n``. Messages whose text is empty are
dropped (reasoning-only or tool-call-only turns contribute nothing). Everything else is left behind:
tool results, system messages, plugin-injected user messages, earlier reference snapshots (so
snapshots never propagate recursively), and the legacy ``steering/message`` / ``context/message``
events. Shadowed, log-only and streamed events never reach here: the input is the folded surface.

A prompt written with a baked-in prefix (the ``prompt-prefix`` placement) carries its direct content
in ``envelope.displayContent``; only that part is projected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .events import ASSISTANT_MESSAGE, USER_MESSAGE, Event
from .header import SessionHeader
from .longtext import LongText, RawString
from .messages import block_texts, blocks_text, display_content, is_checkpoint_source, is_direct_user_source
from .surface import SurfaceSnapshot

USER = "user"
ASSISTANT = "assistant"


@dataclass(frozen=True)
class ProjectedMessage:
    """One projected message: ``role`` is ``'user'`` or ``'assistant'``; ``checkpoint`` marks compaction."""

    role: str
    text: str
    checkpoint: bool = False


@dataclass(frozen=True)
class ProjectedSession:
    """What a referenced session contributes, captured at one point of its log."""

    session_id: str
    cwd: str | None
    captured_through_seq: int | None
    format_version: int
    messages: tuple[ProjectedMessage, ...]

    @property
    def compacted(self) -> bool:
        return any(m.checkpoint for m in self.messages)

    def data(self, label: str, messages: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        """The JSON object of this source (keys ``sessionId, label, cwd, capturedThroughSeq, conversation``)."""
        pairs = messages if messages is not None else [(m.role, m.text) for m in self.messages]
        return source_data(self.session_id, label, self.cwd, self.captured_through_seq, pairs)


def source_data(session_id: str, label: str, cwd: str | None, captured_through_seq: int | None,
                pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """The JSON object of one source: ``sessionId, label, cwd, capturedThroughSeq, conversation``."""
    return {
        "sessionId": session_id,
        "label": label,
        "cwd": cwd,
        "capturedThroughSeq": captured_through_seq,
        "conversation": [{"role": role, "text": text} for role, text in pairs],
    }


def format_version(header: SessionHeader) -> int:
    """The captured format version of a session (0 when its header has none)."""
    return int(header.version) if isinstance(header.version, int) else 0


#: Surface event types projection never looks into: a store need not decode them for a snapshot.
PROJECTION_SKIPS: frozenset[str] = frozenset({"tool/result", "system/message"})


def _text(blocks: Any) -> str:
    return blocks_text(blocks) if isinstance(blocks, list) else ""


@dataclass(frozen=True)
class LongMessage:
    """A projected message whose text holds a string the store left undecoded (:mod:`.longtext`)."""

    role: str
    text: LongText
    checkpoint: bool = False


def _blocks(event: Event) -> tuple[str, Any, bool] | None:
    """``(role, content blocks, checkpoint)`` of a surface event projection keeps, or ``None``."""
    if event.type == USER_MESSAGE:
        message = event.data if isinstance(event.data, dict) else None
        if message is None:
            return None
        source = message.get("source")
        checkpoint = is_checkpoint_source(source)
        if not checkpoint and not is_direct_user_source(source):
            return None
        return USER, display_content(message), checkpoint
    if event.type == ASSISTANT_MESSAGE:
        message = event.message
        return ASSISTANT, message.get("content") if message is not None else None, False
    return None


def project_event(event: Event) -> ProjectedMessage | None:
    """The projected form of one surface event, or ``None`` when it is left behind."""
    found = _blocks(event)
    if found is None:
        return None
    role, blocks, checkpoint = found
    text = _text(blocks)
    return ProjectedMessage(role, text, checkpoint) if text else None


def project_long_event(event: Event) -> ProjectedMessage | LongMessage | None:
    """:func:`project_event` of an event that may hold undecoded strings (a surface read with
    :data:`~dsh_jupyter.store.longline.RAW_LONG_STRINGS`): a text block whose text is one makes a
    :class:`LongMessage` (the same text, joined the same way, read a piece at a time)."""
    found = _blocks(event)
    if found is None:
        return None
    role, blocks, checkpoint = found
    texts = list(block_texts(blocks, (str, RawString))) if isinstance(blocks, list) else []
    if not any(isinstance(value, RawString) for value in texts):  # the common case: the one projection rule
        text = _text(blocks)
        return ProjectedMessage(role, text, checkpoint) if text else None
    # blocks_text's join ("\n" between the texts), with the undecoded strings kept as they are
    joined: list[str | RawString] = []
    for value in texts:
        if joined:
            joined.append("\n")
        joined.append(value)
    return LongMessage(role, LongText(joined), checkpoint)


def project_surface(snapshot: SurfaceSnapshot) -> ProjectedSession:
    """Project a ``read_surface`` snapshot (header copy, last raw seq, current surface events)."""
    messages = tuple(m for m in (project_event(e) for e in snapshot.events) if m is not None)
    header = snapshot.header
    return ProjectedSession(
        session_id=header.id,
        cwd=header.cwd,
        captured_through_seq=snapshot.captured_through_seq,
        format_version=format_version(header),
        messages=messages,
    )
