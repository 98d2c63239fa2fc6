"""The record of trusted project MCP files: by real path and exact contents, private, never trusting by accident."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from dsh_jupyter.mcp_client.config import load_servers
from dsh_jupyter.mcp_client.trust import ProjectTrust, digest


def test_a_file_is_trusted_only_as_it_was(tmp_path: Path) -> None:
    trust = ProjectTrust(tmp_path / "home" / "mcp-trusted.json")
    project = tmp_path / ".mcp.json"
    assert not trust.trusts(project, digest(b"{}"))  # no record yet: nothing is trusted
    trust.trust(project, digest(b"{}"))
    assert trust.trusts(project, digest(b"{}"))
    assert not trust.trusts(project, digest(b"{ }"))
    assert not trust.trusts(tmp_path / "other" / ".mcp.json", digest(b"{}"))
    assert stat.S_IMODE(os.stat(trust.path).st_mode) == 0o600  # which folders a person trusts is theirs alone


def test_a_link_to_a_trusted_file_is_the_same_file(tmp_path: Path) -> None:
    trust = ProjectTrust(tmp_path / "trusted.json")
    (tmp_path / "real").mkdir()
    project = tmp_path / "real" / ".mcp.json"
    (tmp_path / "link").symlink_to(tmp_path / "real")
    trust.trust(project, "f" * 64)
    assert trust.trusts(tmp_path / "link" / ".mcp.json", "f" * 64)
    assert trust.forget(tmp_path / "link" / ".mcp.json") and not trust.trusts(project, "f" * 64)
    assert not trust.forget(project)


def test_a_damaged_record_trusts_nothing_and_is_replaced_whole(tmp_path: Path) -> None:
    record = tmp_path / "trusted.json"
    project = tmp_path / ".mcp.json"
    for damaged in ("{not json", json.dumps({"version": 9, "files": {str(project): "a"}}), "[]",
                    json.dumps({"version": 1, "files": {str(project): 5}})):
        record.write_text(damaged)
        assert not ProjectTrust(record).trusts(project, "a")
    ProjectTrust(record).trust(project, "b")
    assert json.loads(record.read_text()) == {"version": 1, "files": {os.path.realpath(project): "b"}}


def test_only_the_project_files_servers_wait_for_trust(tmp_path: Path) -> None:
    user, project = tmp_path / "user.json", tmp_path / ".mcp.json"
    user.write_text(json.dumps({"mcpServers": {"mine": {"command": "my-mcp"}}}))
    project.write_bytes(json.dumps({"mcpServers": {"theirs": {"command": "their-mcp"}}}).encode())
    trust = ProjectTrust(tmp_path / "trusted.json")
    found = load_servers(user, project, {"set": {"command": "set-mcp"}}, trust=trust)
    assert {n: s.trusted for n, s in found.servers.items()} == {"mine": True, "theirs": False, "set": True}
    assert any("theirs" in p and "%dsh mcp --trust" in p for p in found.problems)
    assert not load_servers(None, project, None).servers["theirs"].trusted  # no record given: not trusted
    trust.trust(project, digest(project.read_bytes()))
    again = load_servers(user, project, None, trust=trust)
    assert again.servers["theirs"].trusted and again.problems == []


def test_a_file_not_trusted_yet_gets_nothing_of_the_environment(tmp_path: Path) -> None:
    project = tmp_path / ".mcp.json"
    project.write_bytes(json.dumps({"mcpServers": {
        "web": {"url": "${BASE_URL}/mcp", "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}},
        "local": {"command": "serve", "args": ["--key", "${SEARCH_TOKEN}"], "env": {"TOKEN": "${SEARCH_TOKEN}"}},
    }}).encode())
    env = {"BASE_URL": "https://search.example", "SEARCH_TOKEN": "sk-not-for-them"}
    trust = ProjectTrust(tmp_path / "trusted.json")
    waiting = load_servers(None, project, None, env, trust=trust)
    assert not waiting.servers["web"].trusted and not waiting.servers["local"].trusted
    shown = repr(waiting.servers)  # what %dsh mcp's table is made from
    assert "sk-not-for-them" not in shown and "search.example" not in shown and "${SEARCH_TOKEN}" in shown
    assert waiting.servers["web"].url == "${BASE_URL}/mcp"
    # A variable the kernel lacks is no problem either while the file waits (it is not read for it).
    assert [p for p in load_servers(None, project, None, {}, trust=trust).problems if "not set" in p] == []
    trust.trust(project, digest(project.read_bytes()))
    trusted = load_servers(None, project, None, env, trust=trust)
    assert trusted.servers["web"].url == "https://search.example/mcp"
    assert trusted.servers["local"].args == ("--key", "sk-not-for-them") and trusted.servers["web"].trusted
