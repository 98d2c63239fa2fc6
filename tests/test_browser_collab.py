"""In a real browser with jupyter-collaboration: two people (two browser contexts) on one shared notebook.

The agent's proposal appears in both; one person accepts; both see the new cell; the room saves it into the
``.ipynb``; the session log says who accepted; ``%dsh undo`` takes the cell out again in both. Screenshots of
both contexts (``test-artifacts/``) with the proposal shown and after the accept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_helpers import (
    COLLABORATION,
    JupyterServer,
    NotebookPage,
    artifact_path,
    finished_cell,
    serve,
    start_cell,
    watched_page,
    write_notebook_cells,
    write_page_config,
)

pytest.importorskip("jupyter_collaboration", reason="needs the collab extra (jupyter-collaboration)")

PATH = "shared.ipynb"
PROPOSAL = ".dsh-proposal"
PROPOSAL_MS = 30_000
NEW_SOURCE = "shared = base + 1"
PROPOSE = "%%dsh\n/tool notebook_edit " + json.dumps(
    {"action": "insert", "cell_id": "cell-base", "source": NEW_SOURCE})

CELLS: list[tuple[str | None, str]] = [
    ("cell-setup", "%load_ext dsh_jupyter"),
    ("cell-base", "base = 1"),
    ("cell-ask", PROPOSE),
    ("cell-undo", "%dsh undo"),
]


def prepare(root: Path, state: Path) -> None:
    write_notebook_cells(root / PATH, CELLS)
    config = state / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"jupyter_server_ydoc": True, "jupyter_server_fileid": True}},
        # On here whatever the environment says (the suite's other servers run with real-time collaboration off).
        "YDocExtension": {"document_save_delay": 0.5, "disable_rtc": False},
    }), encoding="utf-8")
    write_page_config(state, keep=COLLABORATION)  # the other modules' pages leave the collaboration front end out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from serve("lab", tmp_path_factory, "collab", prepare)


def sources(nb: NotebookPage) -> list[str]:
    """Every cell's source, read at once (cells come and go while the test reads)."""
    read = ("cells => cells.map(cell => { const content = cell.querySelector('.cm-content'); "
            "return content?.cmView?.view?.state?.doc?.toString() ?? content?.innerText ?? ''; })")
    return [str(text) for text in nb.page.locator(f"{nb.scope} .jp-Cell").evaluate_all(read)]


def wait_for(check: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def saved_sources(server: JupyterServer) -> list[str]:
    try:
        cells = nbformat.read(server.root / PATH, as_version=4)["cells"]
    except Exception:  # the room is writing it right now
        return []
    return ["".join(cell["source"]) for cell in cells]


def decided_by(server: JupyterServer) -> list[str]:
    found = []
    for log in server.root.rglob("*.jsonl"):
        for line in log.read_text(encoding="utf-8").splitlines():
            if '"decidedBy"' in line:
                event = json.loads(line)
                found.append(event["data"]["meta"]["approval"]["decidedBy"])
    return found


def test_two_people_see_the_proposal_one_accepts_both_see_it_and_undo_reverts_it(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser, own_context=True) as (page_a, watch_a), \
            watched_page(browser, own_context=True) as (page_b, watch_b):  # two people: an identity each
        alice = NotebookPage(page_a, server, PATH).open()
        bob = NotebookPage(page_b, server, PATH).open()
        alice.run(0)
        for page in (page_a, page_b):  # both pages hear the kernel's ping and connect
            page.wait_for_selector(".jp-NotebookPanel[data-dsh-live='connected']", state="attached")

        start_cell(alice, 2)
        cards = [nb.page.locator(f"{nb.scope} {PROPOSAL}") for nb in (alice, bob)]
        for card in cards:
            expect(card).to_be_visible(timeout=PROPOSAL_MS)
            expect(card.locator(".dsh-proposal-source")).to_have_text(NEW_SOURCE)
        page_a.screenshot(path=str(artifact_path(request, "alice-proposal")))
        page_b.screenshot(path=str(artifact_path(request, "bob-proposal")))

        cards[1].locator("button.dsh-proposal-accept").click()
        expect(cards[0]).to_have_count(0)  # decided by Bob: gone for Alice too
        expect(finished_cell(alice, 3)).to_contain_text("Inserted a new code cell")
        for nb in (alice, bob):
            wait_for(lambda nb=nb: sources(nb)[:3] == ["%load_ext dsh_jupyter", "base = 1", NEW_SOURCE],
                     f"the new cell in {nb.page}")
        page_a.screenshot(path=str(artifact_path(request, "alice-accepted")))
        page_b.screenshot(path=str(artifact_path(request, "bob-accepted")))
        wait_for(lambda: NEW_SOURCE in saved_sources(server), "the room to save the new cell to the .ipynb")
        who = wait_for(lambda: decided_by(server), "the session log to name who accepted")
        assert who[0].strip(), who
        expect(alice.cell(3)).to_contain_text(f"allowed once by {who[0]}")  # Bob's name, not "you"

        start_cell(bob, 4)  # Bob takes it back with %dsh undo; the agent's cell goes, so this one moves up to 3
        for nb in (alice, bob):
            wait_for(lambda nb=nb: NEW_SOURCE not in sources(nb), f"the undo to reach {nb.page}")
        expect(finished_cell(bob, 3)).to_contain_text("undid the agent's insert")
        wait_for(lambda: (saved := saved_sources(server)) and NEW_SOURCE not in saved, "the undo in the .ipynb")
        assert watch_a.errors == [] and watch_b.errors == []
        assert watch_a.dialogs == [] and watch_b.dialogs == []
