"""The bash tool: managed environment, foreground/background runs, timeouts, cancellation, bounded output."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from process_helpers import gone, written_pid

from dsh_jupyter.session import SessionHeader
from dsh_jupyter.store.base import SessionLocation
from dsh_jupyter.tools.base import ToolExecution, ToolRegistry
from dsh_jupyter.tools.bash import BashOutputTool, BashTool
from dsh_jupyter.tools.env import ShellEnvContributor, ShellEnvRegistry

PRINT_ENV = (
    'for v in DSH_HOME DSH_SHELL DSH_SESSION_ID DSH_SESSION_JSONL DSH_STALE_PARENT OPENAI_API_KEY; do '
    'if [ -n "${!v+x}" ]; then echo "$v=${!v}"; else echo "$v unset"; fi; done'
)


def _env_lines(text: str) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for line in text.splitlines():
        if line.endswith(" unset"):
            values[line[:-6]] = None
        elif "=" in line and line.startswith(("DSH_", "OPENAI")):
            key, value = line.split("=", 1)
            values[key] = value
    return values


@pytest.fixture
def registry(tmp_path: Path) -> ShellEnvRegistry:
    return ShellEnvRegistry(tmp_path / "dsh-home")


@pytest.fixture
async def bash(registry: ShellEnvRegistry) -> AsyncIterator[BashTool]:
    tool = BashTool(registry, default_timeout=20.0, max_output_bytes=2000)
    yield tool
    await tool.jobs.stop_all()


@pytest.fixture(autouse=True)
def _stale_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_ID", "stale-parent-session")
    monkeypatch.setenv("DSH_SESSION_JSONL", "/stale/parent.jsonl")
    monkeypatch.setenv("DSH_STALE_PARENT", "leaked")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-leak")


def _execution(tmp_path: Path, *, header: SessionHeader | None = None, location: SessionLocation | None = None,
               call_id: str = "call-1", session_dir: Path | None = None, **kw: Any) -> ToolExecution:
    return ToolExecution.create(call_id, str(tmp_path), header=header, locate=lambda: location,
                                session_dir=session_dir, **kw)


# -- description and schema ------------------------------------------------------------------------
def test_description_teaches_only_the_dsh_convention(bash: BashTool) -> None:
    assert "$DSH_*" in bash.description
    assert "DSH_SESSION_JSONL" not in bash.description
    assert "DSH_SESSION_JSONL" not in str(bash.parameters)
    assert set(bash.parameters["properties"]) == {"command", "timeout", "run_in_background"}
    assert "env" not in bash.parameters["properties"] and "stdin" not in bash.parameters["properties"]


def test_constructor_checks_its_limits(registry: ShellEnvRegistry) -> None:
    with pytest.raises(ValueError):
        BashTool(registry, default_timeout=0)
    with pytest.raises(ValueError):
        BashTool(registry, default_timeout=700, max_timeout=600)
    with pytest.raises(ValueError):
        BashTool(registry, max_output_bytes=10)


# -- foreground ------------------------------------------------------------------------------------
async def test_foreground_output_and_exit_code(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "echo hello; echo oops >&2; pwd"}, _execution(tmp_path))
    assert out.text == f"hello\noops\n{tmp_path}\n[exit code: 0]"
    assert not out.is_error and out.meta["exit_code"] == 0


async def test_nonzero_exit_is_reported(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "echo partial; exit 3"}, _execution(tmp_path))
    assert out.text.endswith("[exit code: 3]") and out.is_error and out.meta["exit_code"] == 3


async def test_no_output(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "true"}, _execution(tmp_path))
    assert out.text == "(no output)\n[exit code: 0]"


async def test_managed_env_with_agent_and_jsonl(bash: BashTool, tmp_path: Path) -> None:
    header = SessionHeader.new(tmp_path)
    target = str(tmp_path / "sessions" / f"{header.id}.jsonl")
    out = await bash.run({"command": PRINT_ENV},
                         _execution(tmp_path, header=header, location=SessionLocation("jsonl", target)))
    values = _env_lines(out.text)
    assert values["DSH_HOME"] == str(tmp_path / "dsh-home")
    assert values["DSH_SHELL"] == "1"
    assert values["DSH_SESSION_ID"] == header.id
    assert values["DSH_SESSION_JSONL"] == target
    assert values["DSH_STALE_PARENT"] is None
    assert values["OPENAI_API_KEY"] is None
    assert not Path(target).exists()


async def test_stale_parent_values_never_reach_a_child_without_agent(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": PRINT_ENV}, _execution(tmp_path))
    values = _env_lines(out.text)
    assert values["DSH_SESSION_ID"] is None and values["DSH_SESSION_JSONL"] is None
    assert values["DSH_STALE_PARENT"] is None and values["DSH_SHELL"] == "1"
    assert "stale-parent-session" not in out.text and "sk-should-never-leak" not in out.text


async def test_id_only_without_jsonl(bash: BashTool, tmp_path: Path) -> None:
    header = SessionHeader.new(tmp_path)
    out = await bash.run({"command": PRINT_ENV},
                         _execution(tmp_path, header=header, location=SessionLocation("sqlite", "/db")))
    values = _env_lines(out.text)
    assert values["DSH_SESSION_ID"] == header.id and values["DSH_SESSION_JSONL"] is None


async def test_model_supplied_env_and_stdin_are_ignored(bash: BashTool, tmp_path: Path) -> None:
    header = SessionHeader.new(tmp_path)
    out = await bash.run({"command": 'echo "id=$DSH_SESSION_ID extra=${EXTRA-unset}"; cat',
                          "env": {"DSH_SESSION_ID": "spoofed", "EXTRA": "x"}, "stdin": "injected input"},
                         _execution(tmp_path, header=header))
    assert out.text == f"id={header.id} extra=unset\n[exit code: 0]"


async def test_parent_and_child_executions_are_isolated(bash: BashTool, tmp_path: Path) -> None:
    parent = SessionHeader.new(tmp_path)
    child = SessionHeader.new(tmp_path, parent_session=parent.id)
    command = 'sleep 0.3; echo "$DSH_SESSION_ID"'
    one, two = await asyncio.gather(
        bash.run({"command": command}, _execution(tmp_path, header=parent, call_id="p")),
        bash.run({"command": command}, _execution(tmp_path, header=child, call_id="c")),
    )
    assert one.text.splitlines()[0] == parent.id
    assert two.text.splitlines()[0] == child.id


async def test_contributor_values_reach_the_shell(registry: ShellEnvRegistry, bash: BashTool, tmp_path: Path) -> None:
    registry.register(ShellEnvContributor("notebook", {"DSH_NOTEBOOK": "the notebook path"},
                                          lambda execution: {"DSH_NOTEBOOK": "/nb/x.ipynb"}))
    out = await bash.run({"command": "echo $DSH_NOTEBOOK"}, _execution(tmp_path))
    assert out.text.startswith("/nb/x.ipynb\n")


async def test_contributor_failure_is_an_error_output(registry: ShellEnvRegistry, bash: BashTool,
                                                      tmp_path: Path) -> None:
    def resolve(execution: ToolExecution) -> Mapping[str, Any]:
        return {"DSH_BAD": 42}

    registry.register(ShellEnvContributor("bad", {"DSH_BAD": "bad"}, resolve))
    out = await bash.run({"command": "echo never"}, _execution(tmp_path))
    assert out.is_error and "non-string" in out.text and "never" not in out.text


@pytest.mark.parametrize("arguments, fragment", [
    ({"command": ""}, "non-empty"),
    ({"command": 5}, "non-empty"),
    ({"command": "true", "timeout": 0}, "positive"),
    ({"command": "true", "timeout": -1}, "positive"),
    ({"command": "true", "timeout": "10"}, "positive"),
])
async def test_bad_arguments(bash: BashTool, tmp_path: Path, arguments: dict[str, Any], fragment: str) -> None:
    out = await bash.run(arguments, _execution(tmp_path))
    assert out.is_error and fragment in out.text


async def test_missing_working_directory(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "true"}, ToolExecution.create("c", str(tmp_path / "gone")))
    assert out.is_error and "does not exist" in out.text


async def test_missing_shell_is_reported(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    tool = BashTool(registry, shell=str(tmp_path / "no-such-shell"))
    out = await tool.run({"command": "true"}, _execution(tmp_path))
    assert out.is_error and "could not start" in out.text


# -- timeout and cancellation ----------------------------------------------------------------------
async def test_timeout_kills_the_process_group(bash: BashTool, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    out = await bash.run({"command": f"sleep 60 & echo $! > {pidfile}; echo started; wait", "timeout": 0.5},
                         _execution(tmp_path))
    assert out.is_error and out.meta["timed_out"]
    assert "started" in out.text and "timed out after 0.5 s" in out.text
    assert await gone(int(pidfile.read_text()))


async def test_timeout_is_capped(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    tool = BashTool(registry, default_timeout=0.2, max_timeout=0.4)
    out = await tool.run({"command": "sleep 30", "timeout": 1000}, _execution(tmp_path))
    assert out.meta["timed_out"] and "timed out after 0.4 s" in out.text


async def test_cancel_event_kills_the_process_group(bash: BashTool, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    execution = _execution(tmp_path)
    threading.Timer(0.3, execution.cancel.set).start()
    out = await bash.run({"command": f"sleep 60 & echo $! > {pidfile}; wait"}, execution)
    assert out.is_error and out.meta["cancelled"] and "cancelled" in out.text
    assert await gone(int(pidfile.read_text()))


async def test_already_cancelled_does_not_start(bash: BashTool, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    execution = _execution(tmp_path)
    execution.cancel.set()
    out = await bash.run({"command": f"touch {marker}"}, execution)
    assert out.is_error and not marker.exists()


async def test_task_cancellation_kills_the_process_group(bash: BashTool, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    task = asyncio.ensure_future(bash.run({"command": f"sleep 60 & echo $! > {pidfile}; wait"},
                                          _execution(tmp_path)))
    await written_pid(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(int(pidfile.read_text()))


async def test_leftover_background_process_does_not_hold_the_call(bash: BashTool, tmp_path: Path) -> None:
    started = time.monotonic()
    out = await bash.run({"command": "sleep 30 & echo $!"}, _execution(tmp_path))
    elapsed = time.monotonic() - started
    pid = int(out.text.splitlines()[0])
    try:
        assert elapsed < 15
        assert out.text.rstrip().endswith("[exit code: 0]")
        assert "still running" in out.text
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_signal_death_is_named(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "kill -TERM $$"}, _execution(tmp_path))
    assert "SIGTERM" in out.text and out.is_error


# -- bounded output --------------------------------------------------------------------------------
async def test_large_output_spills_into_the_session_folder(bash: BashTool, tmp_path: Path) -> None:
    session_dir = tmp_path / "session"
    out = await bash.run({"command": "seq 1 20000"}, _execution(tmp_path, session_dir=session_dir, call_id="call/9"))
    full = "".join(f"{i}\n" for i in range(1, 20001))
    spill = session_dir / "tool-output" / "call_9.txt"
    assert spill.read_text() == full
    assert out.meta["truncated"] and out.meta["output_path"] == str(spill)
    assert out.text.startswith("1\n2\n3\n") and "20000\n" in out.text
    assert str(spill) in out.text and out.text.endswith("[exit code: 0]")
    assert len(out.text.encode()) < 2000 + 400


async def test_large_output_without_session_folder(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "seq 1 20000"}, _execution(tmp_path))
    assert out.meta["truncated"] and "not saved" in out.text
    assert not (tmp_path / "tool-output").exists()


async def test_small_output_creates_no_file(bash: BashTool, tmp_path: Path) -> None:
    session_dir = tmp_path / "session"
    await bash.run({"command": "echo small"}, _execution(tmp_path, session_dir=session_dir))
    assert not (session_dir / "tool-output").exists()


# -- background ------------------------------------------------------------------------------------
async def test_background_run_returns_at_once_and_output_is_read_later(bash: BashTool, tmp_path: Path) -> None:
    header = SessionHeader.new(tmp_path)
    session_dir = tmp_path / "session"
    execution = _execution(tmp_path, header=header, session_dir=session_dir, call_id="bg-1")
    gate = tmp_path / "gate"
    command = f'echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo "id=$DSH_SESSION_ID"; exit 4'
    out = await bash.run({"command": command, "run_in_background": True,
                          "env": {"DSH_SESSION_ID": "spoofed"}}, execution)
    job_id = out.meta["job_id"]
    assert out.meta["background"] and job_id in out.text and "bash_output" in out.text
    reader = bash.companion()
    assert isinstance(reader, BashOutputTool)
    first = await reader.run({"job_id": job_id, "wait_seconds": 0.3}, execution)
    assert "running" in first.text and "first" in first.text and first.meta["running"]
    gate.touch()
    second = await reader.run({"job_id": job_id, "wait_seconds": 10}, execution)
    assert f"id={header.id}" in second.text and "spoofed" not in second.text
    assert "first" not in second.text  # only output produced since the previous read
    assert "exited with code 4" in second.text and second.meta["exit_code"] == 4
    assert (session_dir / "tool-output" / "bg-1.txt").read_text() == f"first\nid={header.id}\n"
    third = await reader.run({"job_id": job_id}, execution)
    assert "(no new output)" in third.text


async def test_background_jobs_are_private_to_their_session(bash: BashTool, tmp_path: Path) -> None:
    mine = _execution(tmp_path, header=SessionHeader.new(tmp_path))
    other = _execution(tmp_path, header=SessionHeader.new(tmp_path))
    out = await bash.run({"command": "sleep 30", "run_in_background": True}, mine)
    job_id = out.meta["job_id"]
    reader = bash.companion()
    denied = await reader.run({"job_id": job_id}, other)
    assert denied.is_error and "no background job" in denied.text
    stopped = await reader.run({"job_id": job_id, "stop": True}, mine)
    assert "stopped on request" in stopped.text and not stopped.meta["running"]


async def test_background_flag_on_execution(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "echo detached"}, _execution(tmp_path, background=True))
    assert out.meta.get("background")
    result = await bash.companion().run({"job_id": out.meta["job_id"], "wait_seconds": 10}, _execution(tmp_path))
    assert "detached" in result.text


async def test_background_wait_honours_cancel(bash: BashTool, tmp_path: Path) -> None:
    out = await bash.run({"command": "sleep 30", "run_in_background": True}, _execution(tmp_path))
    execution = _execution(tmp_path)
    threading.Timer(0.2, execution.cancel.set).start()
    started = time.monotonic()
    result = await bash.companion().run({"job_id": out.meta["job_id"], "wait_seconds": 60}, execution)
    assert time.monotonic() - started < 20 and result.meta["running"]


async def test_unknown_job_and_bad_wait(bash: BashTool, tmp_path: Path) -> None:
    reader = bash.companion()
    missing = await reader.run({"job_id": "job-99"}, _execution(tmp_path))
    assert missing.is_error and "job-99" in missing.text
    out = await bash.run({"command": "true", "run_in_background": True}, _execution(tmp_path))
    bad = await reader.run({"job_id": out.meta["job_id"], "wait_seconds": -1}, _execution(tmp_path))
    assert bad.is_error and "wait_seconds" in bad.text


async def test_stop_all_kills_running_jobs(bash: BashTool, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    await bash.run({"command": f"sleep 60 & echo $! > {pidfile}; wait", "run_in_background": True},
                   _execution(tmp_path))
    await written_pid(pidfile)
    await bash.jobs.stop_all()
    assert await gone(int(pidfile.read_text()))


# -- through the registry --------------------------------------------------------------------------
async def test_registered_bash_tools_run_via_the_registry(bash: BashTool, tmp_path: Path) -> None:
    tools = ToolRegistry()
    tools.register(bash)
    tools.register(bash.companion())
    assert [spec["name"] for spec in tools.specs()] == ["bash", "bash_output"]
    out = await tools.execute("bash", '{"command": "echo via registry"}', _execution(tmp_path))
    assert out.text == "via registry\n[exit code: 0]"
    bad = await tools.execute("bash", '{"cmd": "ls"}', _execution(tmp_path))
    assert bad.is_error and "command" in bad.text
    header = SessionHeader.new(tmp_path)
    spoofed = await tools.execute(
        "bash", '{"command": "echo $DSH_SESSION_ID", "env": {"DSH_SESSION_ID": "spoofed"}, "stdin": "x"}',
        _execution(tmp_path, header=header))
    assert spoofed.text == f"{header.id}\n[exit code: 0]"
