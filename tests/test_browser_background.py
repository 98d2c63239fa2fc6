"""In a real browser: a ``%%dsh --bg`` turn keeps streaming into its own cell while other cells run.

The background turn's view keeps one display handle and sends its updates from an empty context, so
they travel under whichever cell is executing (or, with the kernel idle, under the last request's
parent). These tests check in JupyterLab's DOM that those ``update_display_data`` messages land in the
background cell's output (and nowhere else), that a prompt run meanwhile is steered into the running
turn, and what the background cell shows when its turn ends while no cell is running, before and after
the next cell runs (``refresh_views`` re-sends finished views on ``pre_run_cell``).

The offline model calls the bash tool for a prompt line ``/bash <command>``, so a ``sleep`` there keeps
the turn busy long enough for the other cells to run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    JupyterServer,
    NotebookPage,
    finished_cell,
    held_cell,
    release,
    serve,
    session_logged,
    start_cell,
    watched_page,
    write_notebook,
)

from dsh_jupyter.session.events import TURN_END

FOLDER = "work"
STEER_NOTEBOOK = f"{FOLDER}/background.ipynb"
IDLE_NOTEBOOK = f"{FOLDER}/idle.ipynb"
STEER_PROMPT = "While that runs: also count files"
STEER_CELLS = (
    "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"  # the background jobs run without asking",
    "%%dsh --bg\nRun the slow job in the background.\n/bash sleep 3; echo slow-job-finished",
    f"%%dsh\n{STEER_PROMPT}",
    held_cell("tool-result-seen"),  # runs until the test has seen the background turn's tool result
    "%dsh wait",
)
IDLE_CELLS = (
    "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"  # the background jobs run without asking",
    "%%dsh --bg\n/bash sleep 2; echo idle-finish",
    "1+1",
)
#: The offline model's answer after a tool step with nothing steered in.
TOOL_SUMMARY = "here is what the tool returned"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def write_notebooks(root: Path, _state: Path) -> None:
        write_notebook(root / STEER_NOTEBOOK, *STEER_CELLS)
        write_notebook(root / IDLE_NOTEBOOK, *IDLE_CELLS)

    yield from serve("lab", tmp_path_factory, "background", write_notebooks)



def running(nb: NotebookPage, index: int) -> bool:
    """True while cell ``index`` shows ``[*]``."""
    return nb.cell(index).locator(".jp-InputArea-prompt").inner_text().strip().startswith("[*]")


def kernel_status(nb: NotebookPage) -> Any:
    """The status bar item ``<kernel name> | Idle`` / ``| Busy``."""
    return nb.page.locator("#jp-main-statusbar .jp-StatusBar-TextItem", has_text=re.compile(r"\| (Idle|Busy)"))


def output_text(nb: NotebookPage, index: int) -> str:
    """Everything cell ``index``'s output area holds (``textContent``, so closed ``<details>`` count)."""
    return str(nb.cell(index).locator(".jp-OutputArea").text_content() or "")


def tool(output: Any, command: str) -> Any:
    """The ``<details>`` of the tool call whose summary names ``command``."""
    return output.locator("details").filter(has=output.page.locator("summary", has_text=command))


