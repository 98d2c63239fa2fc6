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
