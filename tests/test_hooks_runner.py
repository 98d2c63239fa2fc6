"""Decisions the agent loop gets from real hook scripts, for both dialects."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from process_helpers import gone

from dsh_jupyter.session import SessionHeader
from dsh_jupyter.tools.hooks import (
    CLAUDE_CODE_HOOKS_SOURCE,
    CODEX_HOOKS_SOURCE,
    ClaudeCodeHooks,
    CodexHooks,
    HookBridge,
    HookContext,
    HookRunner,
    prompt_text,
)

SCRIPTS = Path(__file__).resolve().parent / "hook_scripts"
PY = shlex.quote(sys.executable)
DIALECTS = [pytest.param(ClaudeCodeHooks, id="claude-code"), pytest.param(CodexHooks, id="codex")]
SOURCES = {ClaudeCodeHooks: CLAUDE_CODE_HOOKS_SOURCE, CodexHooks: CODEX_HOOKS_SOURCE}


@pytest.fixture(autouse=True)
def _executable_scripts() -> None:
    for script in SCRIPTS.iterdir():
        script.chmod(0o755)


def script(name: str, *args: str) -> str:
    """A command line running a test hook script directly (shebang), as users configure them."""
    return " ".join([shlex.quote(str(SCRIPTS / name)), *map(shlex.quote, args)])


def python_script(name: str, *args: str) -> str:
    return " ".join([PY, shlex.quote(str(SCRIPTS / name)), *map(shlex.quote, args)])


def config(event: str, *commands: str, matcher: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    hooks = [{"type": "command", "command": c, **({"timeout": timeout} if timeout else {})} for c in commands]
    group: dict[str, Any] = {"hooks": hooks}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


@pytest.fixture
def ctx(tmp_path: Path) -> HookContext:
    return HookContext.create(str(tmp_path), header=SessionHeader.new(tmp_path), model="m", turn_id=1)


# -- UserPromptSubmit ------------------------------------------------------------------------------
@pytest.mark.parametrize("bridge", DIALECTS)
async def test_exit_2_blocks_prompt_with_stderr_reason(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("UserPromptSubmit", script("block_dangerous.sh")))])
    blocked = await runner.user_prompt_submit(ctx, "do something danger-ous")
    assert blocked.blocked and blocked.reason == "policy: the word danger is not allowed here"
    allowed = await runner.user_prompt_submit(ctx, "do something nice")
    assert not allowed.blocked and allowed.reason is None and allowed.warnings == []


@pytest.mark.parametrize("bridge", DIALECTS)
async def test_json_block_and_json_context(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("UserPromptSubmit", script("prompt_filter.py")))])
    blocked = await runner.user_prompt_submit(ctx, "my Password is hunter2")
    assert blocked.blocked and blocked.reason == "prompt looks like it contains a password"
    allowed = await runner.user_prompt_submit(ctx, "hello")
    assert not allowed.blocked and allowed.additional_context == ["prompt length 5"]
    assert allowed.contexts() == [("prompt length 5", dict(SOURCES[bridge]))]


@pytest.mark.parametrize("bridge", DIALECTS)
async def test_plain_stdout_is_context_for_prompt_and_session_start(bridge: type[HookBridge],
                                                                    ctx: HookContext) -> None:
    runner = HookRunner([bridge({"hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": script("plain_context.sh")}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": script("plain_context.sh")}]}],
        "PreToolUse": [{"hooks": [{"type": "command", "command": script("plain_context.sh")}]}],
    }})])
    note = "Team notes: tests live in tests/, run them with pytest."
    assert (await runner.user_prompt_submit(ctx, "x")).additional_context == [note]
    start = await runner.session_start(ctx, "startup")
    assert start.additional_context == [note] and start.context_sources == [dict(SOURCES[bridge])]
    # Plain stdout of other events is not context.
    assert (await runner.pre_tool_use(ctx, "bash", {"command": "ls"}, "c")).additional_context == []


def test_prompt_text_concatenates_text_blocks_without_separator() -> None:
    assert prompt_text([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]) == "ab"
    assert prompt_text("as is") == "as is"


# -- PreToolUse ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bridge", DIALECTS)
async def test_pre_tool_use_permission_decisions(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("PreToolUse", script("guard_commands.py"), matcher="bash"))])
    deny = await runner.pre_tool_use(ctx, "bash", {"command": "rm -rf /"}, "c1")
    assert deny.deny and deny.permission == "deny" and "destructive" in (deny.reason or "")
    ask = await runner.pre_tool_use(ctx, "bash", {"command": "git push origin main"}, "c2")
    assert not ask.deny and ask.ask and ask.permission == "ask" and ask.reason == "pushing needs a human"
    allow = await runner.pre_tool_use(ctx, "bash", {"command": "ls -la"}, "c3")
    assert not allow.deny and allow.permission == "allow" and allow.reason == "listing is harmless"
    silent = await runner.pre_tool_use(ctx, "bash", {"command": "echo hi"}, "c4")
    assert not silent.deny and silent.permission is None and silent.reason is None


@pytest.mark.parametrize("bridge", DIALECTS)
async def test_pre_tool_use_exit_2_denies(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("PreToolUse", script("block_dangerous.sh")))])
    decision = await runner.pre_tool_use(ctx, "bash", {"command": "echo danger"}, "c1")
    assert decision.deny and decision.reason == "policy: the word danger is not allowed here"


async def test_claude_code_matchers_select_hooks(ctx: HookContext, tmp_path: Path) -> None:
    deny_all = script("block_dangerous.sh")
    exact = HookRunner([ClaudeCodeHooks(config("PreToolUse", deny_all, matcher="bash|Bash"))])
    assert (await exact.pre_tool_use(ctx, "bash", {"command": "danger"}, "c")).deny
    assert not (await exact.pre_tool_use(ctx, "bash_output", {"command": "danger"}, "c")).deny
    regex = HookRunner([ClaudeCodeHooks(config("PreToolUse", deny_all, matcher="^bash.*"))])
    assert (await regex.pre_tool_use(ctx, "bash_output", {"command": "danger"}, "c")).deny
    everything = HookRunner([ClaudeCodeHooks(config("PreToolUse", deny_all, matcher="*"))])
    assert (await everything.pre_tool_use(ctx, "python", {"command": "danger"}, "c")).deny


async def test_codex_matchers_are_unanchored(ctx: HookContext) -> None:
    runner = HookRunner([CodexHooks(config("PreToolUse", script("block_dangerous.sh"), matcher="bash"))])
    assert (await runner.pre_tool_use(ctx, "bash_output", {"command": "danger"}, "c")).deny
    assert not (await runner.pre_tool_use(ctx, "python", {"command": "danger"}, "c")).deny


async def test_most_restrictive_answer_wins_across_hooks_and_bridges(ctx: HookContext, tmp_path: Path) -> None:
    allow_then_ask = ClaudeCodeHooks(config("PreToolUse", script("guard_commands.py")))
    ask_via_codex = CodexHooks(config("PreToolUse", script("guard_commands.py")))
    denier = CodexHooks(config("PreToolUse", script("block_dangerous.sh")))
    runner = HookRunner([allow_then_ask, ask_via_codex])
    decision = await runner.pre_tool_use(ctx, "bash", {"command": "git push"}, "c")
    assert decision.permission == "ask" and decision.reason == "pushing needs a human\npushing needs a human"
    runner.add(denier)
    decision = await runner.pre_tool_use(ctx, "bash", {"command": "ls danger"}, "c")
    assert decision.deny and decision.reason == "policy: the word danger is not allowed here"


async def test_hooks_run_serially_in_order(ctx: HookContext, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    first = f"sleep 0.2; echo first >> {shlex.quote(str(log))}"
    second = f"echo second >> {shlex.quote(str(log))}"
    await HookRunner([ClaudeCodeHooks(config("Stop", first, second))]).stop(ctx)
    assert log.read_text() == "first\nsecond\n"


async def test_identical_commands_run_once(ctx: HookContext, tmp_path: Path) -> None:
    log = tmp_path / "count.log"
    command = f"echo ran >> {shlex.quote(str(log))}"
    doubled = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]},
                                  {"hooks": [{"type": "command", "command": command}]}]}}
    await HookRunner([ClaudeCodeHooks(doubled)]).stop(ctx)
    assert log.read_text() == "ran\n"


# -- PostToolUse and Stop --------------------------------------------------------------------------
@pytest.mark.parametrize("bridge", DIALECTS)
async def test_post_tool_use_exit_2_is_feedback(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("PostToolUse", script("lint_feedback.sh")))])
    decision = await runner.post_tool_use(ctx, "bash", {"command": "x"}, "c", [{"type": "text", "text": "ok"}])
    assert decision.blocked and decision.reason == "lint: 3 warnings in the file you just wrote"


@pytest.mark.parametrize("bridge", DIALECTS)
async def test_stop_hook_can_keep_the_turn_going(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("Stop", python_script("stop_gate.py")))])
    first = await runner.stop(ctx, "done")
    assert first.blocked and first.reason == "run the test suite before finishing"
    second = await runner.stop(ctx, "done again", stop_hook_active=True)
    assert not second.blocked and second.reason is None


@pytest.mark.parametrize("bridge", DIALECTS)
async def test_continue_false_halts(bridge: type[HookBridge], ctx: HookContext) -> None:
    halting = bridge({"hooks": {event: [{"hooks": [{"type": "command", "command": script("halt.sh")}]}]
                                for event in ["UserPromptSubmit", "PreToolUse", "Stop", "PostToolUse"]}})
    runner = HookRunner([halting])
    prompt = await runner.user_prompt_submit(ctx, "x")
    assert prompt.blocked and prompt.reason == "maintenance window: the agent is paused"
    assert prompt.system_messages == ["paused by hook"]
    tool = await runner.pre_tool_use(ctx, "bash", {"command": "ls"}, "c")
    assert tool.deny and tool.halt and tool.reason == "maintenance window: the agent is paused"
    post = await runner.post_tool_use(ctx, "bash", {"command": "ls"}, "c", "out")
    assert post.halt and post.halt_reason == "maintenance window: the agent is paused"
    stop = await runner.stop(ctx)
    assert stop.halt and not stop.blocked


# -- failures are warnings -------------------------------------------------------------------------
@pytest.mark.parametrize("bridge", DIALECTS)
async def test_non_blocking_error_becomes_a_warning(bridge: type[HookBridge], ctx: HookContext) -> None:
    runner = HookRunner([bridge(config("UserPromptSubmit", script("fail.sh"), script("plain_context.sh")))])
    decision = await runner.user_prompt_submit(ctx, "hello")
    assert not decision.blocked
    assert len(decision.warnings) == 1 and "exit status 1" in decision.warnings[0]
    assert "hook script crashed: missing config" in decision.warnings[0]
    assert decision.additional_context  # the next hook still ran


@pytest.mark.parametrize("bridge", DIALECTS)
async def test_timeout_kills_the_hook_and_warns(bridge: type[HookBridge], ctx: HookContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "slow.pid"
    runner = HookRunner([bridge(config("PreToolUse", script("slow.sh", str(pidfile)), timeout=0.5))])
    decision = await runner.pre_tool_use(ctx, "bash", {"command": "ls"}, "c")
    assert not decision.deny and "timed out after 0.5 s" in decision.warnings[0]
    assert await gone(int(pidfile.read_text())), "the timed-out hook is still running"


async def test_default_timeout_is_configurable(ctx: HookContext, tmp_path: Path) -> None:
    runner = HookRunner([CodexHooks(config("Stop", script("slow.sh", str(tmp_path / "p"))), default_timeout=0.3)])
    decision = await runner.stop(ctx)
    assert "timed out after 0.3 s" in decision.warnings[0]


async def test_missing_script_is_a_warning(ctx: HookContext, tmp_path: Path) -> None:
    runner = HookRunner([ClaudeCodeHooks(config("Stop", str(tmp_path / "nope.sh")))])
    decision = await runner.stop(ctx)
    assert not decision.blocked and "exit status 127" in decision.warnings[0]


async def test_nonsense_json_fields_are_warnings(ctx: HookContext) -> None:
    odd = ("echo '{\"decision\": \"maybe\", \"systemMessage\": 3, "
           "\"hookSpecificOutput\": {\"permissionDecision\": \"perhaps\"}}'")
    decision = await HookRunner([ClaudeCodeHooks(config("PreToolUse", odd))]).pre_tool_use(ctx, "bash", {}, "c")
    assert not decision.deny and len(decision.warnings) == 3


async def test_config_warnings_are_reported_once_at_session_start(ctx: HookContext) -> None:
    bridge = ClaudeCodeHooks({"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "true"}]}]}})
    runner = HookRunner([bridge])
    first = await runner.session_start(ctx)
    assert any("Notification" in w for w in first.warnings)
    assert (await runner.session_start(ctx, "resume")).warnings == []


async def test_empty_runner_allows_everything(ctx: HookContext) -> None:
    runner = HookRunner()
    assert not runner
    assert not (await runner.user_prompt_submit(ctx, "x")).blocked
    assert not (await runner.pre_tool_use(ctx, "bash", {}, "c")).deny
    dispose = runner.add(CodexHooks(config("Stop", "true")))
    assert runner
    dispose()
    assert not runner.bridges
