"""Approvals: whether a tool call may run, who said so, and what the model is told when it may not.

Every tool declares its effect (``"read"``: it only looks, such as job output or reading the notebook;
``"act"``: it can change the user's machine or notebook, such as bash, python and cell edits). The mode
decides what happens to acting calls:

- ``"ask"`` (the default): a person is asked through the host's :class:`Approver` (a widget in the turn's
  output, or a prompt on stdin in terminal IPython); with nobody to answer, or no answer in time, the call
  is refused promptly;
- ``"auto"``: acting calls run without asking;
- ``"read-only"``: acting calls are refused; reading calls still run.

A ``PreToolUse`` hook answers first: ``"deny"`` refuses, ``"allow"`` skips the question, ``"ask"`` asks
(even in ``auto`` mode). Grants "for this session" last as long as the policy (the host makes one per
session). A bash grant "for commands starting with ``git``" covers only one simple ``git`` command (see
:mod:`.grants`); anything else asks again, and the question says why it is not covered. Every decision
is a :class:`ApprovalDecision`; the loop records it with the tool result, so a reopened log says what was
allowed and by whom.

The core never knows how the question is shown: hosts implement :class:`Approver`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ..clip import one_line
from ..escape import hidden_warning
from .grants import command_shape

ApprovalMode = Literal["ask", "auto", "read-only"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("ask", "auto", "read-only")
Effect = Literal["read", "act"]
Scope = Literal["once", "session", "prefix"]
AnsweredBy = Literal["person", "setting", "hook", "timeout", "nobody"]
HookVerdict = Literal["allow", "ask"]

#: Default seconds a question waits for a person before the call is refused.
DEFAULT_APPROVAL_TIMEOUT = 120.0

#: What a refusal for lack of an answer tells the model and the user (names the setting to change).
NOBODY_TO_ASK = (
    "this call needs the user's approval and nobody could answer here (no interactive frontend, or no answer "
    "in time); to let the agent run tools without asking, set %config DshMagics.approval = \"auto\""
)


#: How much of a reason someone else wrote (a person's answer, a hook's message) a refusal quotes.
MAX_QUOTED_REASON = 200


def quoted_reason(reason: str) -> str:
    """A reason written by a person or a hook, on one line and at most :data:`MAX_QUOTED_REASON` characters."""
    return one_line(reason, MAX_QUOTED_REASON)


@dataclass(frozen=True)
class ApprovalRequest:
    """One question: the tool, the exact command or code it would run, and why it is asked."""

    tool: str
    call_id: str
    arguments: Mapping[str, Any]
    shown: str  # the exact command or code, as the person should read it
    language: str = "text"  # for highlighting: "bash", "python", "json" ...
    reason: str | None = None  # e.g. a hook's reason for asking

    @property
    def prefix(self) -> str | None:
        """The program a bash grant "for commands starting with" may name for this command.

        ``None`` for other tools, and for a command that is not one simple command (see :mod:`.grants`):
        then no such grant is offered.
        """
        if self.tool != "bash":
            return None
        return command_shape(self.shown).grantable

    @property
    def warning(self) -> str | None:
        """What the question must say about hidden characters in the command or code (``None``: none)."""
        return hidden_warning(self.shown, "command" if self.tool == "bash" else "code")


@dataclass(frozen=True)
class ApprovalDecision:
    """The answer: ``allowed``, its ``scope``, who or what answered, and a reason the model receives."""

    allowed: bool
    answered_by: AnsweredBy
    scope: Scope = "once"
    reason: str | None = None
    prefix: str | None = None
    #: Who answered, when the page says (a collaborator's name in a shared notebook).
    decided_by: str | None = None

    def to_json(self, request: ApprovalRequest, mode: ApprovalMode) -> dict[str, Any]:
        record: dict[str, Any] = {"tool": request.tool, "asked": request.shown, "allowed": self.allowed,
                                  "scope": self.scope, "answeredBy": self.answered_by, "mode": mode}
        if self.decided_by:
            record["decidedBy"] = self.decided_by
        if self.reason:
            record["reason"] = self.reason
        if self.prefix:
            record["prefix"] = self.prefix
        return record

    def refusal(self, request: ApprovalRequest) -> str:
        """The tool result the model sees for a refused call (what a person typed as the reason is the part
        shortened, never the remedy our own reasons end with)."""
        if self.answered_by == "person":
            why = f"the user denied it: {quoted_reason(self.reason)}" if self.reason else "the user denied it"
        else:
            why = self.reason or "it was refused"
        return f"The {request.tool} call was not run: {why}."


class Approver(Protocol):
    """The host's way of asking a person (returns ``None`` when nobody can answer here)."""

    async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None: ...


