"""Reading a hook's answer (exit status, JSON, plain text), merging answers, and running one hook."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from process_helpers import gone, written_pid

from dsh_jupyter.tools.hooks.protocol import HookRun, Verdict, interpret, merge, run_command_hook

SCRIPTS = Path(__file__).resolve().parent / "hook_scripts"
SOURCE = {"kind": "plugin", "plugin": "hooks-test"}


@pytest.fixture(autouse=True)
def _executable_scripts() -> None:
    for script in SCRIPTS.iterdir():
        script.chmod(0o755)


def _run(code: int | None = 0, stdout: str = "", stderr: str = "", **kw: Any) -> HookRun:
    return HookRun("my-hook", code, stdout, stderr, 600.0, **kw)


def _read(event: str, run: HookRun) -> Verdict:
    return interpret(event, run, label="Test", source=SOURCE)


@pytest.mark.parametrize("event, field", [("PreToolUse", "permission"), ("UserPromptSubmit", "blocked"),
                                          ("PostToolUse", "blocked"), ("Stop", "blocked")])
def test_exit_2_blocks_with_stderr(event: str, field: str) -> None:
    verdict = _read(event, _run(2, stdout='{"decision": "approve"}', stderr="  no way  \n"))
    if field == "permission":
        assert verdict.permission == "deny" and verdict.permission_reasons == ["no way"]
    else:
        assert verdict.blocked and verdict.reasons == ["no way"]
    assert verdict.contexts == []  # JSON is only read on exit 0


def test_exit_2_without_stderr_still_has_a_reason() -> None:
    verdict = _read("UserPromptSubmit", _run(2))
    assert verdict.blocked and "my-hook" in verdict.reasons[0]


def test_exit_2_on_session_start_is_only_a_warning() -> None:
    verdict = _read("SessionStart", _run(2, stderr="nope"))
    assert not verdict.blocked and verdict.warnings and "nope" in verdict.warnings[0]


@pytest.mark.parametrize("code", [1, 3, 127, -9])
def test_other_exit_codes_are_warnings(code: int) -> None:
    verdict = _read("PreToolUse", _run(code, stderr="x" * 2000))
    assert verdict.permission is None and len(verdict.warnings) == 1
    assert f"exit status {code}" in verdict.warnings[0] and len(verdict.warnings[0]) < 800


def test_errors_and_timeouts_are_warnings() -> None:
    assert "could not start" in _read("Stop", _run(None, error="could not start: boom")).warnings[0]
    assert "timed out" in _read("Stop", _run(None, timed_out=True)).warnings[0]


def test_plain_stdout_is_context_only_for_prompt_and_session_start() -> None:
    assert _read("UserPromptSubmit", _run(0, "  hi  \n")).contexts == [("hi", SOURCE)]
    assert _read("SessionStart", _run(0, "hi")).contexts == [("hi", SOURCE)]
    for event in ("PreToolUse", "PostToolUse", "Stop"):
        assert _read(event, _run(0, "hi")).contexts == []
    assert _read("UserPromptSubmit", _run(0, "   ")).contexts == []


def test_malformed_json_is_plain_text() -> None:
    assert _read("UserPromptSubmit", _run(0, "{not json")).contexts == [("{not json", SOURCE)]
    assert _read("UserPromptSubmit", _run(0, "[1, 2]")).contexts == [("[1, 2]", SOURCE)]


def test_json_fields() -> None:
    answer = {"continue": False, "stopReason": "halt", "systemMessage": "note", "decision": "block",
              "reason": "why", "hookSpecificOutput": {"additionalContext": "ctx"}}
    verdict = _read("UserPromptSubmit", _run(0, json.dumps(answer)))
    assert verdict.halt and verdict.halt_reasons == ["halt"] and verdict.system_messages == ["note"]
    assert verdict.blocked and verdict.reasons == ["why"] and verdict.contexts == [("ctx", SOURCE)]


def test_legacy_decisions_on_pre_tool_use() -> None:
    assert _read("PreToolUse", _run(0, '{"decision": "block", "reason": "r"}')).permission == "deny"
    approve = _read("PreToolUse", _run(0, '{"decision": "approve", "reason": "fine"}'))
    assert approve.permission == "allow" and approve.permission_reasons == ["fine"]


def test_block_decision_is_ignored_where_it_means_nothing() -> None:
    verdict = _read("SessionStart", _run(0, '{"decision": "block", "reason": "r"}'))
    assert not verdict.blocked and verdict.permission is None


def test_stricter_permission_in_one_answer_wins() -> None:
    answer = {"decision": "approve", "hookSpecificOutput": {"permissionDecision": "deny",
                                                            "permissionDecisionReason": "no"}}
    verdict = _read("PreToolUse", _run(0, json.dumps(answer)))
    assert verdict.permission == "deny" and verdict.permission_reasons == ["no"]


def test_merge_orders_deny_over_ask_over_allow() -> None:
    allow = Verdict(permission="allow", permission_reasons=["a"])
    ask = Verdict(permission="ask", permission_reasons=["b"])
    deny = Verdict(permission="deny", permission_reasons=["c"], warnings=["w"])
    other_deny = Verdict(permission="deny", permission_reasons=["d"])
    assert merge([allow, ask]).permission_reasons == ["b"]
    merged = merge([deny, allow, ask, other_deny])
    assert merged.permission == "deny" and merged.permission_reasons == ["c", "d"] and merged.warnings == ["w"]
    assert merge([]).permission is None
    blocked = merge([Verdict(blocked=True, reasons=["x"]), Verdict(contexts=[("t", SOURCE)])])
    assert blocked.blocked and blocked.contexts == [("t", SOURCE)]


# -- running ---------------------------------------------------------------------------------------
async def test_run_passes_stdin_and_collects_streams(tmp_path: Path) -> None:
    run = await run_command_hook("cat; echo err >&2; exit 3", b'{"a":1}', cwd=str(tmp_path),
                                 env=dict(os.environ), timeout=10)
    assert run.exit_code == 3 and run.stdout == '{"a":1}' and run.stderr == "err\n" and not run.timed_out


async def test_hook_that_ignores_a_large_stdin_does_not_hang(tmp_path: Path) -> None:
    payload = b"x" * 1_000_000
    run = await run_command_hook(shlex.quote(str(SCRIPTS / "no_stdin_read.sh")), payload, cwd=str(tmp_path),
                                 env=dict(os.environ), timeout=20)
    assert run.exit_code == 0 and run.stdout == "ignored input\n" and not run.timed_out


async def test_timeout_marks_the_run(tmp_path: Path) -> None:
    run = await run_command_hook("sleep 30", b"", cwd=str(tmp_path), env=dict(os.environ), timeout=0.3)
    assert run.timed_out and run.timeout == 0.3


async def test_missing_shell_is_an_error_run(tmp_path: Path) -> None:
    run = await run_command_hook("true", b"", cwd=str(tmp_path), env={}, timeout=1, shell=str(tmp_path / "nosh"))
    assert run.error and "could not start" in run.error


async def test_cancellation_kills_the_hook(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = asyncio.ensure_future(run_command_hook(f"{shlex.quote(str(SCRIPTS / 'slow.sh'))} {pidfile}", b"",
                                                  cwd=str(tmp_path), env=dict(os.environ), timeout=60))
    await written_pid(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(int(pidfile.read_text())), "cancelled hook still running"

