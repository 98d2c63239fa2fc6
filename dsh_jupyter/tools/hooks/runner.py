"""The agent loop's view of hooks: one runner over any number of bridges, one decision per event.

Every method runs the matching hooks of every bridge (bridges in the order they were added, hooks in
configuration order, one at a time) and merges the answers most-restrictive first. Warnings collect
non-blocking failures (a hook that crashed, timed out or returned nonsense) for the host to show the
user; they never stop the turn.

Injected context keeps its origin: ``decision.contexts()`` pairs each text with the source marker of
the bridge that produced it (:data:`CLAUDE_CODE_HOOKS_SOURCE` or :data:`CODEX_HOOKS_SOURCE`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...session.messages import PluginSource
from .bridge import HookBridge, HookContext
from .protocol import Verdict, merge


@dataclass(frozen=True)
class _WithContexts:
    """What every hook event's decision carries: contexts to add (each with its source), warnings for the
    user and ``systemMessage`` texts."""

    additional_context: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    system_messages: list[str] = field(default_factory=list)
    context_sources: list[PluginSource] = field(default_factory=list)

    def contexts(self) -> list[tuple[str, PluginSource]]:
        """Each added context text with the source marker to record it under."""
        return list(zip(self.additional_context, self.context_sources, strict=False))


def _join(reasons: Sequence[str]) -> str | None:
    return "\n".join(reasons) if reasons else None


@dataclass(frozen=True)
class SessionStartDecision(_WithContexts):
    """``SessionStart``: context to add before the first prompt; ``halt`` asks the host to stop."""

    halt: bool = False
    halt_reason: str | None = None


@dataclass(frozen=True)
class PromptDecision(_WithContexts):
    """``UserPromptSubmit``: a blocked prompt must not be recorded or sent; ``reason`` says why."""

    blocked: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class ToolDecision(_WithContexts):
    """``PreToolUse``: ``deny`` means do not run the tool and give the model ``reason`` as its result.

    ``permission`` is the merged explicit answer (``"deny"`` > ``"ask"`` > ``"allow"``, or ``None``).
    ``ask`` means a hook wants the user to confirm; a host with no way to ask should treat it as a denial.
    ``halt`` (a hook returned ``continue: false``) also denies and asks the loop to end the turn.
    """

    deny: bool = False
    reason: str | None = None
    permission: str | None = None
    ask: bool = False
    halt: bool = False
    halt_reason: str | None = None


@dataclass(frozen=True)
class PostToolDecision(_WithContexts):
    """``PostToolUse``: the tool already ran; ``blocked`` means show the model ``reason`` as feedback."""

    blocked: bool = False
    reason: str | None = None
    halt: bool = False
    halt_reason: str | None = None


@dataclass(frozen=True)
class StopDecision(_WithContexts):
    """``Stop``: ``blocked`` means do not stop yet, continue the turn with ``reason`` as the instruction.

    ``halt`` (``continue: false``) overrides a block: stop now.
    """

    blocked: bool = False
    reason: str | None = None
    halt: bool = False
    halt_reason: str | None = None


def prompt_text(content: str | Iterable[Any]) -> str:
    """The ``prompt`` field: a string as is, or the text blocks of a message concatenated with no separator."""
    if isinstance(content, str):
        return content
    return "".join(
        block["text"] for block in content
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def _shared(verdict: Verdict) -> dict[str, Any]:
    return {
        "additional_context": [text for text, _ in verdict.contexts],
        "context_sources": [source for _, source in verdict.contexts],
        "warnings": list(verdict.warnings),
        "system_messages": list(verdict.system_messages),
    }


class HookRunner:
    """Fires hook events on every bridge added to it."""

    def __init__(self, bridges: Iterable[HookBridge] = ()) -> None:
        self._bridges: list[HookBridge] = list(bridges)
        self._lock = threading.Lock()
        self._reported_config_warnings = False

    def add(self, bridge: HookBridge) -> Callable[[], None]:
        """Add a bridge; returns a disposer that removes it again."""
        with self._lock:
            self._bridges.append(bridge)

        def dispose() -> None:
            with self._lock:
                if bridge in self._bridges:
                    self._bridges.remove(bridge)

        return dispose

    @property
    def bridges(self) -> list[HookBridge]:
        return list(self._bridges)

    def __bool__(self) -> bool:
        return any(not b.config.empty for b in self._bridges)

    async def _fire(self, event: str, ctx: HookContext, fields_for: Callable[[HookBridge], Mapping[str, Any]],
                    target: str | None = None) -> Verdict:
        verdicts = [await bridge.fire(event, ctx, fields_for(bridge), target) for bridge in self.bridges]
        return merge(verdicts)

    async def session_start(self, ctx: HookContext, source: str = "startup") -> SessionStartDecision:
        """Fire ``SessionStart`` (``source``: ``startup``, ``resume``, ``clear`` or ``compact``).

        The first call also reports configuration warnings of every bridge.
        """
        verdict = await self._fire("SessionStart", ctx, lambda _: {"source": source}, target=source)
        if not self._reported_config_warnings:
            self._reported_config_warnings = True
            notes = [note for bridge in self.bridges for note in bridge.warnings]
            verdict.warnings[:0] = notes
        return SessionStartDecision(halt=verdict.halt, halt_reason=_join(verdict.halt_reasons), **_shared(verdict))

    async def user_prompt_submit(self, ctx: HookContext, prompt: str | Iterable[Any]) -> PromptDecision:
        """Fire ``UserPromptSubmit`` with the raw prompt text (mentions still in canonical form)."""
        text = prompt_text(prompt)
        verdict = await self._fire("UserPromptSubmit", ctx, lambda _: {"prompt": text})
        blocked = verdict.blocked or verdict.halt
        reasons = verdict.halt_reasons + verdict.reasons
        return PromptDecision(blocked=blocked, reason=_join(reasons) if blocked else None, **_shared(verdict))

    async def pre_tool_use(self, ctx: HookContext, tool_name: str, tool_input: Mapping[str, Any],
                           tool_use_id: str) -> ToolDecision:
        """Fire ``PreToolUse`` before running a tool call."""
        verdict = await self._fire("PreToolUse", ctx, lambda b: b.tool_fields(tool_name, tool_input, tool_use_id),
                                   target=tool_name)
        deny = verdict.permission == "deny" or verdict.halt
        if verdict.halt:
            reason = _join(verdict.halt_reasons + (verdict.permission_reasons if verdict.permission == "deny" else []))
        elif verdict.permission is not None:
            reason = _join(verdict.permission_reasons)
        else:
            reason = None
        return ToolDecision(deny=deny, reason=reason, permission=verdict.permission, ask=verdict.permission == "ask",
                            halt=verdict.halt, halt_reason=_join(verdict.halt_reasons), **_shared(verdict))

    async def post_tool_use(self, ctx: HookContext, tool_name: str, tool_input: Mapping[str, Any],
                            tool_use_id: str, tool_response: str | Iterable[Any]) -> PostToolDecision:
        """Fire ``PostToolUse`` after a tool call, with its result flattened to text."""
        response = prompt_text(tool_response)

        def fields(bridge: HookBridge) -> dict[str, Any]:
            return {**bridge.tool_fields(tool_name, tool_input, tool_use_id), "tool_response": response}

        verdict = await self._fire("PostToolUse", ctx, fields, target=tool_name)
        return PostToolDecision(blocked=verdict.blocked, reason=_join(verdict.reasons), halt=verdict.halt,
                                halt_reason=_join(verdict.halt_reasons), **_shared(verdict))

    async def stop(self, ctx: HookContext, last_assistant_message: str | None = None, *,
                   stop_hook_active: bool = False) -> StopDecision:
        """Fire ``Stop`` when the model ends its turn. Pass ``stop_hook_active=True`` when the turn is
        already continuing because a Stop hook blocked, so scripts can avoid looping forever."""
        verdict = await self._fire("Stop", ctx, lambda b: b.stop_fields(last_assistant_message, stop_hook_active))
        blocked = verdict.blocked and not verdict.halt
        return StopDecision(blocked=blocked, reason=_join(verdict.reasons) if blocked else None, halt=verdict.halt,
                            halt_reason=_join(verdict.halt_reasons), **_shared(verdict))
