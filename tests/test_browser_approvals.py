"""In a real browser (JupyterLab and Notebook 7): the agent asks before it acts, and the answer arrives.

The default approval mode is ``ask``: a ``/bash`` line of the offline model shows the question in the
running cell's own output. The foreground cell blocks the kernel's main thread, so these tests also show
that the answer reaches the kernel during a blocking cell (through the approval subshell). Checked:
Allow once runs the command; Deny with a reason sends that reason to the model (the offline model quotes
the tool result it got); Allow for this session stops the questions for that tool until the session
changes; a PreToolUse hook that answers "ask" shows the question with the hook's reason; Escape denies
from the keyboard; a ``--bg`` turn asks in its own cell while another cell runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    APPS,
    JupyterServer,
    NotebookPage,
    finished_cell,
    held_cell,
    release,
    serve,
    start_cell,
    watched_page,
    write_notebook,
)

FOLDER = "work"
FOREGROUND = f"{FOLDER}/ask.ipynb"
BACKGROUND = f"{FOLDER}/ask-bg.ipynb"
SCRIPTS = Path(__file__).parent / "hook_scripts"
QUESTION = ".dsh-approval-card:not([hidden])"
#: How long a question may take to appear (the first one also creates the kernel's answer subshell).
QUESTION_MS = 30_000


def foreground_cells(hooks: Path) -> tuple[str, ...]:
    return (
        f"%load_ext dsh_jupyter\n%config DshMagics.claude_hooks = {str(hooks)!r}",
        "%%dsh\nMake a file.\n/bash touch once.txt",
        "%%dsh\n/bash touch denied.txt",
        "%%dsh\n/bash echo first-granted",
        "%%dsh\n/bash echo second-granted",
        "%dsh new",
        "%%dsh\n/bash echo after-new",
        "%%dsh\n/bash git push origin main",
    )


BACKGROUND_CELLS = (
    "%load_ext dsh_jupyter",
    "%%dsh --bg\n/bash touch bg.txt; echo bg-done",
    held_cell("bg-checked"),  # runs until the test has seen the background turn's answer
)


def write_notebooks(root: Path, _state: Path) -> None:
    hooks = root / "claude-settings.json"
    group = {"matcher": "bash", "hooks": [{"type": "command",
                                           "command": f"{sys.executable} {SCRIPTS / 'guard_commands.py'}"}]}
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    write_notebook(root / FOREGROUND, *foreground_cells(hooks))
    write_notebook(root / BACKGROUND, *BACKGROUND_CELLS)


@pytest.fixture(scope="module", params=APPS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from serve(request.param, tmp_path_factory, "approvals", write_notebooks)


def question(output: Any) -> Any:
    from playwright.sync_api import expect

    card = output.locator(QUESTION)
    expect(card).to_be_visible(timeout=QUESTION_MS)
    return card


def tool_summary(output: Any, command: str) -> Any:
    return output.locator("details summary").filter(has_text=command)


def assert_note_on_the_summary_baseline(summary: Any) -> None:
    """The approval note ("allowed once by you") sits on the tool summary's baseline, not below it."""
    placed = summary.evaluate("""summary => {
        const note = summary.querySelector('.dsh-tool-note');
        const code = summary.querySelector('code');
        if (!note || !code) { return null; }
        const line = el => { const r = el.getBoundingClientRect(); return r.bottom; };
        return { align: getComputedStyle(note).verticalAlign, noteBottom: line(note), codeBottom: line(code) };
    }""")
    assert placed is not None, "the tool summary has no approval note beside its code"
    assert placed["align"] == "baseline", placed
    assert abs(placed["noteBottom"] - placed["codeBottom"]) <= 3, placed


