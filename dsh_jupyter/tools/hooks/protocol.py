"""Running one command hook and reading what it answered (the protocol both dialects share).

A hook gets its payload as JSON on stdin. Exit status 2 blocks, with stderr as the reason; exit 0 may
print a JSON object (``continue``/``stopReason``, ``decision``/``reason``, ``systemMessage``,
``hookSpecificOutput.permissionDecision``/``permissionDecisionReason``/``additionalContext``); for
``UserPromptSubmit`` and ``SessionStart`` plain stdout on exit 0 is context for the model. Any other
exit status is a non-blocking error reported to the user as a warning.

The payload's fields every dialect sends are :class:`HookPayloadBase`; each event adds its own
(:class:`ToolFields`, :class:`StopFields`, ``prompt``, ``source``), so a whole payload is a ``dict``.
What a hook prints back stays ``Mapping[str, Any]``: it is whatever JSON a user's script wrote, read key
by key with a warning for each field of the wrong type.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from ...session.messages import PluginSource
from ..output import OutputCapture
from ..process import drain_after_exit, kill_group, pump, spawn

#: Most bytes kept of a hook's stdout or stderr.
HOOK_OUTPUT_LIMIT = 1_048_576
#: Characters of stderr quoted in a warning.
WARNING_EXCERPT = 600

_PERMISSION_RANK = {"deny": 3, "ask": 2, "allow": 1}


class HookPayloadBase(TypedDict):
    """The fields of every hook payload (``transcript_path``: ``""`` for Claude Code, ``None`` for Codex when
    the session has no log file)."""

    session_id: str
    transcript_path: str | None
    cwd: str
    hook_event_name: str


class ToolFields(TypedDict):
    """What ``PreToolUse`` and ``PostToolUse`` add: ``tool_input`` is the call's arguments (any JSON object;
    Codex gets only ``command``)."""

    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str


class StopFields(TypedDict):
    """What ``Stop`` adds (Claude Code leaves ``last_assistant_message`` out when there is none)."""

    stop_hook_active: bool
    last_assistant_message: NotRequired[str | None]


@dataclass(frozen=True)
class HookRun:
    """How one hook process ended."""

    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    timeout: float
    timed_out: bool = False
    error: str | None = None


@dataclass
class Verdict:
    """What one or more hooks decided for one event, before it is shaped into a decision object."""

    blocked: bool = False
    reasons: list[str] = field(default_factory=list)
    permission: str | None = None
    permission_reasons: list[str] = field(default_factory=list)
    contexts: list[tuple[str, PluginSource]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    system_messages: list[str] = field(default_factory=list)
    halt: bool = False
    halt_reasons: list[str] = field(default_factory=list)

    def block(self, event: str, reason: str) -> bool:
        """A hook's "block" for ``event``: a denied permission before a tool runs, a blocked prompt, tool result or
        stop. ``False`` (nothing recorded) for an event a hook cannot block."""
        if event == "PreToolUse":
            self.permission = "deny"
            self.permission_reasons.append(reason)
        elif event in ("UserPromptSubmit", "PostToolUse", "Stop"):
            self.blocked = True
            self.reasons.append(reason)
        else:
            return False
        return True


async def run_command_hook(command: str, stdin: bytes, *, cwd: str, env: Mapping[str, str],
                           timeout: float, shell: str = "bash") -> HookRun:
    """Run ``<shell> -c command`` in ``cwd`` with ``stdin``; stop its process group after ``timeout`` s."""
    try:
        child = await spawn([shell, "-c", command], cwd=cwd, env=env, pipe_stdin=True, merge_stderr=False)
    except OSError as exc:
        return HookRun(command, None, "", "", timeout, error=f"could not start: {exc}")
    out = OutputCapture(HOOK_OUTPUT_LIMIT)
    err = OutputCapture(HOOK_OUTPUT_LIMIT)
    readers = asyncio.gather(pump(child.stdout, out), pump(child.stderr, err))

    async def feed() -> None:
        pipe = child.stdin
        if pipe is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            pipe.write(stdin)
            await pipe.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            pipe.close()

    timed_out = False
    writer = asyncio.ensure_future(feed())
    try:
        try:
            await asyncio.wait_for(child.wait(), timeout)
        except TimeoutError:
            timed_out = True
            await kill_group(child)
        await drain_after_exit(child, readers)
    except asyncio.CancelledError:
        await kill_group(child)
        readers.cancel()
        child.close()
        raise
    finally:
        if not writer.done():
            writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, BrokenPipeError, ConnectionResetError):
            await writer
    return HookRun(command, child.returncode, out.finish().text, err.finish().text, timeout, timed_out)


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= WARNING_EXCERPT else text[:WARNING_EXCERPT] + "…"


def _parse_json_object(stdout: str) -> dict[str, Any] | None:
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def interpret(event: str, run: HookRun, *, label: str, source: PluginSource) -> Verdict:
    """Turn one hook's exit status and output into a :class:`Verdict` for ``event``.

    ``label`` names the dialect in warnings (``"Claude Code"``); ``source`` marks injected context.
    """
    verdict = Verdict()
    who = f"{label} {event} hook `{run.command}`"
    if run.error is not None:
        verdict.warnings.append(f"{who} {run.error}")
        return verdict
    if run.timed_out:
        verdict.warnings.append(f"{who} timed out after {run.timeout:g} s and was stopped")
        return verdict
    code = run.exit_code
    if code == 2:
        reason = run.stderr.strip() or f"blocked by {who} (exit status 2, no message)"
        if not verdict.block(event, reason):
            verdict.warnings.append(f"{who} exited with status 2: {_excerpt(run.stderr) or '(no message)'}")
        return verdict
    if code != 0:
        detail = _excerpt(run.stderr) or _excerpt(run.stdout) or "(no message)"
        verdict.warnings.append(f"{who} failed with exit status {code}: {detail}")
        return verdict
    answer = _parse_json_object(run.stdout)
    if answer is None:
        text = run.stdout.strip()
        if text and event in ("UserPromptSubmit", "SessionStart"):
            verdict.contexts.append((text, source.copy()))
        return verdict
    _apply_json(event, answer, verdict, who=who, source=source)
    return verdict


def _string_field(answer: Mapping[str, Any], key: str, verdict: Verdict, who: str) -> str | None:
    value = answer.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        verdict.warnings.append(f"{who} returned a non-string {key!r}; ignored")
        return None
    return value


def _apply_json(event: str, answer: Mapping[str, Any], verdict: Verdict, *, who: str,
                source: PluginSource) -> None:
    if answer.get("continue") is False:
        verdict.halt = True
        verdict.halt_reasons.append(_string_field(answer, "stopReason", verdict, who) or f"stopped by {who}")
    message = _string_field(answer, "systemMessage", verdict, who)
    if message:
        verdict.system_messages.append(message)
    decision = answer.get("decision")
    reason = _string_field(answer, "reason", verdict, who)
    if decision == "block":
        verdict.block(event, reason or f"blocked by {who}")
    elif decision == "approve" and event == "PreToolUse":
        verdict.permission = verdict.permission or "allow"
        if reason:
            verdict.permission_reasons.append(reason)
    elif decision is not None and decision not in ("approve", "allow"):
        verdict.warnings.append(f"{who} returned an unknown decision {decision!r}; ignored")
    specific = answer.get("hookSpecificOutput")
    if specific is None:
        return
    if not isinstance(specific, Mapping):
        verdict.warnings.append(f"{who} returned a hookSpecificOutput that is not an object; ignored")
        return
    if event == "PreToolUse" and "permissionDecision" in specific:
        permission = specific.get("permissionDecision")
        if permission in _PERMISSION_RANK:
            merged = _stricter(verdict.permission, permission)
            why = _string_field(specific, "permissionDecisionReason", verdict, who)
            if merged != verdict.permission:
                verdict.permission = merged
                verdict.permission_reasons = []
            if why and permission == merged:
                verdict.permission_reasons.append(why)
        else:
            verdict.warnings.append(
                f"{who} returned permissionDecision {permission!r}; expected 'allow', 'ask' or 'deny'"
            )
    context = _string_field(specific, "additionalContext", verdict, who)
    if context:
        verdict.contexts.append((context, source.copy()))


def _stricter(current: str | None, candidate: str | None) -> str | None:
    if candidate is None:
        return current
    if current is None:
        return candidate
    return candidate if _PERMISSION_RANK[candidate] > _PERMISSION_RANK[current] else current


def merge(verdicts: Sequence[Verdict]) -> Verdict:
    """Combine verdicts most-restrictive first: any halt or block wins; deny > ask > allow.

    Reasons are kept from every hook that chose the winning outcome, in the order the hooks ran.
    """
    merged = Verdict()
    for verdict in verdicts:
        merged.blocked = merged.blocked or verdict.blocked
        merged.reasons.extend(verdict.reasons)
        merged.halt = merged.halt or verdict.halt
        merged.halt_reasons.extend(verdict.halt_reasons)
        merged.contexts.extend(verdict.contexts)
        merged.warnings.extend(verdict.warnings)
        merged.system_messages.extend(verdict.system_messages)
        winner = _stricter(merged.permission, verdict.permission)
        if winner != merged.permission:
            merged.permission = winner
            merged.permission_reasons = list(verdict.permission_reasons)
        elif verdict.permission == winner and winner is not None:
            merged.permission_reasons.extend(verdict.permission_reasons)
    return merged
