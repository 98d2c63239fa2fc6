"""``dsh-jupyter mcp``: the MCP server over a folder's sessions, driven by the ``mcp`` SDK's own client.

The stdio test starts the real command once and checks what Claude Code or Codex would see: the tools and their
read-only annotations, a search over 1,000 sessions, a snapshot whose bytes equal the context an ``@``-mention of
the same session froze into a real agent turn, and the refusals. The other tests talk to the same server
in-process (the SDK's in-memory transport) for the error paths.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agent_helpers import ScriptedModel, say
from catalog_helpers import BASE, make_session
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from sources_helpers import PEERS

from dsh_jupyter.agent import Agent
from dsh_jupyter.agent.submit import submit
from dsh_jupyter.mcp_server import FolderError, served
from dsh_jupyter.mcp_server.tools import TOOL_NAMES, build_server
from dsh_jupyter.services import Services, ServiceSettings
from dsh_jupyter.session.messages import SESSION_REFERENCE_KIND
from dsh_jupyter.store import JsonlStore

REPO = Path(__file__).resolve().parent.parent


def sessions_of(root: Path) -> JsonlStore:
    return JsonlStore(root / ".dsh" / "sessions")


def fill(root: Path, count: int) -> None:
    """``count`` small sessions, every tenth in ``root/sub``, titled ``Analysis N`` (one says ``needle``)."""
    store = sessions_of(root)
    for i in range(count):
        cwd = root / "sub" if i % 10 == 0 else root
        title = f"Analysis {i}" + (" needle" if i == 421 else "")
        make_session(store, f"s-{i:04d}", cwd=str(cwd), created_at=BASE + i, title=title)


async def mention_snapshot(root: Path, session_id: str, mention: str) -> str:
    """Run a real agent turn in ``root`` whose prompt carries ``mention``; the context it froze, from its log."""
    services = Services(ServiceSettings(cwd=str(root)), index_in_background=False, shared_catalog=False)
    agent = Agent.create(services.store, ScriptedModel(say("noted"), context_window=None), cwd=str(root))
    try:
        await submit(agent, f"what did we find? {mention}", services.resolver)
    finally:
        services.close()
    log = sessions_of(root).log_path(agent.header.id)
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        data = record.get("data") or {}
        if record.get("type") == "user/message" and (data.get("source") or {}).get("kind") == SESSION_REFERENCE_KIND:
            text: str = data["content"][0]["text"]
            assert session_id in text
            return text
    raise AssertionError(f"no frozen reference context in {log}")


def text_of(result: Any) -> str:
    text: str = result.content[0].text
    return text


def stdio_params(root: Path, *extra: str) -> StdioServerParameters:
    env = {name: os.environ[name] for name in ("DSH_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    return StdioServerParameters(command=sys.executable, args=["-m", "dsh_jupyter.cli", "mcp", "--root", str(root),
                                                               *extra], env=env, cwd=str(root))


async def test_claude_code_over_stdio_lists_searches_reads_and_refuses(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    fill(root, 1000)
    outside = tmp_path / "elsewhere"
    make_session(sessions_of(outside), "s-outside", cwd=str(outside), title="Not yours")
    Services(ServiceSettings(cwd=str(outside)), index_in_background=False, shared_catalog=False).catalog  # noqa: B018 - the catalog knows the other store too
    async with Client(stdio_params(root), read_timeout_seconds=60) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == set(TOOL_NAMES)
        for tool in tools.values():
            assert tool.annotations is not None and tool.annotations.read_only_hint is True, tool.name
            assert tool.description
        assert tools["search_sessions"].input_schema["properties"]["limit"]["type"] == "integer"

        first = json.loads(text_of(await client.call_tool("search_sessions", {"query": "needle"})))  # indexes
        assert [s["sessionId"] for s in first["sessions"]] == ["s-0421"]
        assert first["folder"] == str(root.resolve())
        started = time.perf_counter()
        found = json.loads(text_of(await client.call_tool("search_sessions", {"query": "analysis 9", "limit": 5})))
        elapsed = time.perf_counter() - started
        assert [s["sessionId"] for s in found["sessions"]] == ["s-0999", "s-0998", "s-0997", "s-0996", "s-0995"]
        assert elapsed < 2.0  # the round trip on a busy test machine; benchmarks/bench_mcp.py holds the 100 ms goal
        everything = json.loads(text_of(await client.call_tool("search_sessions", {"limit": 200})))
        assert len(everything["sessions"]) == 200 and "s-outside" not in text_of(
            await client.call_tool("search_sessions", {"query": "yours"}))
        sub = json.loads(text_of(await client.call_tool("search_sessions", {"folder": "sub", "limit": 200})))
        assert len(sub["sessions"]) == 100 and all(s["cwd"] == str(root / "sub") for s in sub["sessions"])

        hit = first["sessions"][0]
        snapshot = text_of(await client.call_tool("read_session", {"session": "s-0421"}))
        frozen = await mention_snapshot(root, "s-0421", hit["mention"])
        assert snapshot.encode("utf-8") == frozen.encode("utf-8")
        assert "untrusted" in snapshot and "<referenced-sessions>" in snapshot

        located = json.loads(text_of(await client.call_tool("locate_session", {"session": "Analysis 421 needle"})))
        assert located["path"] == str(sessions_of(root).log_path("s-0421").resolve())

        refused = await client.call_tool("read_session", {"session": "s-outside"})
        assert refused.is_error and "not in the served folder" in text_of(refused)
        refused = await client.call_tool("search_sessions", {"folder": str(outside)})
        assert refused.is_error and f"{str(outside)!r} is outside the served folder" in text_of(refused)


@contextlib.asynccontextmanager
async def folder_client(tmp_path: Path) -> AsyncIterator[tuple[Client, Path]]:
    """An in-process client of a small folder (a context manager: the SDK's task scopes stay in one task)."""
    root = tmp_path / "project"
    root.mkdir()
    store = sessions_of(root)
    make_session(store, "s-alpha", cwd=str(root), title="Alpha study", turns=2)
    make_session(store, "s-alpine", cwd=str(root / "sub"), title="Beta plot", created_at=BASE + 5)
    make_session(store, "s-twin-1", cwd=str(root), title="Twin", created_at=BASE + 7)
    make_session(store, "s-twin-2", cwd=str(root), title="Twin", created_at=BASE + 8)
    server, tools = build_server(served(root))
    try:
        async with Client(server) as client:
            yield client, root
    finally:
        tools.close()


@pytest.mark.parametrize(("arguments", "message"), [
    ({"limit": 0}, "limit must be a whole number from 1 to 200, got 0"),
    ({"limit": "ten"}, "limit must be a whole number from 1 to 200, got 'ten'"),
    ({"body": "yes"}, "body must be true or false"),
    ({"source": "vim"}, "source 'vim' is not one this server knows; use one of all, dsh-jupyter, claude-code, codex"),
    ({"query": 7}, "query must be text"),
    ({"folder": ""}, "folder must name a folder inside the served one"),
    ({"folder": "../.."}, "folder '../..' is outside the served folder"),
    ({"folder": "/"}, "folder '/' is outside the served folder"),
])
async def test_bad_search_arguments_are_named_in_the_users_terms(
        tmp_path: Path, arguments: dict[str, Any], message: str) -> None:
    async with folder_client(tmp_path) as (client, _):
        result = await client.call_tool("search_sessions", arguments)
    assert result.is_error and message in text_of(result), text_of(result)
    assert "validation error" not in text_of(result)


async def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    async with folder_client(tmp_path) as (client, root):
        (tmp_path / "secret").mkdir()
        (root / "link").symlink_to(tmp_path / "secret")
        result = await client.call_tool("search_sessions", {"folder": "link"})
    assert result.is_error and "outside the served folder" in text_of(result)


@pytest.mark.parametrize(("session", "message"), [
    ("", "session must be a session id, the start of one, or a session's title"),
    (["s-alpha"], "session must be a session id"),
    ("s-alp", "'s-alp' is the start of several session ids (s-alpha, s-alpine); give more of the id"),
    ("Twin", "several sessions are titled 'Twin' (s-twin-2, s-twin-1); give the session id instead"),
    ("nothing-like-it", "no session 'nothing-like-it' in"),
])
async def test_sessions_that_cannot_be_told_apart_or_found_are_explained(
        tmp_path: Path, session: Any, message: str) -> None:
    async with folder_client(tmp_path) as (client, _):
        for tool in ("read_session", "locate_session"):
            result = await client.call_tool(tool, {"session": session})
            assert result.is_error and message in text_of(result), (tool, text_of(result))


async def test_prefix_title_and_folder_filter(tmp_path: Path) -> None:
    async with folder_client(tmp_path) as (client, root):
        located = json.loads(text_of(await client.call_tool("locate_session", {"session": "alpha study"})))
        assert located["sessionId"] == "s-alpha" and located["source"] == "dsh-jupyter"
        assert json.loads(text_of(await client.call_tool("locate_session", {"session": "s-alpi"})))["sessionId"] == \
            "s-alpine"
        found = json.loads(text_of(await client.call_tool("search_sessions", {"folder": str(root / "sub")})))
        assert [s["sessionId"] for s in found["sessions"]] == ["s-alpine"]
        body = json.loads(text_of(await client.call_tool("search_sessions", {"query": "answer", "body": True})))
        assert {s["sessionId"] for s in body["sessions"]} == {"s-alpha", "s-alpine", "s-twin-1", "s-twin-2"}
        assert json.loads(text_of(await client.call_tool("search_sessions", {"source": "codex"})))["sessions"] == []


async def test_a_session_made_after_the_server_started_is_found(tmp_path: Path) -> None:
    async with folder_client(tmp_path) as (client, root):
        assert json.loads(text_of(await client.call_tool("search_sessions", {"query": "late"})))["sessions"] == []
        make_session(sessions_of(root), "s-late", cwd=str(root), title="Late night", created_at=BASE + 99)
        found = json.loads(text_of(await client.call_tool("search_sessions", {"query": "late"})))
        assert [s["sessionId"] for s in found["sessions"]] == ["s-late"]
        assert "Late night" in text_of(await client.call_tool("read_session", {"session": "s-late"}))


async def test_other_tools_transcripts_only_from_inside_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "analysis"
    root.mkdir()
    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    shutil.copytree(PEERS / "claude", claude)
    for log in claude.rglob("*.jsonl"):
        log.write_text(log.read_text(encoding="utf-8").replace("/home/ana/analysis", str(root)), encoding="utf-8")
    server, tools = build_server(served(root))
    try:
        async with Client(server) as client:
            found = json.loads(text_of(await client.call_tool("search_sessions", {"source": "claude-code"})))
            ids = [s["sessionId"] for s in found["sessions"]]
            assert len(ids) == 1 and found["sessions"][0]["source"] == "Claude Code"
            assert "untrusted" in text_of(await client.call_tool("read_session", {"session": ids[0]}))
            other = [h for h in tools.folder.services.foreign.headers() if h.session_id not in ids]  # type: ignore[union-attr]
            assert other, "the fixture has a transcript of another folder"
            refused = await client.call_tool("read_session", {"session": other[0].session_id})
            assert refused.is_error and "outside the served folder" in text_of(refused)
            assert json.loads(text_of(await client.call_tool(
                "search_sessions", {"source": "dsh-jupyter"})))["sessions"] == []
    finally:
        tools.close()


def test_a_root_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FolderError, match="it is not a folder; pass --root"):
        served(tmp_path / "missing")