def test_questions_in_a_blocking_cell(browser: Any, server: JupyterServer, request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    work = server.root / FOLDER
    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, FOREGROUND).open()
        nb.run(0)

        # Allow once (from the keyboard: focus is on Allow once, Enter activates it).
        output = start_cell(nb, 1)
        card = question(output)
        expect(card.locator("pre")).to_have_text("touch once.txt")
        expect(card.locator("button")).to_have_text(
            ["Allow once", "Allow bash for this session", "Allow commands starting with touch", "Deny"])
        expect(card.locator("button.dsh-approval-once")).to_be_focused()
        nb.screenshot(request, "1-question")
        page.keyboard.press("Enter")
        output = finished_cell(nb, 1)
        expect(tool_summary(output, "touch once.txt")).to_contain_text("allowed once by you")
        expect(output.locator(".dsh-approval")).to_have_text("")  # the decision is shown once: on the tool line
        expect(output).not_to_contain_text("bash `touch once.txt`: allowed once by you")
        assert_note_on_the_summary_baseline(tool_summary(output, "touch once.txt"))
        assert (work / "once.txt").exists()
        nb.screenshot(request, "2-allowed-once")

        # Deny with a reason: the model receives it.
        output = start_cell(nb, 2)
        card = question(output)
        card.locator("input.dsh-approval-why").fill("not in this folder")
        card.locator("button.dsh-approval-deny").click()
        output = finished_cell(nb, 2)
        expect(output).to_contain_text("the user denied it: not in this folder")
        expect(tool_summary(output, "touch denied.txt")).to_contain_text("refused by you: not in this folder")
        assert not (work / "denied.txt").exists()

        # Allow for this session: the next bash call runs without a question.
        output = start_cell(nb, 3)
        question(output).locator("button.dsh-approval-session").click()
        output = finished_cell(nb, 3)
        expect(tool_summary(output, "echo first-granted")).to_contain_text("allowed for this session by you")
        output = nb.run(4)
        expect(output.locator("details pre").first).to_contain_text("second-granted")
        expect(tool_summary(output, "echo second-granted")).to_contain_text("allowed for this session")
        expect(output.locator(".dsh-approval")).to_have_count(0)

        # A new session asks again; Escape denies from the keyboard.
        nb.run(5)
        output = start_cell(nb, 6)
        expect(question(output).locator("button.dsh-approval-once")).to_be_focused()
        page.keyboard.press("Escape")
        output = finished_cell(nb, 6)
        expect(tool_summary(output, "echo after-new")).to_contain_text("refused by you")

        # A PreToolUse hook that answers "ask" shows the question with the hook's reason.
        output = start_cell(nb, 7)
        card = question(output)
        expect(card.locator(".dsh-approval-reason")).to_have_text("pushing needs a human")
        expect(card.locator("pre")).to_have_text("git push origin main")
        card.scroll_into_view_if_needed()
        nb.screenshot(request, "3-hook-asks")
        card.locator("button.dsh-approval-deny").click()
        output = finished_cell(nb, 7)
        expect(tool_summary(output, "git push origin main")).to_contain_text("refused by you")

        assert watch.dialogs == []
        assert watch.errors == []


def test_a_background_turn_asks_in_its_own_cell_while_another_runs(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    work = server.root / FOLDER
    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, BACKGROUND).open()
        nb.run(0)
        background = nb.run(1)  # returns at once
        sleeping = start_cell(nb, 2)
        card = question(background)
        expect(card.locator("pre")).to_contain_text("touch bg.txt; echo bg-done")
        expect(sleeping.locator(".dsh-approval")).to_have_count(0)
        nb.screenshot(request, "1-background-question")
        card.locator("button.dsh-approval-once").click()
        line = background.locator("details summary").filter(has_text="touch bg.txt")
        expect(line).to_contain_text("allowed once by you", timeout=QUESTION_MS)
        expect(line).to_contain_text("✓", timeout=QUESTION_MS)  # it ran
        assert nb.cell(2).locator(".jp-InputArea-prompt").inner_text().strip().startswith("[*]"), \
            "the other cell ended before the background turn got its answer"
        assert (work / "bg.txt").exists()
        nb.screenshot(request, "2-background-allowed")
        release(work, "bg-checked")
        finished_cell(nb, 2)
        assert watch.dialogs == []
        assert watch.errors == []
