"""In a real browser: the turn footer of a ``%%dsh --bg`` cell, live while the turn runs, in JupyterLab 4
and in Notebook 7, and still there after the notebook is saved and opened again.

A background cell shows its execution count at once and the kernel goes idle while the turn runs on the
agent thread, so only the footer tells a reader the turn is not over: it says "running" until the turn
ends, then "done" with the duration. The offline model runs ``/bash`` lines as tool calls, so a
``sleep`` keeps the turn busy for a few seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import (
    JupyterServer,
    NotebookPage,
    read_saved_notebook,
    serve,
    watched_page,
    write_notebook,
)

from dsh_jupyter.ui.render import TURN_MIME

NOTEBOOK = "work/footer.ipynb"
CELLS = (
    "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"  # the background job runs without asking",
    "%%dsh --bg\nA slow background job\n/bash sleep 4; echo footer-job-finished",
    "import time; time.sleep(5); 'next cell'",
)
DONE = re.compile(r"^✓ done · .+ \(([0-9a-f]{8})\) · offline · \d+\.\d s · tokens [\d,]+ in, [\d,]+ out"
                  r"(?: · context .+)?$")


def _server(app: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from serve(app, tmp_path_factory, "output", lambda root, _state: write_notebook(root / NOTEBOOK, *CELLS))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from _server("lab", tmp_path_factory)


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from _server("notebook", tmp_path_factory)


def saved_footer(server: JupyterServer, page: Any) -> dict[str, Any]:
    """The background cell's output with a finished footer, once the notebook file on disk holds it."""
    path = server.root / NOTEBOOK
    outputs: list[Any] = []
    for _attempt in range(50):
        saved = read_saved_notebook(path)
        outputs = saved["cells"][1]["outputs"] if saved is not None else []
        for output in outputs:
            data = {mime: "".join(value) if isinstance(value, list) else value  # nbformat splits lines
                    for mime, value in output.get("data", {}).items()}
            if "✓ done" in data.get("text/plain", "") and output.get("metadata", {}).get(TURN_MIME):
                return dict(data)
        page.wait_for_timeout(200)
    raise AssertionError(f"the saved notebook has no finished footer in cell 2: {outputs!r}")


def footer_flow(browser: Any, server: JupyterServer, request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        background = nb.run(1)  # shows its execution count at once: the turn runs on the agent thread
        footer = background.locator("sub.dsh-turn-footer")
        expect(footer).to_have_count(1)
        status = footer.locator(".dsh-turn-status")
        expect(status).to_have_text("● running")
        expect(footer).to_have_text(re.compile(r"^● running · .+ \([0-9a-f]{8}\) · offline · since \d\d:\d\d:\d\d"))
        # It says "running" while the job's tool call is still going.
        expect(background.locator("details summary", has_text="sleep 4; echo footer-job-finished")).to_contain_text(
            "…")
        assert status.inner_text() == "● running"
        background.scroll_into_view_if_needed()
        nb.screenshot(request, "1-running")

        nb.run(2)  # the turn ends meanwhile; its view is re-sent under the running cell
        expect(status).to_have_text("✓ done", timeout=20_000)
        expect(footer).to_have_text(DONE)
        match = DONE.match(footer.inner_text())
        assert match is not None
        short_id = match.group(1)
        expect(background).to_contain_text("footer-job-finished")
        # Only the turn's last output carries the footer; the next cell shows only its own result.
        expect(nb.cell(2).locator("sub.dsh-turn-footer")).to_have_count(0)
        nb.screenshot(request, "2-done")

        # Saved and opened again, the cell still says which session and model answered it. The third cell is
        # let finish first: its result arriving after the save would leave the notebook dirty, and leaving a
        # dirty notebook asks "leave the page?".
        expect(nb.cell(2)).to_contain_text("'next cell'", timeout=20_000)
        nb.wait_idle()
        page.locator(".jp-NotebookPanel-toolbar [data-command='docmanager:save']").first.click()
        saved = saved_footer(server, page)
        assert DONE.match(saved["text/plain"].splitlines()[-1]), saved
        nb = NotebookPage(page, server, NOTEBOOK).open()
        reopened = nb.cell(1).locator("sub.dsh-turn-footer")
        expect(reopened).to_have_text(DONE)
        expect(reopened.locator("code")).to_have_text(short_id)
        nb.cell(1).scroll_into_view_if_needed()
        nb.screenshot(request, "3-reopened")

        # (A "leave the page?" when it was opened again is answered and not counted here: PageWatch.leaving.)
        assert watch.dialogs == []
        assert watch.errors == []


def test_lab_footer_of_a_background_turn(browser: Any, lab: JupyterServer, request: pytest.FixtureRequest) -> None:
    footer_flow(browser, lab, request)


def test_notebook7_footer_of_a_background_turn(browser: Any, notebook7: JupyterServer,
                                               request: pytest.FixtureRequest) -> None:
    footer_flow(browser, notebook7, request)
