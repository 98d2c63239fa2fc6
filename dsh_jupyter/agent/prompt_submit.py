"""The prompt-submit hook point: listeners see the direct prompt and allow (maybe rewritten) or block.

Listeners wrap each other like middleware: each receives the submission and a ``next`` callable for the
listeners after it, and what it returns is authoritative. A listener that only observes returns
``await next(submission)``; one that rewrites returns ``Allow(content=...)``; one that refuses returns
``Block(reason)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PromptSubmission:
    """What listeners see: the direct prompt only (never the attached snapshot bytes)."""

    content: list[dict[str, Any]]
    source: Mapping[str, Any]
    session_id: str
    turn: int

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")


@dataclass(frozen=True)
class Allow:
    """Admit the prompt; ``content`` replaces the direct content when given; ``contexts`` are extra
    messages (dicts with ``content`` and ``source``) to record after the prompt."""

    content: list[dict[str, Any]] | None = None
    contexts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Block:
    reason: str


Decision = Allow | Block
Next = Callable[[PromptSubmission], Awaitable[Decision]]
Listener = Callable[[PromptSubmission, Next], Awaitable[Decision]]


class PromptSubmitHooks:
    """An ordered chain of listeners; the first registered is the outermost."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def add(self, listener: Listener, *, prepend: bool = False) -> Callable[[], None]:
        if prepend:
            self._listeners.insert(0, listener)
        else:
            self._listeners.append(listener)

        def dispose() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return dispose

    async def run(self, submission: PromptSubmission) -> Decision:
        listeners = list(self._listeners)

        async def call(index: int, current: PromptSubmission) -> Decision:
            if index >= len(listeners):
                return Allow()
            decision = await listeners[index](current, lambda s: call(index + 1, s))
            if not isinstance(decision, (Allow, Block)):
                raise TypeError(f"prompt-submit listener returned {decision!r}; return Allow(...) or Block(...)")
            return decision

        return await call(0, submission)
