"""In a real browser (JupyterLab and Notebook 7): the notebook is the agent's workspace.

The offline model calls the notebook tools on request (``/tool NAME {json}``); the live document reaches the
browser over the labextension's comm while the ``%%dsh`` cell blocks the kernel. One test per app walks
through the whole feature:

- ``ask`` mode: a proposed insert appears below its cell with Accept / Reject; accepted, it is in the notebook
  and, once saved, in the ``.ipynb`` on disk; a proposed replacement shows a line diff; rejected with a reason,
  the cell is unchanged and the model received the reason; a proposed deletion marks its cell; a proposal
  whose cell the user deletes goes away and the agent is told;
- ``auto`` mode: ``notebook_run`` runs a cell (the browser cell shows its output and execution count) and
  ``notebook_read`` reads that output back; ``%dsh undo`` reverts the agent's last applied edit;
- addressing: between the agent's read and its edit the user moves, adds and deletes cells; the edit lands
  on the right cell, and an edit of the deleted one is a clear error;
- after a kernel restart and ``%load_ext``, the agent reads the live notebook again; a Run All right after a
  restart finds the page connected in the cells after ``%load_ext`` (its connection goes on a kernel subshell);
- with a second browser tab on the notebook, both show the proposal; the first answer decides.

Screenshots (``test-artifacts/``): the proposed insert and the replacement diff, in JupyterLab light and
dark and in Notebook 7.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    APPS,
    JupyterServer,
    NotebookPage,
    finished_cell,
    read_saved_notebook,
    serve,
    start_cell,
    use_theme,
    watched_page,
    write_notebook_cells,
)

PATH = "work/workspace.ipynb"
PROPOSAL = ".dsh-proposal"
#: How long a proposal may take to appear (the first one also creates the kernel's answer subshell).
PROPOSAL_MS = 30_000


def tool(name: str, arguments: dict[str, Any]) -> str:
    return f"%%dsh\n/tool {name} {json.dumps(arguments)}"


PROPOSE_INSERT = tool("notebook_edit", {"action": "insert", "cell_id": "cell-x", "source": "y = x + 1\ny"})
PROPOSE_REPLACE = tool("notebook_edit", {"action": "replace", "cell_id": "cell-x",
                                         "source": "x = 1000\nprint('x is', x)\nprint('done')"})
RUN = tool("notebook_run", {"cell_id": "cell-x"})
READ_ONE = tool("notebook_read", {"cell_ids": ["cell-x"]})
READ_ALL = tool("notebook_read", {})
PROPOSE_ON_TEMP = tool("notebook_edit", {"action": "replace", "cell_id": "cell-temp", "source": "temp = 2"})
PROPOSE_DELETE = tool("notebook_edit", {"action": "delete", "cell_id": "cell-doomed"})
EDIT_MOVED = tool("notebook_edit", {"action": "replace", "cell_id": "cell-x", "source": "x = 7"})
EDIT_DELETED = tool("notebook_edit", {"action": "replace", "cell_id": "cell-doomed", "source": "oops"})

CELLS: list[tuple[str | None, str]] = [
    (None, "%load_ext dsh_jupyter"),
    ("cell-x", "x = 41\nprint('x is', x)"),
    ("cell-doomed", "doomed = True"),
    ("cell-temp", "temp = 1"),
    (None, PROPOSE_INSERT),
    (None, PROPOSE_REPLACE),
    (None, PROPOSE_DELETE),
    (None, PROPOSE_ON_TEMP),
    (None, '%config DshMagics.approval = "auto"'),
    (None, RUN),
    (None, READ_ONE),
    (None, "%dsh undo"),
    (None, READ_ALL),
    (None, EDIT_MOVED),
    (None, EDIT_DELETED),
    (None, TWO_TABS := tool("notebook_edit", {"action": "insert", "source": "z = 'one tab'"})),
    ("cell-end", "# the end"),
]


#: The notebook of the Run All test: the cells after `%load_ext` need the page while a Run All still runs.
RUN_ALL_PATH = "work/run-all.ipynb"
RUN_ALL_CELLS: list[tuple[str | None, str]] = [
    (None, "%load_ext dsh_jupyter"),
    (None, "\n".join([
        "import time as _t",
        "_until = _t.monotonic() + 20",
        "while not dsh.host.live_source.connected and _t.monotonic() < _until:",
        "    _t.sleep(0.05)",
        "print('the page is connected' if dsh.host.live_source.connected else 'no page connected')",
    ])),
    (None, READ_ALL),
]


def write_workspace(path: Path) -> None:
    write_notebook_cells(path, CELLS)


@pytest.fixture(scope="module", params=APPS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, _state: Path) -> None:
        write_workspace(root / PATH)
        write_notebook_cells(root / RUN_ALL_PATH, RUN_ALL_CELLS)

    yield from serve(request.param, tmp_path_factory, "workspace", prepare)


@pytest.fixture
def workspace(server: JupyterServer) -> JupyterServer:
    """``server`` with the notebook as the walk expects it and no session or kernel: a rerun after a failure
    starts where the first try did, not in the notebook and kernel that try left behind."""
    status, running = server.request("GET", "api/sessions")
    for session in running if status == 200 and isinstance(running, list) else []:
        server.request("DELETE", f"api/sessions/{session['id']}", timeout=30)
    server.shut_down_kernels()
    write_workspace(server.root / PATH)
    return server


def sources(nb: NotebookPage) -> list[str]:
    """Every cell's source as its editor shows it (cells whose editor is not drawn yet are scrolled into view
    first: editors are made and drawn lazily)."""
    read = "cells => cells.map(cell => cell.querySelector('.cm-content')?.innerText ?? null)"
    texts: list[str | None] = nb.page.locator(f"{nb.scope} .jp-Cell").evaluate_all(read)
    for index, text in enumerate(texts):
        if not text:  # no editor yet, or one not drawn yet (off screen); an empty cell costs one scroll
            cell = nb.cell(index)
            cell.scroll_into_view_if_needed()
            content = cell.locator(".cm-content")
            content.wait_for(state="attached")
            texts[index] = str(content.inner_text())
    return [str(text) for text in texts]


def index_of(nb: NotebookPage, text: str) -> int:
    """The index of the first cell whose source starts with ``text``."""
    deadline = time.monotonic() + 15
    while True:  # a page just opened may still be making its editors
        seen = sources(nb)
        for index, source in enumerate(seen):
            if source.startswith(text):
                return index
        if time.monotonic() > deadline:
            raise AssertionError(f"no cell starts with {text!r}: {seen}")
        time.sleep(0.5)


def proposal(nb: NotebookPage) -> Any:
    from playwright.sync_api import expect

    card = nb.page.locator(f"{nb.scope} {PROPOSAL}")
    expect(card).to_be_visible(timeout=PROPOSAL_MS)
    return card


def command_mode_on(nb: NotebookPage, index: int) -> None:
    """Select cell ``index`` in command mode (click its prompt area, then Escape)."""
    nb.cell(index).locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")


def saved_cells(server: JupyterServer) -> list[dict[str, Any]]:
    """The cells of the notebook file the server saved, once it reads whole (a read during a save can find it empty
    or half-written: :func:`read_saved_notebook`)."""
    path = server.root / PATH
    deadline = time.monotonic() + 15
    while (saved := read_saved_notebook(path)) is None:
        assert time.monotonic() < deadline, f"{path} was still empty or half-written after 15 s"
        time.sleep(0.1)
    return list(saved["cells"])


def save(nb: NotebookPage, server: JupyterServer) -> list[str]:
    """Save with Ctrl+S (focus in the notebook) and return the saved cells' sources, read from disk."""
    path = server.root / PATH
    stamp = path.stat().st_mtime_ns
    nb.page.locator(f"{nb.scope}").first.focus()
    nb.page.keyboard.press("Control+s")
    deadline = time.monotonic() + 15
    while path.stat().st_mtime_ns == stamp and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.stat().st_mtime_ns != stamp, "the notebook was not saved"
    return ["".join(cell["source"]) for cell in saved_cells(server)]


