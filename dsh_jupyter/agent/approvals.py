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
session). Every decision is a :class:`ApprovalDecision`; the loop records it with the tool result, so a
reopened log says what was allowed and by whom.

The core never knows how the question is shown: hosts implement :class:`Approver`.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

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
        """The command word a bash grant "for commands starting with" would cover (``None`` for other tools)."""
        if self.tool != "bash":
            return None
        try:
            words = shlex.split(self.shown)
        except ValueError:
            return None
        return words[0] if words else None


@dataclass(frozen=True)
class ApprovalDecision:
    """The answer: ``allowed``, its ``scope``, who or what answered, and a reason the model receives."""

    allowed: bool
    answered_by: AnsweredBy
    scope: Scope = "once"
    reason: str | None = None
    prefix: str | None = None

    def to_json(self, request: ApprovalRequest, mode: ApprovalMode) -> dict[str, Any]:
        record: dict[str, Any] = {"tool": request.tool, "asked": request.shown, "allowed": self.allowed,
                                  "scope": self.scope, "answeredBy": self.answered_by, "mode": mode}
        if self.reason:
            record["reason"] = self.reason
        if self.prefix:
            record["prefix"] = self.prefix
        return record

    def refusal(self, request: ApprovalRequest) -> str:
        """The tool result the model sees for a refused call."""
        if self.answered_by == "person":
            why = f"the user denied it: {self.reason}" if self.reason else "the user denied it"
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

    def _granted(self, request: ApprovalRequest) -> bool:
        if request.tool in self.granted_tools:
            return True
        prefix = request.prefix
        return prefix is not None and (request.tool, prefix) in self.granted_prefixes

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
        if hook is None and (self.mode == "auto" or self._granted(request)):
            scope: Scope = "session" if self.mode != "auto" else "once"
            return ApprovalDecision(True, "setting", scope=scope,
                                    reason="approval is auto" if self.mode == "auto" else "allowed for this session")
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


#: Where :func:`describe_call` finds a notebook cell's current source (hosts register one; see
#: :func:`register_cell_source`), so a replacement is shown as a diff.
_CELL_SOURCES: list[Callable[[str], str | None]] = []


def register_cell_source(lookup: Callable[[str], str | None]) -> Callable[[], None]:
    """Let approval questions show a cell's current source (``lookup(cell_id)``); returns the disposer."""
    _CELL_SOURCES.append(lookup)

    def dispose() -> None:
        if lookup in _CELL_SOURCES:
            _CELL_SOURCES.remove(lookup)

    return dispose


def _cell_source(cell_id: Any) -> str | None:
    if not isinstance(cell_id, str):
        return None
    for lookup in list(_CELL_SOURCES):
        try:
            found = lookup(cell_id)
        except Exception:  # a question is still asked without the diff
            continue
        if found is not None:
            return found
    return None


def _describe_notebook_call(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    cell_id = arguments.get("cell_id")
    source = arguments.get("source")
    if tool == "notebook_run" and isinstance(cell_id, str):
        current = _cell_source(cell_id)
        return (f"# run cell {cell_id}\n{current}" if current is not None else f"# run cell {cell_id}"), "python"
    if tool != "notebook_edit":
        return None
    action = arguments.get("action")
    kind = arguments.get("cell_type") if isinstance(arguments.get("cell_type"), str) else "code"
    language = "python" if kind == "code" else "markdown" if kind == "markdown" else "text"
    if action == "insert" and isinstance(source, str):
        where = f"{arguments.get('position') or 'after'} cell {cell_id}" if isinstance(cell_id, str) else "at the end"
        return f"# insert a new {kind} cell {where}\n{source}", language
    if action == "replace" and isinstance(cell_id, str) and isinstance(source, str):
        current = _cell_source(cell_id)
        if current is None:
            return f"# replace the source of cell {cell_id} with\n{source}", language
        import difflib

        diff = difflib.unified_diff(current.splitlines(keepends=True), source.splitlines(keepends=True),
                                    f"cell {cell_id} (now)", f"cell {cell_id} (proposed)")
        text = "".join(line if line.endswith("\n") else line + "\n" for line in diff).rstrip("\n")
        return text or f"# replace cell {cell_id} with the same source (no change)", "diff"
    if action == "delete" and isinstance(cell_id, str):
        current = _cell_source(cell_id)
        return f"# delete cell {cell_id}" + (f"\n{current}" if current is not None else ""), language
    return None


def describe_call(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
    """What a person is shown for a call (the exact command or code) and its language for highlighting."""
    if tool == "bash" and isinstance(arguments.get("command"), str):
        return arguments["command"], "bash"
    if tool == "python" and isinstance(arguments.get("code"), str):
        return arguments["code"], "python"
    notebook = _describe_notebook_call(tool, arguments)
    if notebook is not None:
        return notebook
    import json

    return json.dumps(dict(arguments), indent=2, ensure_ascii=False), "json"
