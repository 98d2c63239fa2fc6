"""Inbox records: what a host hands the agent, frozen together (content, source, attached contexts)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..session.messages import USER_SOURCE, text_block

Placement = Literal["separate", "prompt-prefix"]
PLACEMENTS: tuple[str, ...] = ("separate", "prompt-prefix")

#: The routing cue between a baked snapshot and the direct prompt (``prompt-prefix`` placement).
REQUEST_DELIMITER = "\n\n## My request:\n"


def _freeze(value: Any) -> Any:
    """A deep, immutable copy (tuples and read-only mappings) so later edits cannot reach the record."""
    if isinstance(value, Mapping):
        return _FrozenDict({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A mutable deep copy of a frozen value (what goes into an event's data)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return copy.deepcopy(value)


class _FrozenDict(dict):  # type: ignore[type-arg]
    """A dict that refuses mutation (keeps JSON-serialisability and ``Mapping`` checks)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("inbox records are frozen")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]


def normalise_content(content: str | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Accept a plain string or content blocks; refuse anything else with a clear message."""
    if isinstance(content, str):
        return [text_block(content)]
    blocks: list[Mapping[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise TypeError(f"content blocks must be objects with a 'type', got {block!r}")
        blocks.append(dict(block))
    return blocks


@dataclass(frozen=True)
class InboxRecord:
    """One message waiting for the agent: direct content, its source and attached contexts."""

    content: tuple[Any, ...]
    source: Mapping[str, Any]
    contexts: tuple[Any, ...] = ()
    placement: Placement = "separate"
    kind: Literal["prompt", "steer", "inject"] = "prompt"
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, content: str | Sequence[Mapping[str, Any]], *, source: Mapping[str, Any] | None = None,
               contexts: Sequence[Mapping[str, Any]] = (), placement: Placement = "separate",
               kind: Literal["prompt", "steer", "inject"] = "prompt",
               meta: Mapping[str, Any] | None = None) -> InboxRecord:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
        if kind == "inject" and contexts:
            raise ValueError("inject() adds synthetic messages only; attach contexts to send() or steer()")
        return cls(
            content=_freeze(normalise_content(content)),
            source=_freeze(dict(source or USER_SOURCE)),
            contexts=_freeze([dict(c) for c in contexts]),
            placement=placement,
            kind=kind,
            meta=_freeze(dict(meta or {})),
        )

    def direct_text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")