@dataclass
class ApprovalPolicy:
    """The mode, the host's approver and the grants made "for this session"."""

    mode: ApprovalMode = "ask"
    approver: Approver | None = None
    timeout: float = DEFAULT_APPROVAL_TIMEOUT
    granted_tools: set[str] = field(default_factory=set)
    granted_prefixes: set[tuple[str, str]] = field(default_factory=set)  # (tool, command word)

    def __post_init__(self) -> None:
        if self.mode not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)}, got {self.mode!r}")

    def _granted(self, request: ApprovalRequest) -> bool | str:
        """``True`` when a grant covers ``request``; a reason when a grant for its program does not cover it."""
        if request.tool in self.granted_tools:
            return True
        if request.tool != "bash" or not self.granted_prefixes:
            return False
        shape = command_shape(request.shown)
        if shape.program is None or (request.tool, shape.program) not in self.granted_prefixes:
            return False
        if shape.problem is None:
            return True
        return f"not covered by your grant for `{shape.program}`: {shape.problem}"

    def remember(self, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        if not decision.allowed:
            return
        if decision.scope == "session":
            self.granted_tools.add(request.tool)
        elif decision.scope == "prefix" and decision.prefix:
            self.granted_prefixes.add((request.tool, decision.prefix))

    async def decide(self, request: ApprovalRequest, effect: Effect, hook: HookVerdict | None = None
                     ) -> ApprovalDecision:
        """Whether ``request`` may run now (a hook's ``deny`` never reaches here: the loop refuses it first)."""
        if self.mode == "read-only" and effect == "act":
            return ApprovalDecision(False, "setting", reason=(
                "approval is set to read-only, so tools that can change files, variables or the notebook are "
                "refused; use a reading tool, or ask the user to change %config DshMagics.approval"))
        if hook == "allow":
            return ApprovalDecision(True, "hook", reason="allowed by a PreToolUse hook")
        if effect == "read" and hook is None:
            return ApprovalDecision(True, "setting", reason="reads only")
        granted = self._granted(request) if hook is None and self.mode != "auto" else False
        if hook is None and (self.mode == "auto" or granted is True):
            scope: Scope = "session" if self.mode != "auto" else "once"
            return ApprovalDecision(True, "setting", scope=scope,
                                    reason="approval is auto" if self.mode == "auto" else "allowed for this session")
        if isinstance(granted, str):  # the question says why the grant the person made does not apply
            request = replace(request, reason=f"{request.reason}; {granted}" if request.reason else granted)
        return await self._ask(request)

    async def _ask(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.approver is None:
            return ApprovalDecision(False, "nobody", reason=NOBODY_TO_ASK)
        try:
            decision = await asyncio.wait_for(self.approver.ask(request, self.timeout), self.timeout + 1)
        except TimeoutError:
            decision = ApprovalDecision(False, "timeout", reason=NOBODY_TO_ASK)
        if decision is None:
            return ApprovalDecision(False, "nobody", reason=NOBODY_TO_ASK)
        self.remember(request, decision)
        return decision


def describe_call(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
    """What a person is shown for a call (the exact command or code) and its language for highlighting."""
    if tool == "bash" and isinstance(arguments.get("command"), str):
        return arguments["command"], "bash"
    if tool == "python" and isinstance(arguments.get("code"), str):
        return arguments["code"], "python"
    return json.dumps(dict(arguments), indent=2, ensure_ascii=False), "json"
