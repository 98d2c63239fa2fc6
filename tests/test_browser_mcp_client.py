"""In JupyterLab: an MCP server's acting tool asks in the running cell and runs only after Allow; its
read-only tool runs without a question; ``%dsh mcp`` shows the server ready with its tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import (
    JupyterServer,
    NotebookPage,
    finished_cell,
    require_chromium,
    running_server,
    start_cell,
    watched_page,
    write_notebook,
)
from mcp_helpers import stdio_entry

FOLDER = "work"
NOTEBOOK = f"{FOLDER}/mcp.ipynb"
QUESTION = ".dsh-approval-card:not([hidden])"
QUESTION_MS = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    require_chromium()
    root = tmp_path_factory.mktemp("mcp-lab")
    write_notebook(root / NOTEBOOK,
                   f"%load_ext dsh_jupyter\n%config DshMagics.mcp_servers = {{'notes': {stdio_entry()!r}}}",
                   "%dsh mcp --connect",
                   "%%dsh\n/tool mcp__notes__write_note {\"name\": \"b\", \"text\": \"hello from the page\"}",
                   "%%dsh\n/tool mcp__notes__read_note {\"name\": \"b\"}")
    with running_server("lab", root, tmp_path_factory.mktemp("mcp-lab-state")) as running:
        yield running


def test_an_acting_mcp_tool_runs_only_after_allow(browser: Any, server: JupyterServer,
                                                  request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    note = server.root / FOLDER / "note-b.txt"
    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        table = nb.run(1, timeout=90_000)
        expect(table).to_contain_text("acts (asks first): mcp__notes__write_note; reads: mcp__notes__read_note")
        nb.screenshot(request, "1-dsh-mcp")

        output = start_cell(nb, 2)
        card = output.locator(QUESTION)
        expect(card).to_be_visible(timeout=QUESTION_MS)
        expect(card).to_contain_text("The agent wants to run mcp__notes__write_note")
        expect(card.locator("pre")).to_contain_text('"text": "hello from the page"')
        assert not note.exists()  # nothing ran before the answer
        card.scroll_into_view_if_needed()
        nb.screenshot(request, "2-question")
        card.locator("button.dsh-approval-once").click()
        output = finished_cell(nb, 2)
        expect(output.locator("details summary").first).to_contain_text("allowed once by you")
        assert note.read_text() == "hello from the page"

        output = nb.run(3)
        expect(output.locator("details pre").first).to_contain_text("hello from the page")
        expect(output.locator(".dsh-approval-card")).to_have_count(0)
        nb.screenshot(request, "3-read-without-asking")
        assert watch.dialogs == [] and watch.errors == []
