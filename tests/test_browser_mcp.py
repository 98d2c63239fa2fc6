"""An outside agent's ``notebook_edit`` through the server's ``dsh/mcp`` is a proposal in JupyterLab.

A real ``jupyter lab`` (token on), a notebook open in Chromium with ``%load_ext dsh_jupyter`` run, and the
``mcp`` SDK's Streamable HTTP client (as Claude Code would connect): ``notebook_read`` sees the live cells;
``notebook_edit`` shows its insert as a proposal below the cell, not in the notebook, and the call waits; after
Accept the cell is in the notebook and the call answers with its id. A second proposal rejected in the page is
not applied and the call says so. ``notebook_run`` asks on the cell and runs it only after Accept, its outputs in
the cell and in the answer. Screenshots: ``test-artifacts/…mcp-proposal.png``, ``…mcp-run-question.png``.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from browser_helpers import (
    JupyterServer,
    NotebookPage,
    serve,
    watched_page,
    write_notebook_cells,
)

PATH = "work/outside.ipynb"
CELLS: list[tuple[str | None, str]] = [(None, "%load_ext dsh_jupyter"), ("cell-x", "x = 41\nprint('x is', x)")]
PROPOSAL = ".dsh-proposal"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def write_notebook(root: Path, _state: Path) -> None:
        write_notebook_cells(root / PATH, CELLS)

    yield from serve("lab", tmp_path_factory, "outside-agent", write_notebook)


async def call_tool(server: JupyterServer, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url = f"{server.base_url}dsh/mcp"
    async with httpx2.AsyncClient(headers={"Authorization": f"token {server.token}"}, timeout=120) as http, \
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
        result = await client.call_tool(name, arguments)
        return bool(result.is_error), str(result.content[0].text)


class Background:
    """One MCP call on a thread of its own (the page is driven meanwhile)."""

    def __init__(self, server: JupyterServer, name: str, arguments: dict[str, Any]) -> None:
        self.result: tuple[bool, str] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(server, name, arguments), daemon=True)
        self._thread.start()

    def _run(self, server: JupyterServer, name: str, arguments: dict[str, Any]) -> None:
        try:
            self.result = asyncio.run(call_tool(server, name, arguments))
        except BaseException as exc:  # handed to the test thread
            self.error = exc

    def wait(self, timeout: float = 60) -> tuple[bool, str]:
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        assert self.result is not None, "the MCP call did not answer"
        return self.result

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()


def cell_sources(nb: NotebookPage) -> list[str]:
    read = "cells => cells.map(cell => cell.querySelector('.cm-content')?.innerText ?? '')"
    return [str(s) for s in nb.page.locator(f"{nb.scope} .jp-Cell").evaluate_all(read)]


def test_an_outside_agents_edit_is_a_proposal_that_lands_only_after_accept(
        browser: Any, server: JupyterServer, request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, _watch):
        nb = NotebookPage(page, server, PATH).open()
        nb.run(0)
        nb.run(1)
        failed, read = Background(server, "notebook_read", {"path": PATH}).wait()
        assert not failed and "cell-x" in read and "x = 41" in read, read

        failed, text = Background(server, "notebook_edit", {"path": "/etc/passwd", "action": "delete",
                                                             "cell_id": "cell-x"}).wait()
        assert failed and "outside the server root" in text
        failed, text = Background(server, "notebook_edit", {"path": "work/none.ipynb", "action": "delete",
                                                             "cell_id": "cell-x"}).wait()
        assert failed and "no kernel runs work/none.ipynb" in text

        call = Background(server, "notebook_edit", {"path": PATH, "action": "insert", "cell_id": "cell-x",
                                                    "source": "y = x + 1\ny"})
        card = nb.page.locator(f"{nb.scope} {PROPOSAL}")
        expect(card).to_be_visible(timeout=60_000)
        expect(card.locator(".dsh-proposal-source")).to_have_text("y = x + 1\ny")
        assert "y = x + 1\ny" not in cell_sources(nb) and not call.done  # waits for the person
        nb.screenshot(request, "mcp-proposal")
        card.locator("button.dsh-proposal-accept").click()
        failed, text = call.wait()
        assert not failed and "Inserted a new code cell" in text, text
        found = re.search(r"New cell id: (\S+)", text)
        assert found is not None, text
        new_id = found.group(1)
        expect(card).to_have_count(0, timeout=10_000)
        assert cell_sources(nb)[2] == "y = x + 1\ny"

        call = Background(server, "notebook_edit", {"path": PATH, "action": "replace", "cell_id": "cell-x",
                                                    "source": "x = 0"})
        expect(card).to_be_visible(timeout=60_000)
        card.get_by_placeholder("Reason for the agent (optional)").fill("keep 41")
        card.locator("button.dsh-proposal-reject").click()
        failed, text = call.wait()
        assert failed and "notebook_edit was not applied: keep 41" in text, text
        assert cell_sources(nb)[1].startswith("x = 41")

        # a run is asked on the cell itself and runs only after Accept; its outputs come back
        nb.run(1)  # fresh outputs: x is 41
        call = Background(server, "notebook_run", {"path": PATH, "cell_id": new_id})
        expect(card).to_be_visible(timeout=60_000)
        expect(card.locator(".dsh-proposal-title")).to_have_text("The agent asks to run this cell")
        expect(card.locator(".dsh-proposal-source")).to_have_text("y = x + 1\ny")
        assert not call.done
        nb.screenshot(request, "mcp-run-question")
        card.locator("button.dsh-proposal-accept").click()
        failed, text = call.wait()
        assert not failed and f"Ran cell {new_id}." in text and "42" in text, text
        expect(nb.cell(2).locator(".jp-OutputArea-output")).to_contain_text("42", timeout=15_000)