def test_background_turn_streams_into_its_cell_while_others_run(
    browser: Any, lab: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, lab, STEER_NOTEBOOK).open()
        nb.run(0)

        background = nb.run(1)  # returns at once: the turn runs on the agent thread
        steered = nb.run(2)
        expect(steered).to_contain_text("steered into the running turn")
        print(f"\n[steer] background cell after the steering cell: {output_text(nb, 1)!r}")
        start_cell(nb, 3, running=True)

        # The cell shows its execution count at once, but its footer says the turn is still running.
        footer = background.locator("sub.dsh-turn-footer")
        expect(footer.locator(".dsh-turn-status")).to_have_text("● running")
        expect(footer).to_contain_text(" · offline · since ")

        # (a) While cell 4 runs, the background cell shows the tool call, then its result.
        call = tool(background, "sleep 3; echo slow-job-finished")
        expect(call).to_have_count(1)
        expect(call.locator("summary code")).to_have_text("bash · sleep 3; echo slow-job-finished")
        expect(call.locator("pre")).to_contain_text("slow-job-finished")
        expect(call.locator("summary")).to_contain_text("✓")
        assert running(nb, 3), "cell 4 ended before the background cell showed the tool result"
        print(f"[cell 4 running] background cell: {output_text(nb, 1)!r}")
        nb.screenshot(request, "1-while-cell-4-runs")

        release(lab.root / FOLDER, "tool-result-seen")
        finished_cell(nb, 3)
        nb.run(4)  # %dsh wait
        # (b) The final answer, in the background cell, answers the steered prompt.
        answer = background.locator(".jp-RenderedHTMLCommon", has=page.locator("sub.dsh-turn-footer"))
        expect(answer).to_have_count(1)  # one handle, updated in place
        expect(answer).to_contain_text(f"You asked: “{STEER_PROMPT}”")
        expect(footer).to_have_count(1)
        expect(footer.locator(".dsh-turn-status")).to_have_text("✓ done")
        expect(footer).to_have_text(re.compile(r"^✓ done · .+ \([0-9a-f]{8}\) · offline · \d+\.\d s · tokens "))
        expect(answer).to_contain_text("Offline model (no API key needed)")
        background.scroll_into_view_if_needed()
        nb.screenshot(request, "2-after-wait")
        print(f"[after %dsh wait] background cell: {output_text(nb, 1)!r}")
        print(f"[after %dsh wait] cells 3-5: {[output_text(nb, i) for i in (2, 3, 4)]!r}")

        # (c) Nothing of the background turn leaked into the cells that ran meanwhile.
        steered_outputs = steered.locator(".jp-OutputArea-output")
        expect(steered_outputs).to_have_count(1)
        expect(steered_outputs).to_have_text(re.compile(r"^↪ steered into the running turn of session \S+\s*$"))
        for index in (2, 3, 4):
            text = output_text(nb, index)
            for leaked in ("slow-job-finished", "Offline model", "You asked", "…"):
                assert leaked not in text, f"cell {index + 1} shows {leaked!r} from the background turn: {text!r}"
        expect(nb.cell(3).locator(".jp-OutputArea-output")).to_have_count(0)
        expect(nb.cell(4).locator(".jp-OutputArea-output")).to_have_count(0)

        assert watch.dialogs == []
        assert watch.errors == []


def test_background_turn_that_ends_while_the_kernel_is_idle(
    browser: Any, lab: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, lab, IDLE_NOTEBOOK).open()
        nb.run(0)
        background = nb.run(1)
        expect(kernel_status(nb)).to_have_text(re.compile(r"\| Idle$"))
        # The scenario needs the turn to end with no cell running: wait (running nothing) until its log says it ended.
        session_logged(lab.root / FOLDER, TURN_END)
        idle_text = output_text(nb, 1)
        nb.screenshot(request, "1-idle-after-finish")
        # What the kernel sent while idle travelled under the last request's parent (this cell's);
        # JupyterLab routes a display update by its display id to the cell that made the display.
        print(f"\n[idle] background cell once its turn ended with no cell running: {idle_text!r}")

        expect(nb.run(2).locator(".jp-OutputArea-output")).to_have_text("2")
        answer = background.locator(".jp-RenderedHTMLCommon", has=page.locator("sub.dsh-turn-footer"))
        expect(answer).to_have_count(1)
        expect(answer.locator("sub.dsh-turn-footer .dsh-turn-status")).to_have_text("✓ done")
        call = tool(background, "sleep 2; echo idle-finish")
        expect(call.locator("pre")).to_contain_text("idle-finish")
        expect(call.locator("summary")).to_contain_text("✓")
        expect(answer).to_contain_text(TOOL_SUMMARY)
        expect(answer).to_contain_text("That's the result")
        nb.screenshot(request, "2-after-next-cell")
        # The next cell shows only its own result.
        expect(nb.cell(2).locator(".jp-OutputArea-output")).to_have_count(1)
        assert "idle-finish" not in output_text(nb, 2)

        assert watch.dialogs == []
        assert watch.errors == []
