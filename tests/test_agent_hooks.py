"""Claude Code and Codex command hooks driving the real agent loop (real hook scripts, both dialects)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import ScriptedModel, call, say

from dsh_jupyter.agent import Agent
from dsh_jupyter.session.messages import message_text
from dsh_jupyter.store import JsonlStore, SqliteStore
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry
from dsh_jupyter.tools.hooks import ClaudeCodeHooks, CodexHooks, HookRunner

SCRIPTS = Path(__file__).parent / "hook_scripts"
PY = sys.executable


class ShellLike(Tool):
    name = "bash"
    description = "Pretend shell."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"command": {"type": "string"}},
                                            "required": ["command"]}

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        self.ran.append(arguments["command"])
        return ToolOutput("ran " + arguments["command"])


def settings(event: str, command: str, matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


@pytest.mark.parametrize("dialect", [ClaudeCodeHooks, CodexHooks])
async def test_prompt_hook_blocks_and_nothing_is_written(tmp_path: Path, dialect: type) -> None:
    hooks = HookRunner([dialect(settings("UserPromptSubmit", f"{PY} {SCRIPTS / 'prompt_filter.py'}"))])
    model = ScriptedModel(say("never"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), hooks=hooks)
    result = await agent.send("my password is hunter2")
    assert result.reason == "blocked" and "password" in (result.error or "")
    assert not [e for e in agent.session.events if e.type == "user/message"] and model.requests == []


@pytest.mark.parametrize(("dialect", "plugin"), [(ClaudeCodeHooks, "hooks-claude-code"), (CodexHooks, "hooks-codex")])
async def test_prompt_hook_adds_context_with_its_source(tmp_path: Path, dialect: type, plugin: str) -> None:
    hooks = HookRunner([dialect(settings("UserPromptSubmit", f"{PY} {SCRIPTS / 'prompt_filter.py'}"))])
    model = ScriptedModel(say("ok"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), hooks=hooks)
    await agent.send("twelve chars")
    messages = [e.data for e in agent.session.events if e.type == "user/message"]
    assert messages[0]["source"] == {"kind": "user"}
    assert messages[1]["source"] == {"kind": "plugin", "plugin": plugin}
    assert messages[1]["content"][0]["text"] == "prompt length 12"
    assert message_text(model.requests[0].messages[-1]) == "prompt length 12"


async def test_shell_hook_exit_2_blocks_with_stderr(tmp_path: Path) -> None:
    script = tmp_path / "deny.sh"
    script.write_text("#!/bin/sh\ncat > /dev/null\necho 'no prompts today' >&2\nexit 2\n")
    hooks = HookRunner([ClaudeCodeHooks(settings("UserPromptSubmit", f"sh {script}"))])
    agent = Agent.create(JsonlStore(tmp_path / "s"), ScriptedModel(), cwd=str(tmp_path), hooks=hooks)
    result = await agent.send("anything")
    assert result.reason == "blocked" and "no prompts today" in (result.error or "")


@pytest.mark.parametrize("dialect", [ClaudeCodeHooks, CodexHooks])
async def test_pre_tool_hook_denies_the_call(tmp_path: Path, dialect: type) -> None:
    hooks = HookRunner([dialect(settings("PreToolUse", f"{PY} {SCRIPTS / 'guard_commands.py'}", "bash"))])
    tools = ToolRegistry()
    shell = ShellLike()
    tools.register(shell)
    model = ScriptedModel(call("bash", json.dumps({"command": "rm -rf /data"}), "c1"), say("understood"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), hooks=hooks, tools=tools)
    result = await agent.send("clean up")
    assert result.reason == "completed" and shell.ran == []
    tool_result = next(e for e in agent.session.events if e.type == "tool/result")
    block = tool_result.data["message"]["content"][0]
    assert block["isError"] is True and "destructive" in block["content"][0]["text"]


async def test_hook_payload_carries_session_and_transcript(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    hooks = HookRunner([
        ClaudeCodeHooks(settings("UserPromptSubmit", f"{PY} {SCRIPTS / 'record.py'} {out / 'claude'}")),
        CodexHooks(settings("UserPromptSubmit", f"{PY} {SCRIPTS / 'record.py'} {out / 'codex'}")),
    ])
    agent = Agent.create(JsonlStore(tmp_path / "s"), ScriptedModel(say("ok")), cwd=str(tmp_path), hooks=hooks)
    await agent.send("hello hooks")
    claude = json.loads((out / "claude" / "stdin.bin").read_bytes())
    codex = json.loads((out / "codex" / "stdin.bin").read_bytes())
    assert claude["session_id"] == codex["session_id"] == agent.id
    assert claude["transcript_path"] == codex["transcript_path"] == agent.locate().path
    assert claude["prompt"] == codex["prompt"] == "hello hooks"
    assert codex["turn_id"] == "1" and codex["model"] == "scripted-1"


async def test_sqlite_sessions_give_hooks_no_transcript(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    hooks = HookRunner([
        ClaudeCodeHooks(settings("UserPromptSubmit", f"{PY} {SCRIPTS / 'record.py'} {out / 'claude'}")),
        CodexHooks(settings("UserPromptSubmit", f"{PY} {SCRIPTS / 'record.py'} {out / 'codex'}")),
    ])
    store = SqliteStore(tmp_path / "s.sqlite")
    agent = Agent.create(store, ScriptedModel(say("ok")), cwd=str(tmp_path), hooks=hooks)
    await agent.send("hello")
    assert json.loads((out / "claude" / "stdin.bin").read_bytes())["transcript_path"] == ""
    assert json.loads((out / "codex" / "stdin.bin").read_bytes())["transcript_path"] is None


async def test_stop_hook_keeps_the_turn_going_once(tmp_path: Path) -> None:
    hooks = HookRunner([ClaudeCodeHooks(settings("Stop", f"{PY} {SCRIPTS / 'stop_gate.py'}"))])
    model = ScriptedModel(say("done early"), say("ran the tests, now done"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), hooks=hooks)
    result = await agent.send("fix the bug")
    assert result.reason == "completed" and result.text == "ran the tests, now done"
    feedback = [e.data for e in agent.session.events if e.type == "user/message"][-1]
    assert feedback["source"] == {"kind": "plugin", "plugin": "hooks"}
    assert feedback["content"][0]["text"] == "run the test suite before finishing"
    assert sum(e.type == "step/start" for e in agent.session.events) == 2


async def test_post_tool_hook_context_reaches_the_next_step(tmp_path: Path) -> None:
    script = tmp_path / "note.sh"
    script.write_text("#!/bin/sh\ncat > /dev/null\n"
                      "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", "
                      "\"additionalContext\": \"remember to lint\"}}'\n")
    hooks = HookRunner([ClaudeCodeHooks({"hooks": {"PostToolUse": [{"matcher": "bash", "hooks": [
        {"type": "command", "command": f"sh {script}"}]}]}})])
    tools = ToolRegistry()
    tools.register(ShellLike())
    model = ScriptedModel(call("bash", json.dumps({"command": "ls"}), "c1"), say("ok"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), hooks=hooks, tools=tools)
    await agent.send("list files")
    last_turn_request = [r for r in model.requests if r.purpose == "turn"][-1]
    texts = [message_text(m) for m in last_turn_request.messages if m["role"] == "user"]
    assert texts[-1] == "remember to lint"
    note = [e.data for e in agent.session.events if e.type == "user/message"][-1]
    assert note["source"] == {"kind": "plugin", "plugin": "hooks-claude-code"}
