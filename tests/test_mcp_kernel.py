"""The agent uses real MCP servers (written with the ``mcp`` SDK, tests/mcp_servers) in a real kernel.

One notebook for the module, on the offline model (``/tool NAME {json}`` calls a tool), headless (so a call that
asks is refused at once): the stdio server comes from the user file, the Streamable HTTP one (127.0.0.1, a token
in a header, taken from the kernel's environment) from the project's ``.mcp.json`` (trusted with
``%dsh mcp --trust``), and a broken server
from ``DshMagics.mcp_servers``. The tests read the cells and the JSONL log.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, named_outputs, output_text
from mcp_helpers import http_notes_server, stdio_entry

TOKEN = "tok-9f2c1d7e5b"
SECRET = "s3cr3t-notes-value-41"


def cells(work: Path) -> dict[str, str]:
    broken = {"broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('broken server: no config')"]}}
    return {
        "load": "%load_ext dsh_jupyter\nimport time",
        "config": f"%config DshMagics.mcp_servers = {broken!r}\n%config DshMagics.mcp_call_timeout = 3.0",
        "list before": "%dsh mcp",
        "trust": "%dsh mcp --trust",
        "read": "%%dsh\n/tool mcp__notes__read_note {\"name\": \"a\"}",
        "write asks": "%%dsh\n/tool mcp__notes__write_note {\"name\": \"b\", \"text\": \"hello\"}",
        "http": "%%dsh\n/tool mcp__web__read_note {\"name\": \"a\"}",
        "secret": "%%dsh\n/tool mcp__notes__secret {}",
        "plot": "%%dsh\n/tool mcp__notes__plot {}",
        "clock": "started = time.monotonic()",
        "hang": "%%dsh\n/tool mcp__notes__hang {}",
        "hang elapsed": "print(f'elapsed={time.monotonic() - started:.2f}')",
        "stop clock": "started = time.monotonic()",
        "stop bg": "%%dsh --bg\n/tool mcp__notes__hang {}",
        "stop": "time.sleep(1.5)\n%dsh stop\n%dsh wait",
        "stop elapsed": "print(f'elapsed={time.monotonic() - started:.2f}')",
        "crash": "%%dsh\n/tool mcp__notes__crash {}",
        "again": "%%dsh\n/tool mcp__notes__read_note {\"name\": \"a\"}",
        "list after": "%dsh mcp",
        "auto mode": "%config DshMagics.approval = \"auto\"",
        "auto": "%%dsh\n/tool mcp__notes__write_note {\"name\": \"b\", \"text\": \"hello\"}",
        "bad file": "open('.mcp.json', 'w').write('{\"mcpServers\": {\"web\": ')",
        "list bad": "%dsh mcp",
    }


@dataclass
class Run:
    outputs: dict[str, list[dict[str, Any]]]
    work: Path

    def text(self, name: str) -> str:
        return html.unescape(output_text(self.outputs[name], "text/plain", first=False))

    def rich(self, name: str) -> str:
        return html.unescape(output_text(self.outputs[name], "text/html", "text/plain", first=True))

    def log_lines(self) -> list[str]:
        return [line for log in sorted((self.work / ".dsh" / "sessions").glob("*/session.jsonl"))
                for line in log.read_text().splitlines()]

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(line)["data"] for line in self.log_lines() if json.loads(line)["type"] == "tool/result"]

    def result(self, tool: str, index: int = 0, server: str = "notes") -> dict[str, Any]:
        """The ``index``-th result of ``server``'s ``tool`` (a refused call counts too)."""
        found = [r for r in self.results() if r.get("meta", {}).get("mcp") == {"server": server, "tool": tool}
                 or r.get("meta", {}).get("approval", {}).get("tool") == f"mcp__{server}__{tool}"]
        return found[index]


def result_text(data: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in data["message"]["content"][0]["content"] if b.get("type") == "text")


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    folder = tmp_path_factory.mktemp("mcp-http")
    (folder / "note-a.txt").write_text("from the http server")
    with http_notes_server(folder, TOKEN) as port:
        yield port


@pytest.fixture(scope="module")
def run(kernel_runner: KernelRunner, http_server: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    work = tmp_path_factory.mktemp("mcp-kernel")
    home = tmp_path_factory.mktemp("mcp-home")
    (work / "note-a.txt").write_text("alpha note")
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": stdio_entry(
        NOTES_SECRET_TOKEN="${NOTES_SECRET}")}}))
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "web": {"type": "http", "url": f"http://127.0.0.1:{http_server}/mcp",
                "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
        "typo": {"comand": "notes-mcp"}}}))
    named = cells(work)
    nb = kernel_runner.run(list(named.values()), work,
                           env={"DSH_HOME": str(home), "WEB_TOKEN": TOKEN, "NOTES_SECRET": SECRET})
    yield Run(named_outputs(list(named), nb), work)


