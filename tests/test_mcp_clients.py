"""A kernel's MCP servers without a kernel: lazy starts, the tool list kept in step with the configuration,
calls, Stop, failures in one line, and every process ended by ``close``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import http_notes_server, stdio_entry

from dsh_jupyter.mcp_client import connection
from dsh_jupyter.mcp_client.clients import McpClients, McpSettings
from dsh_jupyter.mcp_client.tools import exposed_name
from dsh_jupyter.notebook.runtime import AgentThread
from dsh_jupyter.tools.base import TOOL_NAME_PATTERN, ToolExecution, ToolOutput, ToolRegistry

TOKEN = "unit-token-5521"


@pytest.fixture(scope="module")
def http_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with http_notes_server(tmp_path_factory.mktemp("mcp-http-unit"), TOKEN) as port:
        yield port


@pytest.fixture
def agent_loop() -> Iterator[AgentThread]:
    thread = AgentThread("test-agent")
    yield thread
    thread.stop()


def clients(tmp_path: Path, servers: dict[str, Any], **options: Any) -> McpClients:
    settings = McpSettings(servers=servers, cwd=str(tmp_path), **{"connect_timeout": 20.0, **options})
    return McpClients(AgentThread("test-mcp"), settings)


def call(loop: AgentThread, registry: ToolRegistry, name: str, arguments: dict[str, Any],
         cancel_after: float | None = None) -> tuple[ToolOutput, float]:
    async def run() -> tuple[ToolOutput, float]:
        execution = ToolExecution.create("call-1", ".")
        if cancel_after is not None:
            asyncio.get_running_loop().call_later(cancel_after, execution.cancel.set)
        started = time.monotonic()
        output = await registry.execute(name, arguments, execution)
        return output, time.monotonic() - started

    return loop.run(run(), timeout=60)


def test_names_fit_model_apis() -> None:
    assert exposed_name("notes", "read_note") == "mcp__notes__read_note"
    assert exposed_name("gh", "repos.list/all") == "mcp__gh__repos_list_all"
    long_a, long_b = exposed_name("server", "t" * 80 + "a"), exposed_name("server", "t" * 80 + "b")
    assert long_a != long_b and all(len(n) <= 64 and TOOL_NAME_PATTERN.match(n) for n in (long_a, long_b))


def test_nothing_starts_before_the_first_prompt_and_close_ends_the_process(tmp_path: Path,
                                                                         agent_loop: AgentThread) -> None:
    pid_file = tmp_path / "pid"
    mcp = clients(tmp_path, {"notes": stdio_entry(NOTES_PID_FILE=str(pid_file))})
    assert [s.state for s in mcp.status()] == ["not started"] and not pid_file.exists()
    registry = ToolRegistry()
    assert agent_loop.run(mcp.prepare(registry), timeout=60) == []
    assert {n: registry.effect(n) for n in registry.names()} == {
        "mcp__notes__read_note": "read", "mcp__notes__write_note": "act", "mcp__notes__plot": "read",
        "mcp__notes__big": "read", "mcp__notes__crash": "read", "mcp__notes__hang": "read",
        "mcp__notes__secret": "read"}
    pid = int(pid_file.read_text())
    (tmp_path / "note-x.txt").write_text("in the notebook's folder")
    output, _ = call(agent_loop, registry, "mcp__notes__read_note", {"name": "x"})
    assert output.text == "in the notebook's folder"  # the server runs in the notebook's folder
    mcp.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as ended
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_stop_cancels_a_call_and_the_server_keeps_serving(tmp_path: Path, agent_loop: AgentThread) -> None:
    mcp = clients(tmp_path, {"notes": stdio_entry()}, call_timeout=30.0)
    registry = ToolRegistry()
    try:
        agent_loop.run(mcp.prepare(registry), timeout=60)
        output, took = call(agent_loop, registry, "mcp__notes__hang", {}, cancel_after=0.3)
        assert output.is_error and output.meta["cancelled"] is True and took < 3
        assert "the turn was cancelled" in output.text
        output, _ = call(agent_loop, registry, "mcp__notes__big", {"n": 5})
        assert output.text == "xxxxx"
    finally:
        mcp.close()


def test_a_changed_configuration_applies_at_the_next_prompt(tmp_path: Path, agent_loop: AgentThread) -> None:
    mcp = clients(tmp_path, {"notes": stdio_entry()})
    registry = ToolRegistry()
    try:
        agent_loop.run(mcp.prepare(registry), timeout=60)
        assert "mcp__notes__plot" in registry
        mcp.configure(McpSettings(servers={"notes": {**stdio_entry(), "disabled": True},
                                           "other": {"command": "no-such-mcp-program"}}, cwd=str(tmp_path)))
        lines = agent_loop.run(mcp.prepare(registry), timeout=60)
        assert registry.names() == []  # the disabled server's tools left with it
        assert lines == ["MCP server 'other' (no-such-mcp-program) failed: its command 'no-such-mcp-program' was "
                         "not found; install it or fix \"command\" in DshMagics.mcp_servers"]
        assert agent_loop.run(mcp.prepare(registry), timeout=60) == []  # said once; retried only later
        states = {s.name: (s.state, s.error) for s in mcp.status()}
        assert states["notes"] == ("disabled", "\"disabled\": true in DshMagics.mcp_servers")
        assert states["other"][0] == "failed"
    finally:
        mcp.close()


def test_an_admin_allowlist_blocks_other_commands(tmp_path: Path, agent_loop: AgentThread) -> None:
    mcp = clients(tmp_path, {"notes": stdio_entry()}, allowlist=("uvx",))
    registry = ToolRegistry()
    try:
        assert agent_loop.run(mcp.prepare(registry), timeout=60) == [] and registry.names() == []
        (status,) = mcp.status()
        assert status.state == "blocked" and "not in DshMagics.mcp_stdio_command_allowlist" in (status.error or "")
    finally:
        mcp.close()


def test_http_with_and_without_its_token(tmp_path: Path, agent_loop: AgentThread, http_port: int) -> None:
    url = f"http://127.0.0.1:{http_port}/mcp"
    mcp = clients(tmp_path, {"good": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}},
                             "nokey": {"type": "http", "url": url}})
    registry = ToolRegistry()
    try:
        lines = agent_loop.run(mcp.prepare(registry), timeout=60)
        # Said in full when it fails: once under load, a second line came (unseen: the unpacking hid it).
        assert lines == [f"MCP server 'nokey' ({url}) failed: {url} answered HTTP 401 (check \"headers\", such as "
                         "the token)"], lines
        assert "mcp__good__read_note" in registry and not any(n.startswith("mcp__nokey") for n in registry.names())
        output, _ = call(agent_loop, registry, "mcp__good__big", {"n": 3})
        assert output.text == "xxx" and output.meta["mcp"] == {"server": "good", "tool": "big"}
    finally:
        mcp.close()


def test_a_server_that_exits_at_start_is_one_line_with_what_it_said(tmp_path: Path, agent_loop: AgentThread) -> None:
    mcp = clients(tmp_path, {"bad": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no db')"]}})
    try:
        (line,) = agent_loop.run(mcp.prepare(ToolRegistry()), timeout=60)
        assert line.startswith("MCP server 'bad' (") and "\n" not in line
        assert line.endswith(" failed: it exited before it answered; it said: no db")
    finally:
        mcp.close()


def test_a_server_that_answers_garbage_is_named_with_what_it_sent(tmp_path: Path, agent_loop: AgentThread) -> None:
    junk = "import time; print('hello, not json', flush=True); time.sleep(60)"
    mcp = clients(tmp_path, {"junk": {"command": sys.executable, "args": ["-c", junk]}}, connect_timeout=3.0)
    try:
        started = time.monotonic()
        (line,) = agent_loop.run(mcp.prepare(ToolRegistry()), timeout=60)
        assert "did not start within 3 s (DshMagics.mcp_connect_timeout)" in line
        assert line.endswith("; it sent something that is not MCP: 'hello, not json'")
        assert time.monotonic() - started < 20
    finally:
        mcp.close()


def test_the_table_groups_acting_tools_first_and_names_problems() -> None:
    from dsh_jupyter.mcp_client.clients import ServerStatus
    from dsh_jupyter.notebook.mcp_table import mcp_table

    ready = ServerStatus("notes", "stdio", "notes-mcp", "~/.dsh/mcp.json", "ready", None,
                         (("mcp__notes__read", "read"), ("mcp__notes__write", "act")))
    failed = ServerStatus("web", "http", "http://h/mcp", ".mcp.json", "failed", "http://h/mcp answered HTTP 401", ())
    text = repr(mcp_table([ready, failed], ["bad entry"], ["~/.dsh/mcp.json (user)"]))
    assert "acts (asks first): mcp__notes__write; reads: mcp__notes__read" in text
    assert "failed: http://h/mcp answered HTTP 401" in text and "(listed once it starts)" in text
    assert "Problem: bad entry" in text and "Read from (later wins): ~/.dsh/mcp.json (user)." in text
    assert repr(mcp_table([], [], ["x"])).startswith("No MCP servers are configured.")


def test_a_server_that_went_away_while_idle_starts_again_at_its_next_use(
        tmp_path: Path, agent_loop: AgentThread, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "IDLE_CHECK_SECONDS", 0.0)  # every call checks first
    pid_file = tmp_path / "pid"
    mcp = clients(tmp_path, {"notes": stdio_entry(NOTES_PID_FILE=str(pid_file))})
    registry = ToolRegistry()
    try:
        agent_loop.run(mcp.prepare(registry), timeout=60)
        first = int(pid_file.read_text())
        os.kill(first, 9)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(first):
            time.sleep(0.05)
        output, _ = call(agent_loop, registry, "mcp__notes__big", {"n": 2})
        assert output.text == "xx" and int(pid_file.read_text()) != first
    finally:
        mcp.close()


def test_stop_cancels_a_start_that_hangs(tmp_path: Path, agent_loop: AgentThread) -> None:
    hang = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    mcp = clients(tmp_path, {"hangs": hang}, connect_timeout=30.0)
    stop_at = time.monotonic() + 8.0  # the SDK's first import may take seconds on a busy machine
    try:
        started = time.monotonic()
        lines = agent_loop.run(mcp.prepare(ToolRegistry(), stopped=lambda: time.monotonic() > stop_at), timeout=60)
        assert lines == [] and time.monotonic() - started < 15
        time.sleep(0.5)
        (status,) = mcp.status()
        assert (status.state, status.error) == ("failed", "its start was stopped")
        assert mcp.connections["hangs"].due()  # tried again at the next prompt
    finally:
        mcp.close()


def test_a_project_file_starts_nothing_until_trusted_and_asks_again_when_it_changes(
        tmp_path: Path, agent_loop: AgentThread) -> None:
    project, record = tmp_path / ".mcp.json", tmp_path / "home" / "mcp-trusted.json"
    project.write_text(json.dumps({"mcpServers": {"notes": stdio_entry()}}))
    mcp = clients(tmp_path, {}, project_file=project, trust_file=record)
    registry = ToolRegistry()
    try:
        lines = agent_loop.run(mcp.prepare(registry), timeout=60)
        assert registry.names() == []  # a cloned folder's file runs nothing by itself
        assert any(str(project) in line and "`%dsh mcp --trust`" in line for line in lines), lines
        (status,) = mcp.status()
        assert status.state == "untrusted" and "%dsh mcp --trust" in (status.error or "")

        said = mcp.trust_project()
        assert said[0].startswith(f"Trusted {project} as it is now") and "notes:" in said[1]
        agent_loop.run(mcp.prepare(registry), timeout=60)
        assert "mcp__notes__read_note" in registry.names()

        # One byte more (a new server, an edited command) and the file is a stranger again.
        project.write_text(json.dumps({"mcpServers": {"notes": stdio_entry(), "more": {"command": "more-mcp"}}}))
        agent_loop.run(mcp.prepare(registry), timeout=60)
        assert registry.names() == [] and {s.state for s in mcp.status()} == {"untrusted"}
    finally:
        mcp.close()


def test_trusting_without_a_project_file_says_there_is_nothing_to_trust(tmp_path: Path) -> None:
    mcp = clients(tmp_path, {}, project_file=tmp_path / ".mcp.json", trust_file=tmp_path / "trusted.json")
    assert mcp.trust_project() == [f"there is no readable project MCP file at {tmp_path / '.mcp.json'}: "
                                   "nothing to trust"]
    (tmp_path / ".mcp.json").write_text("{\"mcpServers\": {}}")
    assert mcp.trust_project()[0].endswith("defines no usable MCP server: nothing to trust")
    assert not (tmp_path / "trusted.json").exists()
    assert clients(tmp_path, {}).trust_project()[0].startswith("no project MCP file is read")
