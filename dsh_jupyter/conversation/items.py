"""The items of a transcript: one set of types for every view of a conversation.

Items are plain dataclasses holding raw text (nothing here is HTML or Markdown; each view escapes). Texts are
kept as far as the view's :class:`~.limits.Limits` allow; ``cut`` (``result_cut`` for a tool's result) counts
the characters left out, and :attr:`Prose.shown` is the text with a line saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..clip import left_out
from .calls import approval_note, call_source

#: How a tool call stands: still running, finished (``ok`` or ``error``), or cut off by the end of its turn.
ToolStatus = Literal["running", "ok", "error", "stopped"]

#: What a context item keeps of each referenced session's metadata for a view (raw values; views escape).
REFERENCE_KEYS = ("sessionId", "label", "capturedThroughSeq", "compacted", "truncated", "omittedMessages",
                  "omittedBytes")


@dataclass
class Prose:
    """A message's text: ``text`` is what was kept, ``cut`` how many more characters it had."""

    number: int
    text: str = ""
    cut: int = 0

    @property
    def shown(self) -> str:
        """The text, and when it was cut a line saying how much was left out."""
        return self.text + left_out(self.cut, "characters of this message") if self.cut else self.text


@dataclass
class Prompt(Prose):
    """What the user typed (a direct prompt or a steer)."""

    steered: bool = False
    #: Typed into a widget and not yet recorded in the log; the recorded prompt confirms it.
    pending: bool = False
    kind: Literal["user"] = "user"


@dataclass
class Answer(Prose):
    """The assistant's text; ``streaming`` while more of it may still arrive."""

    streaming: bool = True
    kind: Literal["text"] = "text"


@dataclass
class Reasoning(Prose):
    """The model's reasoning text (live: streamed; from the log: the message's reasoning blocks)."""

    streaming: bool = True
    kind: Literal["reasoning"] = "reasoning"


@dataclass
class Checkpoint(Prose):
    """A compaction checkpoint: the summary that replaced the conversation before it."""

    kind: Literal["checkpoint"] = "checkpoint"


@dataclass
class Note(Prose):
    """A message injected by the harness or a hook (not typed by the user)."""

    kind: Literal["note"] = "note"


@dataclass
class ToolCall:
    """One tool call, matched to its result by ``call_id``; ``result`` is ``None`` until one is recorded."""

    number: int
    call_id: str
    name: str
    #: The arguments on one line (made from the whole arguments, whatever the limits keep of them).
    summary: str
    arguments: str
    result: str | None = None
    status: ToolStatus = "running"
    #: The approval decision (the log's ``meta.approval`` record), once there is one.
    approval: dict[str, object] | None = None
    #: Characters of the result left out by the view's limits.
    result_cut: int = 0
    kind: Literal["tool"] = "tool"

    @property
    def done(self) -> bool:
        return self.status != "running"

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    @property
    def approval_note(self) -> str | None:
        """How the call was allowed or refused, in a few words (``None`` when there is nothing to say)."""
        return approval_note(self.approval)

    @property
    def source(self) -> str | None:
        """The code or command of a ``python`` or ``bash`` call (``None`` for other tools or odd arguments)."""
        return call_source(self.name, self.arguments)


@dataclass
class Context:
    """A reference context entered the log: ``source`` is its message's source metadata (what it
    referenced; the snapshots themselves are not kept)."""

    number: int
    source: dict[str, Any] = field(default_factory=dict)
    kind: Literal["context"] = "context"

    @property
    def references(self) -> list[dict[str, object]]:
        """Each referenced session's metadata (:data:`REFERENCE_KEYS`, raw)."""
        entries = self.source.get("references")
        return [{key: entry.get(key) for key in REFERENCE_KEYS}
                for entry in (entries if isinstance(entries, list | tuple) else ()) if isinstance(entry, Mapping)]

    @property
    def sessions(self) -> tuple[tuple[str, str, int | None], ...]:
        """The referenced sessions as ``(label, session id, captured through seq)`` (the label falls back to the id)."""
        found: list[tuple[str, str, int | None]] = []
        for entry in self.references:
            session_id = str(entry.get("sessionId", "?"))
            label, through = entry.get("label"), entry.get("capturedThroughSeq")
            found.append((label if isinstance(label, str) else session_id, session_id,
                          through if isinstance(through, int) and not isinstance(through, bool) else None))
        return tuple(found)

    @property
    def variables(self) -> tuple[tuple[str, str], ...]:
        """The notebook variables referenced, as ``(label, brief)`` (``df``, ``DataFrame 1,000×4``)."""
        return self._labelled("variables", "variable")

    @property
    def cells(self) -> tuple[tuple[str, str], ...]:
        """The notebook cells referenced, as ``(label, brief)`` (``cell``, ``code cell [3] · 2 outputs``)."""
        return self._labelled("cells", "cell")

    def _labelled(self, key: str, name_key: str) -> tuple[tuple[str, str], ...]:
        entries = self.source.get(key)
        found: list[tuple[str, str]] = []
        for entry in entries if isinstance(entries, list | tuple) else ():
            if isinstance(entry, Mapping):
                name = entry.get("label") or entry.get(name_key)
                brief = entry.get("brief") or entry.get("type")
                found.append((str(name or "?"), str(brief or "")))
        return tuple(found)


@dataclass
class Notice:
    """Something the agent or the host said to the user (a hook warning, a retry, a compaction, a stop)."""

    number: int
    text: str
    level: str = "info"
    kind: Literal["notice"] = "notice"


@dataclass
class TurnEnd:
    """A turn ended other than ``completed``: ``interrupted``, ``error``, ``blocked`` or ``max-steps``."""

    number: int
    reason: str
    error: str | None = None
    kind: Literal["end"] = "end"


Item = Prompt | Answer | Reasoning | Checkpoint | Note | ToolCall | Context | Notice | TurnEnd


def clip(item: Prose, limit: int | None) -> None:
    """Cut ``item``'s text to ``limit`` characters (``None``: keep it whole), counting what was left out."""
    if limit is not None and len(item.text) > limit:
        item.cut += len(item.text) - limit
        item.text = item.text[:limit]


def item_id(item: Item) -> str:
    """The stable id a view keys an item by (``i1``, ``i2``, …)."""
    return f"i{item.number}"


def role_of(item: Prose) -> str:
    """``assistant`` for answers and reasoning, else ``user`` (prompts, checkpoints, harness notes): the role
    a message had."""
    return "assistant" if isinstance(item, Answer | Reasoning) else "user"


__all__ = ["REFERENCE_KEYS", "Answer", "Checkpoint", "Context", "Item", "Note", "Notice", "Prompt", "Prose",
           "Reasoning", "ToolCall", "ToolStatus", "TurnEnd", "clip", "item_id", "role_of"]