@pytest.mark.slow
def test_servers_are_listed_before_they_start(run: Run) -> None:
    table = run.text("list before")
    for name in ("notes", "web", "broken"):
        assert re.search(rf"^{name}\s", table, re.M), table
    assert "not started" in table and "mcp.json (user)" in table and ".mcp.json (project)" in table
    assert 'unknown key(s) "comand"' in table and "'typo'" in table  # the bad entry, named where it is written
    # The project file came with the folder: its server waits until the person trusts the file.
    assert re.search(r"^web\s.*untrusted", table, re.M), table
    assert "defines MCP server(s) web; they start only once you have read the file" in table
    trusted = run.text("trust")
    assert "as it is now; a change to the file asks again" in trusted and "web: http://127.0.0.1:" in trusted


@pytest.mark.slow
def test_a_read_only_tool_runs_without_asking_and_is_logged_with_its_server(run: Run) -> None:
    data = run.result("read_note")
    assert result_text(data) == "alpha note"
    assert data["meta"]["mcp"] == {"server": "notes", "tool": "read_note"}
    assert data["meta"]["approval"]["allowed"] is True and data["meta"]["approval"]["answeredBy"] == "setting"
    cell = run.rich("read")
    assert "alpha note" in cell
    # the server that cannot start is named in the turn, in one line (one that hangs: tests/test_mcp_clients.py)
    assert "MCP server 'broken'" in cell and "failed: SystemExit" not in cell and "broken server: no config" in cell


@pytest.mark.slow
def test_an_acting_tool_asks_first(run: Run) -> None:
    data = run.result("write_note")
    assert data["meta"]["approval"]["allowed"] is False and data["meta"]["approval"]["answeredBy"] == "nobody"
    assert "refused: needs approval" in run.rich("write asks")
    written = run.result("write_note", 1)  # in auto mode it runs
    assert written["meta"]["approval"]["allowed"] is True and result_text(written) == "wrote note 'b'"
    assert (run.work / "note-b.txt").read_text() == "hello"


@pytest.mark.slow
def test_the_http_server_gets_its_token_from_the_environment(run: Run) -> None:
    assert result_text(run.result("read_note", server="web")) == "from the http server"
    assert TOKEN not in "\n".join(run.log_lines())


@pytest.mark.slow
def test_secrets_in_results_are_masked(run: Run) -> None:
    assert result_text(run.result("secret")) == "the token is [masked]"
    assert SECRET not in "\n".join(run.log_lines()) and SECRET not in run.rich("secret")


@pytest.mark.slow
def test_images_are_saved_as_artifacts(run: Run) -> None:
    blocks = run.result("plot")["message"]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image"] and blocks[1]["tool"] == "mcp__notes__plot"
    assert (next((run.work / ".dsh" / "sessions").glob("*/session.jsonl")).parent / blocks[1]["artifact"]).is_file()


@pytest.mark.slow
def test_a_hanging_call_ends_within_its_timeout(run: Run) -> None:
    data = run.result("hang")
    assert "did not answer hang within 3 s (DshMagics.mcp_call_timeout)" in result_text(data)
    elapsed = float(re.search(r"elapsed=([\d.]+)", run.text("hang elapsed")).group(1))  # type: ignore[union-attr]
    assert elapsed < 12, elapsed


@pytest.mark.slow
def test_stop_cancels_a_call(run: Run) -> None:
    elapsed = float(re.search(r"elapsed=([\d.]+)", run.text("stop elapsed")).group(1))  # type: ignore[union-attr]
    assert elapsed < 2.9, elapsed  # well before the 3 s call timeout
    assert "■ interrupted" in run.rich("stop bg") and "stopping the running turn" in run.text("stop")
    # The hang call of the stopped turn: closed by the turn's stop, or by the tool itself when it saw the cancel
    # first (which one wins is a matter of milliseconds).
    stopped = result_text(run.results()[6])
    assert "the user interrupted the turn" in stopped or \
        "was stopped: the turn was cancelled (the MCP call was cancelled too)" in stopped, stopped


@pytest.mark.slow
def test_a_crash_mid_call_is_one_clear_line_and_the_server_comes_back(run: Run) -> None:
    text = result_text(run.result("crash"))
    assert "MCP server 'notes'" in text and "stopped during the crash call" in text
    assert "it said: notes server: crashing on purpose" in text and "\n" not in text
    assert result_text(run.result("read_note", 1)) == "alpha note"
    table = run.text("list after")
    assert re.search(r"^notes\s.*ready", table, re.M) and re.search(r"^broken\s.*failed", table, re.M)
    assert "acts (asks first): mcp__notes__write_note; reads: mcp__notes__read_note, mcp__notes__plot" in table


@pytest.mark.slow
def test_unparseable_json_is_named_with_its_file(run: Run) -> None:
    table = run.text("list bad")
    assert re.search(r"Problem: the MCP configuration .*\.mcp\.json is not valid JSON at line 1", table), table
    assert re.search(r"^notes\s", table, re.M)  # the user file's server is still there