def test_the_command_refuses_a_missing_root_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_jupyter.cli import main

    assert main(["mcp", "--root", str(tmp_path / "missing")]) == 2
    assert "is not a folder; pass --root" in capsys.readouterr().err
    assert main(["mcp", "--max-reference-bytes", "0"]) == 2


async def test_a_session_over_the_budget_is_cut_as_a_mention_cuts_it(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    make_session(sessions_of(root), "s-long", cwd=str(root), title="Long", turns=60, prompt="x" * 20_000)
    server, tools = build_server(served(root, max_reference_bytes=4096))
    try:
        async with Client(server) as client:
            snapshot = text_of(await client.call_tool("read_session", {"session": "s-long"}))
    finally:
        tools.close()
    assert "## Reference omissions" in snapshot and '"omittedMessages"' in snapshot
    start, end = snapshot.index("<referenced-sessions>\n"), snapshot.index("\n</referenced-sessions>")
    assert len(snapshot[start + len("<referenced-sessions>\n"):end].encode("utf-8")) <= 4096 + 2  # the [ ] around


async def test_a_folder_served_before_its_first_session_finds_it_later(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    server, tools = build_server(served(root))
    try:
        async with Client(server) as client:
            assert json.loads(text_of(await client.call_tool("search_sessions", {})))["sessions"] == []
            make_session(sessions_of(root), "s-first", cwd=str(root), title="First steps")
            found = json.loads(text_of(await client.call_tool("search_sessions", {"query": "first"})))
            assert [s["sessionId"] for s in found["sessions"]] == ["s-first"]
    finally:
        tools.close()
