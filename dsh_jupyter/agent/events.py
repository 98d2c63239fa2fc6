"""What an agent reports to its host while it works (the host renders these; the core never displays)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AgentEvent:
    """Base class: every event names the turn it belongs to (0 outside turns)."""

    turn: int


@dataclass(frozen=True)
class TurnStarted(AgentEvent):
    pass


@dataclass(frozen=True)
class MessageRecorded(AgentEvent):
    """A surface message entered the log (prompt, steer, context, checkpoint, injected note)."""

    seq: int
    message: dict[str, Any]


@dataclass(frozen=True)
class TextDelta(AgentEvent):
    text: str


@dataclass(frozen=True)
class ReasoningDelta(AgentEvent):
    text: str


@dataclass(frozen=True)
class ToolStarted(AgentEvent):
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolFinished(AgentEvent):
    call_id: str
    name: str
    text: str
    is_error: bool


@dataclass(frozen=True)
class ApprovalDecided(AgentEvent):
    """Whether a tool call may run, and who said so (``record`` is what the log keeps as ``meta.approval``).

    Emitted after :class:`ToolStarted` and before the call runs (or is refused).
    """

    call_id: str
    name: str
    record: dict[str, Any]


@dataclass(frozen=True)
class AssistantMessage(AgentEvent):
    """A finished assistant message (its text may be empty when it only called tools).

    ``usage`` is the model call's token counts in the session format (``inputTokens``, ``outputTokens``,
    ``cacheReadTokens``?, ``reasoningTokens``?), or ``None`` when the provider reported none.
    """

    text: str
    seq: int
    usage: dict[str, int] | None = None


@dataclass(frozen=True)
class Notice(AgentEvent):
    """Something the user should read: a hook warning, a retry, an automatic compaction."""

    text: str
    level: str = "info"


@dataclass(frozen=True)
class TitleChanged(AgentEvent):
    title: str
    source: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnEnded(AgentEvent):
    """``reason`` is one of completed, interrupted, error, blocked, max-steps."""

    reason: str
    error: str | None = None