def test_the_agent_works_in_the_live_notebook(
    browser: Any, workspace: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    server = workspace

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, PATH).open()
        nb.run(0)
        nb.run(1)

        # 1. A proposed insert: shown below cell-x, not in the notebook until accepted.
        here = index_of(nb, PROPOSE_INSERT)
        start_cell(nb, here)
        card = proposal(nb)
        expect(card.locator(".dsh-proposal-title")).to_have_text("The agent proposes a new code cell")
        expect(card.locator(".dsh-proposal-source")).to_have_text("y = x + 1\ny")
        expect(nb.cell(1).locator(PROPOSAL)).to_have_count(1)  # where it would land: below cell-x
        assert len(sources(nb)) == len(CELLS)
        assert "y = x + 1\ny" not in save(nb, server)  # a save meanwhile does not store the proposal
        card.scroll_into_view_if_needed()
        nb.screenshot(request, "1-proposed-insert")
        if server.app == "lab":
            use_theme(nb, "JupyterLab Dark")
            card.scroll_into_view_if_needed()
            nb.screenshot(request, "1-proposed-insert-dark")
        card.locator("button.dsh-proposal-accept").click()
        output = finished_cell(nb, here + 1)  # the new cell came before the prompt
        expect(nb.page.locator(f"{nb.scope} {PROPOSAL}")).to_have_count(0)
        assert sources(nb)[2] == "y = x + 1\ny"
        expect(output).to_contain_text("Inserted a new code cell")
        saved = save(nb, server)
        assert saved[:3] == ["%load_ext dsh_jupyter", "x = 41\nprint('x is', x)", "y = x + 1\ny"]
        assert [c["id"] for c in saved_cells(server)[:2]] == ["prompt-0", "cell-x"]

        # 2. A proposed replacement: a line diff; rejected with a reason, the cell stays as it was.
        here = index_of(nb, PROPOSE_REPLACE)
        start_cell(nb, here)
        card = proposal(nb)
        expect(card.locator(".dsh-proposal-title")).to_have_text("The agent proposes a change to this cell")
        expect(card.locator(".dsh-diff-removed")).to_have_text(["−x = 41"])
        expect(card.locator(".dsh-diff-added")).to_have_text(["+x = 1000", "+print('done')"])
        expect(card.locator(".dsh-diff-same")).to_have_text(["print('x is', x)"])
        card.scroll_into_view_if_needed()
        if server.app == "lab":
            nb.screenshot(request, "2-proposed-replacement-dark")
            use_theme(nb, "JupyterLab Light")
            card.scroll_into_view_if_needed()
        nb.screenshot(request, "2-proposed-replacement")
        card.locator("input.dsh-proposal-why").fill("keep x at 41")
        card.locator("button.dsh-proposal-reject").click()
        output = finished_cell(nb, here)
        expect(output).to_contain_text("the user denied it: keep x at 41")
        assert sources(nb)[1] == "x = 41\nprint('x is', x)"

        # A proposed deletion marks the cell; rejected, the cell stays.
        here = index_of(nb, PROPOSE_DELETE)
        start_cell(nb, here)
        card = proposal(nb)
        expect(card.locator(".dsh-proposal-title")).to_have_text("The agent proposes to delete this cell")
        doomed = nb.cell(index_of(nb, "doomed = True"))
        expect(doomed).to_have_class(re.compile("dsh-proposal-doomed"))
        card.scroll_into_view_if_needed()
        nb.screenshot(request, "3-proposed-deletion")
        card.locator("input.dsh-proposal-why").click()
        page.keyboard.type("do not delete, dd")  # typed into the reason, never notebook shortcuts
        page.keyboard.press("Enter")  # Enter in the reason rejects
        expect(finished_cell(nb, here)).to_contain_text("the user denied it: do not delete, dd")
        expect(doomed).not_to_have_class(re.compile("dsh-proposal-doomed"))
        assert "doomed = True" in sources(nb)

        # The user deletes the cell a proposal is about: the proposal goes and the agent is told at once.
        here = index_of(nb, PROPOSE_ON_TEMP)
        start_cell(nb, here)
        card = proposal(nb)
        command_mode_on(nb, index_of(nb, "temp = 1"))
        page.keyboard.press("d")
        page.keyboard.press("d")
        expect(nb.page.locator(f"{nb.scope} {PROPOSAL}")).to_have_count(0)
        expect(finished_cell(nb, here - 1)).to_contain_text("no cell with id 'cell-temp' in the live notebook")
        cells = len(CELLS) - 1  # cell-temp is gone

        # 3. Run a cell and read its output (auto mode from here on).
        nb.run(index_of(nb, "%config"))
        here = index_of(nb, RUN)
        output = nb.run(here)
        expect(output).to_contain_text("Ran cell cell-x")
        expect(nb.cell(1).locator(".jp-OutputArea-output")).to_have_text("x is 41")
        expect(nb.cell(1).locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"))
        output = nb.run(index_of(nb, READ_ONE))
        expect(output.locator("details pre").first).to_contain_text("the live notebook")
        expect(output.locator("details pre").first).to_contain_text("x is 41")

        # 4. %dsh undo reverts the agent's last applied edit: the inserted cell goes.
        here = index_of(nb, "%dsh undo")
        start_cell(nb, here)
        expect(nb.page.locator(f"{nb.scope} .jp-Cell")).to_have_count(cells)
        output = finished_cell(nb, here - 1)  # the cell above it went
        expect(output).to_contain_text("cell")
        assert "y = x + 1\ny" not in save(nb, server)

        # 5. The agent reads; the user moves cell-x down, adds a cell and deletes cell-doomed; then the edits.
        nb.run(index_of(nb, READ_ALL))
        command_mode_on(nb, 1)
        page.keyboard.press("Control+Shift+ArrowDown")  # cell-x moves below cell-doomed
        expect(nb.cell(2).locator(".cm-content")).to_have_text(re.compile(r"^x = 41"))
        command_mode_on(nb, 0)
        page.keyboard.press("b")  # a new empty cell below the first
        expect(nb.page.locator(f"{nb.scope} .jp-Cell")).to_have_count(cells + 1)
        doomed = index_of(nb, "doomed = True")
        command_mode_on(nb, doomed)
        page.keyboard.press("d")
        page.keyboard.press("d")
        expect(nb.page.locator(f"{nb.scope} .jp-Cell")).to_have_count(cells)
        before = save(nb, server)
        moved = before.index("x = 41\nprint('x is', x)")
        assert "doomed = True" not in before and before[moved - 1] == ""  # moved down, then a cell added above
        output = nb.run(index_of(nb, EDIT_MOVED))
        expect(output).to_contain_text("Replaced cell cell-x")
        after = save(nb, server)
        assert after == [*before[:moved], "x = 7", *before[moved + 1:]]
        output = nb.run(index_of(nb, EDIT_DELETED))
        expect(output).to_contain_text("there is no cell")
        assert save(nb, server) == after

        # 6. After a kernel restart the notebook connects again once the extension is loaded.
        status, kernels = server.request("GET", "api/kernels")
        assert status == 200 and len(kernels) == 1
        panel = nb.page.locator(".jp-NotebookPanel[data-dsh-live-opens]").first
        opens = int(panel.get_attribute("data-dsh-live-opens") or 0)
        status, _ = server.request("POST", f"api/kernels/{kernels[0]['id']}/restart", timeout=60)
        assert status == 200
        # The server's restart event reaches the page (its kernel socket may hear nothing of the new kernel): the
        # page connects again and opens its comm at once, before any cell runs (the kernel refuses it until
        # `%load_ext`). Without that, the ping of the `%load_ext` below could be lost, and the panel stay unconnected.
        expect(panel).not_to_have_attribute("data-dsh-live-opens", str(opens))
        opens = int(panel.get_attribute("data-dsh-live-opens") or 0)
        nb.run(0)
        # The page answers `%load_ext`'s ping by opening its comm again. A cell sent before that comm_open reaches the
        # kernel runs first, and the agent then reads the saved file (as a Run All right after a restart does).
        expect(panel).not_to_have_attribute("data-dsh-live-opens", str(opens))
        output = nb.run(index_of(nb, READ_ALL))
        expect(output.locator("details pre").first).to_contain_text("the live notebook")
        expect(output.locator("details pre").first).to_contain_text("x = 7")

        # 7. A second browser tab on the same notebook sees the proposal too (as every collaborator of a shared
        # notebook does); the first answer decides and the other card goes; the tab used last applies the edit
        # (with jupyter-collaboration the two tabs share the model, and both show the new cell).
        with watched_page(browser) as (other_page, other_watch):
            other = NotebookPage(other_page, server, PATH).open()
            other_page.wait_for_selector(".jp-NotebookPanel[data-dsh-live='connected']", state="attached")
            here = index_of(other, TWO_TABS)
            start_cell(other, here)
            card = proposal(other)
            expect(nb.page.locator(f"{nb.scope} {PROPOSAL}")).to_have_count(1)
            card.locator("button.dsh-proposal-accept").click()
            expect(nb.page.locator(f"{nb.scope} {PROPOSAL}")).to_have_count(0)
            expect(finished_cell(other, here)).to_contain_text("Inserted a new code cell")
            assert sources(other)[-1] == "z = 'one tab'"
            config = json.loads(nb.page.locator("#jupyter-config-data").text_content() or "{}")
            if config.get("disableRTC") is False:  # jupyter-collaboration on: one shared model, both show it
                deadline = time.monotonic() + 15
                while "z = 'one tab'" not in sources(nb) and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert "z = 'one tab'" in sources(nb)
            else:  # each tab its own model: only the tab that applied it
                assert "z = 'one tab'" not in sources(nb)
            assert other_watch.errors == []

        assert watch.dialogs == []
        assert watch.errors == []
        # `%load_ext` and the restart pinged the page: the ping is closed once, by the kernel that sent it (a
        # comm the kernel opens has 32 hex digits for its id; those with dashes are the page's, such as the
        # widget manager's that a restarted kernel without ipywidgets refuses, which is JupyterLab's own).
        closed_twice = [line for line in watch.console_errors if re.search(r"Comm not found .* [0-9a-f]{32}$", line)]
        assert closed_twice == []


def test_a_run_all_right_after_a_restart_finds_the_page_connected(
    browser: Any, workspace: JupyterServer, request: pytest.FixtureRequest
) -> None:
    """Restart, then Run All: the page's connection, sent as `%load_ext` pings it, would reach the kernel only after
    every cell on the main shell; with cells waiting behind `%load_ext` it goes on a kernel subshell, so the
    cells after it see the page and the agent reads the live notebook, not the saved file."""
    from playwright.sync_api import expect

    with watched_page(browser) as (page, _watch):
        nb = NotebookPage(page, workspace, RUN_ALL_PATH).open()
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first
        expect(panel).to_have_attribute("data-dsh-live-opens", re.compile(r"^[1-9]"))  # refused: no dsh yet
        opens = int(panel.get_attribute("data-dsh-live-opens") or 0)
        status, kernels = workspace.request("GET", "api/kernels")
        assert status == 200 and len(kernels) == 1
        status, _ = workspace.request("POST", f"api/kernels/{kernels[0]['id']}/restart", timeout=60)
        assert status == 200
        expect(panel).not_to_have_attribute("data-dsh-live-opens", str(opens))  # the page saw the new kernel
        nb.wait_idle()
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item", has_text=re.compile(r"^Run All Cells$")).click()
        connected = finished_cell(nb, 1)
        expect(connected).to_contain_text("the page is connected")
        read = finished_cell(nb, 2)
        expect(read.locator("details pre").first).to_contain_text("the live notebook")
        nb.screenshot(request, "run-all-connected")
