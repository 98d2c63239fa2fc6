"""``dsh/mcp``: the same MCP tools over Streamable HTTP inside a real jupyter-server, under its token.

The ``mcp`` SDK's own Streamable HTTP client talks to pytest-jupyter's server (the extension enabled, its
token in the ``Authorization`` header, as Claude Code's ``--header`` or Codex's ``http_headers`` send it); a
request without the token is refused before any tool runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server_helpers import Api, make_session, server_api, server_config

from dsh_jupyter.mcp_server.tools import TOOL_NAMES

jp_server_config = server_config(index_at_start=False)
api = server_api()


def endpoint(api: Api, jp_base_url: str) -> str:
    return f"http://127.0.0.1:{api._port}{jp_base_url}dsh/mcp"


async def session_tools(url: str, headers: dict[str, str]) -> tuple[set[str], dict[str, Any], str, bool]:
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        reads = {name: bool(t.annotations is not None and t.annotations.read_only_hint) for name, t in tools.items()}
        assert reads == {**dict.fromkeys(TOOL_NAMES, True), "notebook_read": True, "notebook_edit": False,
                         "notebook_run": False}
        found = json.loads((await client.call_tool("search_sessions", {"query": "churn"})).content[0].text)
        snapshot = (await client.call_tool("read_session", {"session": "s-http"})).content[0].text
        refused = await client.call_tool("search_sessions", {"folder": "/"})
        return set(tools), found, snapshot, bool(refused.is_error)


def test_the_tools_answer_with_the_servers_token_and_refuse_without_it(
        api: Api, jp_root_dir: Path, jp_base_url: str, jp_auth_header: dict[str, str]) -> None:
    make_session(jp_root_dir, "s-http", created_at=1_787_130_725_417, cwd=str(jp_root_dir), title="Churn study")
    url = endpoint(api, jp_base_url)
    names, found, snapshot, refused = api.run(session_tools(url, jp_auth_header))
    assert names == {*TOOL_NAMES, "notebook_read", "notebook_edit", "notebook_run"}
    assert [s["sessionId"] for s in found["sessions"]] == ["s-http"]
    assert found["folder"] == str(jp_root_dir.resolve())
    assert "<referenced-sessions>" in snapshot and "question 1 of s-http" in snapshot
    assert refused

    async def anonymous() -> tuple[int, int]:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        async with httpx2.AsyncClient(timeout=30) as http:
            bare = await http.post(url, json=request, headers={"Accept": "application/json, text/event-stream"})
            wrong = await http.post(url, json=request, headers={"Accept": "application/json, text/event-stream",
                                                                "Authorization": "token not-the-token"})
        return bare.status_code, wrong.status_code

    assert api.run(anonymous()) == (403, 403)


def test_the_server_and_the_kernel_name_the_same_comm_target() -> None:
    from dsh_jupyter.notebook import outside
    from dsh_jupyter.server import mcp_workspace

    assert mcp_workspace.OUTSIDE_TARGET == outside.OUTSIDE_TARGET


async def test_an_edit_with_no_notebook_page_to_ask_is_refused_unapplied(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from dsh_jupyter.notebook.outside import NO_PAGE, call
    from dsh_jupyter.workspace.kernel_record import KernelRecord

    host = SimpleNamespace(kernel_record=KernelRecord(None), live_source=None, main_thread_calls=None,
                           cwd=str(tmp_path), settings=SimpleNamespace(approval_timeout=5.0))
    ok, text = await call(host, "notebook_edit", {"action": "insert", "source": "x = 1"})  # type: ignore[arg-type]
    assert not ok and text == f"notebook_edit: {NO_PAGE}"
    ok, text = await call(host, "notebook_edit", {"action": "explode"})  # type: ignore[arg-type]
    assert not ok and text.startswith("notebook_edit: ") and "action" in text
    ok, text = await call(host, "notebook_run", {"cell_id": "c1"})  # type: ignore[arg-type]
    assert not ok and text.startswith("notebook_run: no notebook page") and "allow a run" in text
    ok, text = await call(host, "notebook_run", {"cell_id": "c1", "timeout": -1})  # type: ignore[arg-type]
    assert not ok and "'timeout' must be a positive number of seconds, got -1" in text
    ok, text = await call(host, "notebook_delete", {})  # type: ignore[arg-type]
    assert not ok and "unknown notebook tool 'notebook_delete'" in text
