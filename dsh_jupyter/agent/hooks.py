"""The loop's side of command hooks (Claude Code / Codex bridges): ask, then translate the answer.

:class:`HookGate` wraps a ``HookRunner`` (``dsh_jupyter.tools.hooks``) and turns its decisions into what
the loop acts on: a block reason, contexts to record with their sources, and notices for the user.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..session.messages import text_block
from . import events as ev
from .approvals import HookVerdict

#: Source of loop-written feedback that came from hooks without a bridge of their own.
HOOK_FEEDBACK_SOURCE: dict[str, Any] = {"kind": "plugin", "plugin": "hooks"}


@dataclass
class HookAnswer:
    """What one hook event decided: stop (``blocked`` with a ``reason``) and/or add ``contexts``."""

    blocked: bool = False
    reason: str | None = None
    contexts: list[dict[str, Any]] = field(default_factory=list)
    verdict: HookVerdict | None = None  # PreToolUse only: an explicit "allow" or "ask"


def _contexts(outcome: Any) -> list[dict[str, Any]]:
    """Context messages (``content`` + ``source``) a hook asked to add, each under its bridge's source."""
    pairs = outcome.contexts() if callable(getattr(outcome, "contexts", None)) else [
        (text, HOOK_FEEDBACK_SOURCE) for text in getattr(outcome, "additional_context", ()) or ()
    ]
    return [{"content": [text_block(text)], "source": dict(source)} for text, source in pairs]


class HookGate:
    """Runs the hooks of one agent and reports warnings and ``systemMessage`` texts as notices."""

    def __init__(self, runner: Any, context: Callable[[int | None], Any],
                 emit: Callable[[ev.AgentEvent], None]) -> None:
        self.runner = runner
        self._context = context
        self._emit = emit

    def _notices(self, outcome: Any, turn: int) -> None:
        for warning in getattr(outcome, "warnings", ()) or ():
            self._emit(ev.Notice(turn, warning, "warning"))
        for message in getattr(outcome, "system_messages", ()) or ():
            self._emit(ev.Notice(turn, message, "info"))

    async def session_start(self, turn: int, source: str) -> HookAnswer:
        try:
            outcome = await self.runner.session_start(self._context(None), source)
        except Exception as exc:  # a broken SessionStart hook must not stop the session
            self._emit(ev.Notice(turn, f"SessionStart hook failed: {exc}", "warning"))
            return HookAnswer()
        self._notices(outcome, turn)
        return HookAnswer(contexts=_contexts(outcome))

    async def prompt(self, turn: int, prompt: str) -> HookAnswer:
        outcome = await self.runner.user_prompt_submit(self._context(turn), prompt)
        self._notices(outcome, turn)
        if getattr(outcome, "blocked", False):
            return HookAnswer(True, getattr(outcome, "reason", None) or "blocked by a UserPromptSubmit hook")
        if getattr(outcome, "halt", False):
            return HookAnswer(True, getattr(outcome, "halt_reason", None)
                              or "a UserPromptSubmit hook stopped the session")
        return HookAnswer(contexts=_contexts(outcome))

    async def pre_tool(self, turn: int, name: str, arguments: Mapping[str, Any], call_id: str) -> HookAnswer:
        """``blocked`` refuses the call (a hook denied it or stopped the session); otherwise ``verdict`` is the
        hooks' explicit ``"allow"`` (run without asking) or ``"ask"`` (ask the user, with ``reason``)."""
        outcome = await self.runner.pre_tool_use(self._context(turn), name, dict(arguments), call_id)
        self._notices(outcome, turn)
        if getattr(outcome, "deny", False) or getattr(outcome, "halt", False):
            reason = getattr(outcome, "reason", None) or getattr(outcome, "halt_reason", None) or (
                "denied by a PreToolUse hook")
            return HookAnswer(True, reason)
        permission = getattr(outcome, "permission", None)
        if getattr(outcome, "ask", False):
            permission = "ask"
        verdict: HookVerdict | None = permission if permission in ("allow", "ask") else None
        reason = getattr(outcome, "reason", None) if verdict is not None else None
        return HookAnswer(reason=reason, contexts=_contexts(outcome), verdict=verdict)

    async def post_tool(self, turn: int, name: str, arguments: Mapping[str, Any], call_id: str,
                        output: str) -> HookAnswer:
        outcome = await self.runner.post_tool_use(self._context(turn), name, dict(arguments), call_id, output)
        self._notices(outcome, turn)
        contexts = _contexts(outcome)
        if getattr(outcome, "blocked", False) and getattr(outcome, "reason", None):
            feedback = f"PostToolUse hook feedback on {name}: {outcome.reason}"
            contexts.insert(0, {"content": [text_block(feedback)], "source": dict(HOOK_FEEDBACK_SOURCE)})
        return HookAnswer(contexts=contexts)

    async def stop(self, turn: int, last_text: str, active: bool) -> HookAnswer:
        """``blocked`` means the agent should go on, with ``reason`` as its next instruction."""
        outcome = await self.runner.stop(self._context(turn), last_text, stop_hook_active=active)
        self._notices(outcome, turn)
        if getattr(outcome, "blocked", False) and not active:
            return HookAnswer(True, getattr(outcome, "reason", None) or "a Stop hook asked the agent to continue")
        return HookAnswer()
