"""The MCP client's configuration: Claude-style ``mcpServers`` files and the setting, merged and checked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from import_helpers import loaded_by_load_ext

from dsh_jupyter.mcp_client.config import (
    McpConfigError,
    command_allowed,
    load_servers,
    parse_server,
    parse_servers,
    read_file,
)
from dsh_jupyter.secrets import mask_text


def test_stdio_and_http_entries_in_claude_code_shape() -> None:
    found = parse_servers({"mcpServers": {
        "notes": {"command": "uvx", "args": ["notes-mcp", "--dir", "${NOTES:-~/notes}"], "env": {"A": "${HOME_X}"}},
        "search": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Team": "data"}},
        "bare": {"url": "http://127.0.0.1:9/mcp"}}}, "f.json", env={"HOME_X": "/h"})
    assert found.problems == []
    notes, search, bare = found.servers.values()
    assert (notes.transport, notes.command, notes.args, notes.env) == ("stdio", "uvx", ("notes-mcp", "--dir",
                                                                                        "~/notes"), (("A", "/h"),))
    assert (search.transport, search.url, search.headers) == ("http", "https://mcp.example.com/mcp",
                                                             (("X-Team", "data"),))
    assert bare.transport == "http" and notes.origin == "f.json" and notes.target() == "uvx notes-mcp --dir ~/notes"


@pytest.mark.parametrize(("entry", "words"), [
    ({"comand": "x"}, ['unknown key(s) "comand"', "a stdio server takes args, command, cwd, disabled, env, type"]),
    ({"args": ["x"]}, ['needs a "command"']),
    ({"command": "x", "args": "-v"}, ['"args" must be a list of strings']),
    ({"type": "sse", "url": "http://h/sse"}, ['"type" "sse" is not supported', "Streamable HTTP"]),
    ({"url": "ftp://h"}, ['needs a "url" starting with http://']),
    ({"url": "http://h", "headers": {"A": 1}}, ['"headers" must be an object of strings']),
    ({"command": "x", "disabled": "yes"}, ['"disabled" must be true or false']),
    ({"command": "${NOPE_NOT_SET}"}, ["uses ${NOPE_NOT_SET}, which is not set", "${NOPE_NOT_SET:-default}"]),
    ("uvx", ['must be an object such as {"command"']),
])
def test_a_bad_entry_is_named_in_the_users_terms(entry: object, words: list[str]) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_server("notes", entry, "/home/u/.dsh/mcp.json", env={})
    message = str(caught.value)
    assert "MCP server 'notes' in /home/u/.dsh/mcp.json" in message or "'notes'" in message
    for word in words:
        assert word in message


def test_a_bad_name_cannot_become_a_tool_name() -> None:
    with pytest.raises(McpConfigError, match="use 1-40 letters, digits"):
        parse_server("my server", {"command": "x"}, "f")


def test_unparseable_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}')
    found = read_file(path)
    assert found.servers == {}
    (problem,) = found.problems
    assert str(path) in problem and "not valid JSON at line 3" in problem and "fix the file" in problem


def test_a_missing_file_holds_no_servers_and_no_problem(tmp_path: Path) -> None:
    assert read_file(tmp_path / "absent.json").problems == []


def test_bad_entries_leave_the_good_ones_and_top_level_typos_are_named(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"good": {"command": "x"}, "bad": {"command": ""}}, "mcpServer": {}}))
    found = read_file(path)
    assert list(found.servers) == ["good"]
    assert any('unknown top-level key(s) "mcpServer"' in p for p in found.problems)
    assert any("'bad'" in p and 'needs a "command"' in p for p in found.problems)


def test_later_sources_win_server_by_server(tmp_path: Path) -> None:
    user, project = tmp_path / "user.json", tmp_path / ".mcp.json"
    user.write_text(json.dumps({"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}}))
    project.write_text(json.dumps({"mcpServers": {"b": {"command": "project-b"}, "c": {"command": "project-c"}}}))
    found = load_servers(user, project, {"c": {"command": "setting-c", "disabled": True}})
    assert {n: (s.command, s.origin, s.disabled) for n, s in found.servers.items()} == {
        "a": ("user-a", str(user), False), "b": ("project-b", str(project), False),
        "c": ("setting-c", "DshMagics.mcp_servers", True)}


def test_header_and_credential_values_are_masked() -> None:
    load_servers(None, None, {"web": {"url": "http://h", "headers": {"Authorization": "Bearer abc123token456"}},
                              "s": {"command": "x", "env": {"SERVICE_API_KEY": "k-998877665544"}}})
    assert mask_text("sent abc123token456 and k-998877665544") == "sent [masked] and [masked]"


def test_the_allowlist_allows_names_as_written_and_programs_by_path(tmp_path: Path) -> None:
    assert command_allowed("anything", None)
    assert command_allowed("uvx", ["uvx"]) and not command_allowed("/tmp/uvx", ["uvx"])
    assert not command_allowed("npx", ["uvx"]) and not command_allowed("uvx", [])
    assert command_allowed(sys.executable, [sys.executable])
    program = tmp_path / "server"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(program)
    assert command_allowed(str(link), [str(program)]) and not command_allowed(str(link), [str(tmp_path / "other")])


def test_load_ext_imports_neither_the_sdk_nor_the_client(tmp_path: Path) -> None:
    assert loaded_by_load_ext(tmp_path, "mcp", "httpx2", "dsh_jupyter.mcp_client") == []
