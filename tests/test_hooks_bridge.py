"""What each bridge sends a hook: payload fields, stdin bytes, environment, working directory."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.session import SessionHeader
from dsh_jupyter.store.base import SessionLocation
from dsh_jupyter.tools.hooks import (
    CLAUDE_CODE_HOOKS_SOURCE,
    CODEX_HOOKS_SOURCE,
    ClaudeCodeHooks,
    CodexHooks,
    HookContext,
    HookRunner,
)

SCRIPTS = Path(__file__).resolve().parent / "hook_scripts"
PY = shlex.quote(sys.executable)


@pytest.fixture(autouse=True)
def _executable_scripts() -> None:
    for script in SCRIPTS.iterdir():
        script.chmod(0o755)


def _record(out: Path) -> str:
    return f"{PY} {shlex.quote(str(SCRIPTS / 'record.py'))} {shlex.quote(str(out))}"


def _all_events(command: str) -> dict[str, Any]:
    group = [{"matcher": "", "hooks": [{"type": "command", "command": command}]}]
    return {"hooks": {event: group for event in
                      ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]}}


def _stdin(out: Path) -> bytes:
    return (out / "stdin.bin").read_bytes()


def _payloads(out: Path) -> list[dict[str, Any]]:
    files = sorted(out.glob("stdin*.bin"), key=lambda p: (len(p.name), p.name))
    return [json.loads(p.read_bytes()) for p in files]


@pytest.fixture
def header(tmp_path: Path) -> SessionHeader:
    return SessionHeader.new(tmp_path, session_id="sess-123")


async def _fire_everything(runner: HookRunner, ctx: HookContext) -> None:
    await runner.session_start(ctx, "startup")
    await runner.user_prompt_submit(ctx, [{"type": "text", "text": "look at "},
                                          {"type": "image", "data": "..."},
                                          {"type": "text", "text": "@[notes](dsh-session:abc)"}])
    await runner.pre_tool_use(ctx, "bash", {"command": "ls -la", "timeout": 5}, "call-1")
    await runner.post_tool_use(ctx, "bash", {"command": "ls -la"}, "call-1", "total 0\n[exit code: 0]")
    await runner.stop(ctx, "All done.")


async def test_claude_code_payloads(tmp_path: Path, header: SessionHeader) -> None:
    out = tmp_path / "rec"
    transcript = tmp_path / "sessions" / "sess-123.jsonl"
    ctx = HookContext.create(str(tmp_path), header=header, locate=lambda: SessionLocation("jsonl", str(transcript)),
                             model="deepseek-chat", turn_id=2)
    await _fire_everything(HookRunner([ClaudeCodeHooks(_all_events(_record(out)))]), ctx)
    base = {"session_id": "sess-123", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    start, prompt, pre, post, stop = _payloads(out)
    assert start == {**base, "hook_event_name": "SessionStart", "source": "startup"}
    assert prompt == {**base, "hook_event_name": "UserPromptSubmit", "prompt": "look at @[notes](dsh-session:abc)"}
    assert pre == {**base, "hook_event_name": "PreToolUse", "tool_name": "bash",
                   "tool_input": {"command": "ls -la", "timeout": 5}, "tool_use_id": "call-1"}
    assert post == {**base, "hook_event_name": "PostToolUse", "tool_name": "bash",
                    "tool_input": {"command": "ls -la"}, "tool_use_id": "call-1",
                    "tool_response": "total 0\n[exit code: 0]"}
    assert stop == {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                    "last_assistant_message": "All done."}
    assert list(start)[:4] == ["session_id", "transcript_path", "cwd", "hook_event_name"]
    assert _stdin(out).endswith(b"}\n")
    assert not transcript.exists()  # the lookup created nothing


async def test_codex_payloads(tmp_path: Path, header: SessionHeader) -> None:
    out = tmp_path / "rec"
    transcript = tmp_path / "sessions" / "sess-123.jsonl"
    ctx = HookContext.create(str(tmp_path), header=header, locate=lambda: SessionLocation("jsonl", str(transcript)),
                             model="deepseek-chat", turn_id=2)
    await _fire_everything(HookRunner([CodexHooks(_all_events(_record(out)))]), ctx)
    base = {"session_id": "sess-123", "transcript_path": str(transcript), "cwd": str(tmp_path),
            "model": "deepseek-chat", "permission_mode": "default"}
    start, prompt, pre, post, stop = _payloads(out)
    assert start == {**base, "hook_event_name": "SessionStart", "source": "startup"}
    assert "turn_id" not in start
    assert prompt == {**base, "hook_event_name": "UserPromptSubmit", "turn_id": "2",
                      "prompt": "look at @[notes](dsh-session:abc)"}
    assert pre == {**base, "hook_event_name": "PreToolUse", "turn_id": "2", "tool_name": "bash",
                   "tool_use_id": "call-1", "tool_input": {"command": "ls -la"}}
    assert post == {**base, "hook_event_name": "PostToolUse", "turn_id": "2", "tool_name": "bash",
                    "tool_use_id": "call-1", "tool_input": {"command": "ls -la"},
                    "tool_response": "total 0\n[exit code: 0]"}
    assert stop == {**base, "hook_event_name": "Stop", "turn_id": "2", "stop_hook_active": False,
                    "last_assistant_message": "All done."}
    assert _stdin(out).endswith(b"}") and not _stdin(out).endswith(b"\n")


async def test_codex_tool_input_without_command(tmp_path: Path, header: SessionHeader) -> None:
    out = tmp_path / "rec"
    ctx = HookContext.create(str(tmp_path), header=header)
    await HookRunner([CodexHooks(_all_events(_record(out)))]).pre_tool_use(ctx, "python", {"code": "1+1"}, "c9")
    assert _payloads(out)[0]["tool_input"] == {"command": ""}


async def test_codex_stop_without_message_is_null(tmp_path: Path, header: SessionHeader) -> None:
    out = tmp_path / "rec"
    ctx = HookContext.create(str(tmp_path), header=header)
    await HookRunner([CodexHooks(_all_events(_record(out)))]).stop(ctx)
    payload = _payloads(out)[0]
    assert payload["last_assistant_message"] is None and payload["stop_hook_active"] is False
    assert payload["turn_id"] is None and payload["model"] == ""


@pytest.mark.parametrize("bridge_type, missing", [(ClaudeCodeHooks, ""), (CodexHooks, None)])
@pytest.mark.parametrize("case", ["no-agent", "no-location", "no-persistence"])
async def test_transcript_path_when_unavailable(tmp_path: Path, header: SessionHeader, bridge_type: Any,
                                                missing: Any, case: str) -> None:
    out = tmp_path / "rec"
    asked: list[bool] = []

    def locate() -> SessionLocation | None:
        asked.append(True)
        return None if case == "no-location" else SessionLocation("jsonl", "/should/not/be/used.jsonl")

    if case == "no-agent":
        ctx = HookContext.create(str(tmp_path), locate=locate)
    elif case == "no-location":
        ctx = HookContext.create(str(tmp_path), header=header, locate=locate)
    else:
        ctx = HookContext.create(str(tmp_path), header=header)
    await HookRunner([bridge_type(_all_events(_record(out)))]).session_start(ctx, "resume")
    payload = _payloads(out)[0]
    assert payload["transcript_path"] == missing
    if case == "no-agent":
        assert payload["session_id"] == "" and not asked


async def test_locate_is_not_called_when_no_hook_matches(tmp_path: Path, header: SessionHeader) -> None:
    asked: list[bool] = []
    config = {"hooks": {"PreToolUse": [{"matcher": "python", "hooks": [{"type": "command", "command": "true"}]}]}}
    def locate() -> SessionLocation:
        asked.append(True)
        return SessionLocation("jsonl", "/x.jsonl")

    ctx = HookContext.create(str(tmp_path), header=header, locate=locate)
    decision = await HookRunner([ClaudeCodeHooks(config)]).pre_tool_use(ctx, "bash", {}, "c")
    assert not decision.deny and not asked


async def test_hooks_run_in_the_session_cwd_with_a_scrubbed_env(tmp_path: Path, header: SessionHeader,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-a-hook")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-secret")
    monkeypatch.setenv("DSH_SESSION_ID", "stale")
    monkeypatch.setenv("ORDINARY_SETTING", "kept")
    workdir = tmp_path / "work"
    workdir.mkdir()
    for bridge_type in (ClaudeCodeHooks, CodexHooks):
        out = tmp_path / bridge_type.__name__
        ctx = HookContext.create(str(workdir), header=header)
        await HookRunner([bridge_type(_all_events(_record(out)))]).user_prompt_submit(ctx, "hello")
        env = json.loads((out / "env.json").read_text())
        assert (out / "cwd.txt").read_text() == str(workdir)
        assert "OPENAI_API_KEY" not in env and "DEEPSEEK_API_KEY" not in env and "DSH_SESSION_ID" not in env
        assert env["ORDINARY_SETTING"] == "kept" and env["NO_COLOR"] == "1"
        raw = _stdin(out) + (out / "env.json").read_bytes()
        assert b"sk-never-in-a-hook" not in raw and b"sk-deepseek-secret" not in raw
        if bridge_type is ClaudeCodeHooks:
            assert env["CLAUDE_PROJECT_DIR"] == str(workdir)
        else:
            assert "CLAUDE_PROJECT_DIR" not in env


async def test_claude_code_placeholders(tmp_path: Path, header: SessionHeader) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    (plugin / "hooks" / "record.py").write_bytes((SCRIPTS / "record.py").read_bytes())
    project = tmp_path / "project"
    project.mkdir()
    out = tmp_path / "rec"
    command = (f'{PY} "${{CLAUDE_PLUGIN_ROOT}}/hooks/record.py" {shlex.quote(str(out))} '
               f'"${{CLAUDE_PROJECT_DIR}}|$CLAUDE_PLUGIN_ROOT"')
    bridge = ClaudeCodeHooks(_all_events(command), plugin_root=plugin, project_dir=project)
    ctx = HookContext.create(str(tmp_path), header=header)
    decision = await HookRunner([bridge]).session_start(ctx)
    assert decision.additional_context == [f"{project}|{plugin}"]
    env = json.loads((out / "env.json").read_text())
    assert env["CLAUDE_PROJECT_DIR"] == str(project) and env["CLAUDE_PLUGIN_ROOT"] == str(plugin)


async def test_missing_cwd_is_a_warning_not_a_crash(tmp_path: Path, header: SessionHeader) -> None:
    ctx = HookContext.create(str(tmp_path / "gone"), header=header)
    decision = await HookRunner([CodexHooks(_all_events("true"))]).user_prompt_submit(ctx, "hi")
    assert not decision.blocked and "does not exist" in decision.warnings[0]


def test_sources_are_exported() -> None:
    assert CLAUDE_CODE_HOOKS_SOURCE == {"kind": "plugin", "plugin": "hooks-claude-code"}
    assert CODEX_HOOKS_SOURCE == {"kind": "plugin", "plugin": "hooks-codex"}


def test_bridge_rejects_bad_default_timeout() -> None:
    with pytest.raises(ValueError, match="positive"):
        CodexHooks({}, default_timeout=0)


def test_context_helpers(tmp_path: Path) -> None:
    ctx = HookContext.create("", turn_id=7)
    assert ctx.turn_id == "7" and ctx.session_id == "" and ctx.working_directory
    assert ctx.transcript_location() is None
