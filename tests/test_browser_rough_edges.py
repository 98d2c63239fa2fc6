"""In a real browser, in JupyterLab and in Notebook 7: the rough edges a new user met (issue 22).

- a prompt sent twice quickly from the chat panel (and the pick panel) reaches the agent as two prompts,
  and the box is empty after each send (it once kept the text just sent, so the next prompt was glued on);
- the `@` popup never offers the notebook's own current session, with or without a filter typed, even
  when the kernel answers "which session is yours?" late (the server leaves it out as well);
- a notebook opened again in a second page does not take the agent's reads and edits from the page that runs
  the cells (the stale copy: no outputs, proposals that never showed, edits "running" until they timed out);
- a notebook saved while a turn runs does not keep "● running" in the file: reopened or turned into HTML it
  says "unfinished when saved" (the page keeps its live footer, and the save after the turn ends writes "✓ done");
- brackets in a `%%dsh` cell (`['north', 'south']`) are not styled as a Markdown link;
- a mention in a `%%dsh` cell shows as a chip reading `@label` (the source keeps the markup, the cell does
  not scroll sideways) that Backspace removes whole; screenshots light and dark.

Each test runs in both apps, one server per app (module scope).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TIMEOUT_MS,
    JupyterServer,
    NotebookPage,
    finished_cell,
    read_saved_notebook,
    serve,
    start_cell,
    watched_page,
    write_notebook,
    write_session,
)

from dsh_jupyter.references.mentions import format_session_reference_mention

FOLDER = "work"
PROMPTS_NOTEBOOK = f"{FOLDER}/prompts.ipynb"
PROMPT_CELLS = (
    "%load_ext dsh_jupyter",
    "chat = %dsh chat\nchat",
    "pick = %dsh pick\npick",
)
POPUP_NOTEBOOK = f"{FOLDER}/popup.ipynb"
#: The kernel's answer to the popup's question comes after the popup stopped waiting (0.8 s).
SLOW_ANSWER = """\
import time
_comms = get_ipython().kernel.comm_manager
_answer = globals().setdefault("_prompt_answer", _comms.targets["dsh.current-session"])  # once, also on a rerun
def _late(comm, message):
    time.sleep(1.0)
    _answer(comm, message)
_comms.register_target("dsh.current-session", _late)"""
POPUP_CELLS = (
    "%load_ext dsh_jupyter",
    "%%dsh\nMissing values in my table?",
    SLOW_ANSWER,
    "%%dsh\nCompare with ",
)
OTHER_TITLE = "Missing data report"
FRESH_NOTEBOOK = f"{FOLDER}/fresh.ipynb"
FRESH_CELLS = (
    "%load_ext dsh_jupyter",
    "x = 41\nprint('x is', x)",
    "%%dsh\n/tool notebook_read {}",
    "%%dsh\n/tool notebook_edit " + json.dumps({"action": "insert", "source": "y = x + 1"}),
)
SAVED_NOTEBOOK = f"{FOLDER}/saved-mid-turn.ipynb"
#: A turn that runs until its question is answered: the notebook is saved meanwhile.
SAVED_CELLS = ("%load_ext dsh_jupyter", "%%dsh\nWait for me\n/bash echo answered", "1 + 1")
CHIPS_NOTEBOOK = f"{FOLDER}/chips.ipynb"
#: A long id, as real ones are: its raw markup is far wider than the cell.
LONG_ID = "quarterly-revenue-" + "0123456789abcdef" * 6
MENTION = format_session_reference_mention(LONG_ID, "Quarterly revenue")
#: Brackets Markdown would read as a link: a `%%dsh` prompt is not rendered, so they are plain text there.
BRACKETS = "Compare ['north', 'south'] by region"
CHIP_CELLS = (f"%%dsh\nCompare {MENTION} with last year", "print('a plain cell: @[x](dsh-session:Ingi) stays text')",
              f"%%dsh\n{BRACKETS}")


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, _state: Path) -> None:
        folder = root / FOLDER
        write_session(folder, "missing-1", OTHER_TITLE, cwd=os.path.realpath(folder), created_at=1_787_000_000_000)
        write_notebook(root / PROMPTS_NOTEBOOK, *PROMPT_CELLS)
        write_notebook(root / POPUP_NOTEBOOK, *POPUP_CELLS)
        write_notebook(root / CHIPS_NOTEBOOK, *CHIP_CELLS)
        write_notebook(root / FRESH_NOTEBOOK, *FRESH_CELLS)
        write_notebook(root / SAVED_NOTEBOOK, *SAVED_CELLS)

    yield from serve(request.param, tmp_path_factory, "rough", prepare)


def _send_twice_quickly(page: Any, panel: Any, first: str, second: str) -> None:
    """Type and send ``first``, then at once type and send ``second`` (no wait for the kernel between)."""
    from playwright.sync_api import expect

    area = panel.locator(".dsh-prompt-input")
    area.click()
    page.keyboard.type(first)
    page.keyboard.press("Control+Enter")
    page.keyboard.type(second)
    page.keyboard.press("Control+Enter")
    user = panel.locator(".dsh-chat-user .dsh-chat-text")
    try:
        expect(user).to_have_count(2, timeout=KERNEL_TIMEOUT_MS / 3)
    except AssertionError:
        raise AssertionError(f"the agent received {user.all_inner_texts()!r}; the box holds "
                             f"{area.evaluate('el => el.value')!r}; the panel reads {panel.inner_text()!r}") from None
    expect(panel.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)
    assert user.all_inner_texts() == [first, second]
    expect(area).to_have_js_property("value", "")


def _assert_compact_picker(chat: Any) -> None:
    """The chat panel's picker is compact: search box and bodies switch on one line, at most three results
    shown at once, and the conversation has most of the panel."""
    picker = chat.locator(".dsh-picker")
    search = picker.locator(".dsh-picker-input").bounding_box()
    switch = picker.locator(".dsh-picker-body").bounding_box()
    assert search is not None and switch is not None
    assert abs((search["y"] + search["height"] / 2) - (switch["y"] + switch["height"] / 2)) < 8, (search, switch)
    rows = picker.evaluate("""picker => {
        const list = picker.querySelector('.dsh-picker-list');
        return parseFloat(getComputedStyle(list).maxHeight) / parseFloat(getComputedStyle(list).fontSize);
    }""")
    assert rows <= 8, f"the picker's list may grow to {rows} em"
    box, panel = picker.bounding_box(), chat.bounding_box()
    transcript = chat.locator(".dsh-chat").bounding_box()
    assert box is not None and panel is not None and transcript is not None
    assert box["height"] < 0.2 * panel["height"] and transcript["height"] > 2 * box["height"], (box, panel)


def test_prompts_sent_twice_quickly_arrive_as_two_and_leave_the_box_empty(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, PROMPTS_NOTEBOOK).open()
        nb.run(0)
        chat = nb.run(1).locator(".dsh-panel")
        expect(chat.locator(".dsh-prompt-input")).to_be_visible()
        _send_twice_quickly(page, chat, "first prompt", "second prompt")
        nb.screenshot(request, "1-chat-two-prompts")
        _assert_compact_picker(chat)

        pick = nb.run(2).locator(".dsh-panel")
        expect(pick.locator(".dsh-prompt-input")).to_be_visible()
        _send_twice_quickly(page, pick, "third prompt", "fourth prompt")
        nb.screenshot(request, "2-pick-two-prompts")

        assert watch.dialogs == []
        assert watch.errors == []


def test_the_popup_never_offers_the_notebooks_own_session(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, POPUP_NOTEBOOK).open()
        nb.run(0)
        expect(nb.run(1)).to_contain_text("Missing values in my table?")
        nb.run(2)
        page.wait_for_timeout(1500)  # the kernel's late answer to the question asked after that cell

        popup = page.locator(".jp-Completer")
        sessions = popup.locator(".jp-DshCompleter-session")
        titles = sessions.locator(".jp-DshCompleter-title")
        nb.focus_end(3)
        page.keyboard.type("@")
        expect(titles.filter(has_text=OTHER_TITLE)).to_have_count(1)
        shown = titles.all_inner_texts()
        assert not [title for title in shown if title.startswith("Missing values")], shown
        page.keyboard.press("Escape")
        expect(popup).to_be_hidden()

        # A filter that matches the current session's title too: still only the other one.
        nb.focus_end(3)
        page.keyboard.press("Backspace")
        page.keyboard.type("@miss")
        expect(titles).to_have_text([OTHER_TITLE])
        nb.screenshot(request, "1-popup-without-own-session")
        page.keyboard.press("Escape")

        assert watch.dialogs == []
        assert watch.errors == []


def test_the_page_that_runs_the_cells_gets_the_reads_and_the_proposals(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, FRESH_NOTEBOOK).open()
        nb.run(0)
        expect(nb.run(1)).to_contain_text("x is 41")
        with watched_page(browser) as (other_page, other_watch):
            # The same notebook opened again (a second tab): it connects last, and holds no outputs.
            NotebookPage(other_page, server, FRESH_NOTEBOOK).open()
            other_page.wait_for_selector(".jp-NotebookPanel[data-dsh-live='connected']", state="attached")
            # Back in the first page, at once: the agent reads the notebook as this page shows it...
            read = nb.run(2)
            expect(read).to_contain_text("notebook_read")
            seen = str(read.text_content())  # the tool's result, folded away under its line
            assert "x is 41" in seen, f"the agent read a copy without the outputs this page shows: {seen[-600:]!r}"
            # ...and its proposal appears here (and in the other page, as every page of a notebook shows it);
            # the answer given here decides, and the other page's card goes.
            nb.click_editor(3)
            page.keyboard.press("Shift+Enter")
            card = page.locator(f"{nb.scope} .dsh-proposal")
            expect(card).to_be_visible(timeout=30_000)
            expect(other_page.locator(".dsh-proposal")).to_have_count(1)
            nb.screenshot(request, "1-proposal-in-the-working-page")
            card.locator("button.dsh-proposal-accept").click()
            expect(other_page.locator(".dsh-proposal")).to_have_count(0)
            expect(nb.cell(3).locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=60_000)
            expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("Inserted a new code cell")
            assert other_watch.errors == []

        assert watch.dialogs == []
        assert watch.errors == []


def _saved(nb: NotebookPage) -> dict[str, Any]:
    """Save the notebook (Ctrl+S) and return it as the server wrote it."""
    path = nb.server.root / nb.path
    before = path.stat().st_mtime_ns
    nb.page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        data = read_saved_notebook(path) if path.stat().st_mtime_ns != before else None
        if data is not None:
            return data
        time.sleep(0.2)
    raise AssertionError(f"{nb.path} was not saved within 30 s; the server said:\n{nb.server.log_tail()}")


def _saved_sources(nb: NotebookPage) -> list[str]:
    """Save the notebook (Ctrl+S) and return its cells' sources as the server wrote them."""
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in _saved(nb)["cells"]]


def _output_texts(cell: dict[str, Any]) -> str:
    """Every text/html and text/plain of a saved cell's outputs, one string."""
    parts: list[str] = []
    for output in cell.get("outputs", []):
        for mime in ("text/html", "text/plain"):
            value = output.get("data", {}).get(mime, "")
            parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


def test_a_notebook_saved_mid_turn_does_not_claim_the_turn_still_runs(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from nbconvert import HTMLExporter
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, SAVED_NOTEBOOK).open()
        nb.run(0)
        output = start_cell(nb, 1)
        card = output.locator(".dsh-approval-card:not([hidden])")
        expect(card).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        status = output.locator("sub.dsh-turn-footer .dsh-turn-status")
        expect(status).to_have_text("● running")
        nb.click_editor(2)  # out of the question (it keeps its keys to itself)
        saved = _output_texts(_saved(nb)["cells"][1])
        assert "● running" not in saved and "○ unfinished when saved" in saved, saved
        expect(status).to_have_text("● running")  # the page still shows the live footer
        body, _ = HTMLExporter().from_filename(str(server.root / SAVED_NOTEBOOK))
        assert "● running" not in body and "unfinished when saved" in body
        nb.screenshot(request, "1-saved-mid-turn")

        card.locator("button.dsh-approval-once").click()
        finished_cell(nb, 1)
        expect(status).to_have_text("✓ done", timeout=KERNEL_TIMEOUT_MS)
        nb.click_editor(2)
        saved = _output_texts(_saved(nb)["cells"][1])
        assert "✓ done" in saved and "unfinished" not in saved, saved  # the save after the end: the final footer
        assert watch.errors == []


def _switch_theme(page: Any, name: str) -> None:
    """Settings → Theme → ``name`` (JupyterLab and Notebook 7 have the same menu)."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(name)}$")).click()
    light = "true" if "Light" in name else "false"
    page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached")
    page.wait_for_timeout(500)  # the theme's stylesheet applied


def test_a_mention_in_a_dsh_cell_is_a_chip(browser: Any, server: JupyterServer, request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, CHIPS_NOTEBOOK).open()
        cell = nb.cell(0)
        chip = cell.locator(".cm-content .jp-DshChip")
        expect(chip).to_have_count(1)
        expect(chip).to_have_text("@Quarterly revenue")
        assert LONG_ID in str(chip.get_attribute("title"))
        assert "dsh-session:" not in nb.shown_text(0)  # the editor shows the chip, not the markup
        assert nb.shown_text(0).startswith("%%dsh\nCompare @Quarterly revenue with last year")
        scroller = cell.locator(".cm-scroller")
        assert scroller.evaluate("s => s.scrollWidth <= s.clientWidth + 1"), "the mention makes the cell scroll"
        # An ordinary cell shows markup as it is.
        expect(nb.cell(1).locator(".jp-DshChip")).to_have_count(0)
        cell.scroll_into_view_if_needed()
        cell.screenshot(path=str(nb.screenshot(request, "chip-light").with_name(
            nb.screenshot(request, "chip-light").stem + "-cell.png")))
        # The source keeps the markup the kernel resolves.
        nb.click_editor(0)
        assert _saved_sources(nb)[0] == CHIP_CELLS[0]

        if server.app == "lab":
            _switch_theme(page, "JupyterLab Dark")
            try:
                cell.screenshot(path=str(nb.screenshot(request, "chip-dark").with_name(
                    nb.screenshot(request, "chip-dark").stem + "-cell.png")))
            finally:
                _switch_theme(page, "JupyterLab Light")

        # The caret steps over the chip as one character, and Backspace after it removes it whole.
        nb.click_editor(0)
        page.keyboard.press("Control+Home")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("End")
        for _ in range(len(" with last year")):
            page.keyboard.press("Backspace")
        expect(chip).to_have_count(1)
        page.keyboard.press("Backspace")  # the chip, whole
        expect(chip).to_have_count(0)
        assert _saved_sources(nb)[0] == "%%dsh\nCompare "

        assert watch.dialogs == []
        assert watch.errors == []


def test_brackets_in_a_dsh_cell_are_not_styled_as_a_link(browser: Any, server: JupyterServer,
                                                         request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, CHIPS_NOTEBOOK).open()
        content = nb.cell(2).locator(".cm-content")
        expect(content).to_have_attribute("data-language", "dsh-prompt")  # a prompt: Markdown without links
        expect(content).to_contain_text(BRACKETS)
        styled = content.evaluate("""content => {
            const plain = getComputedStyle(content);
            // Every element the text "north" sits in, from its own up to the line (plain text has none but
            // the line itself): none may be underlined or coloured as a link.
            const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
            const found = [];
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                if (!node.textContent.includes('north')) { continue; }
                for (let el = node.parentElement; el && el !== content; el = el.parentElement) {
                    const s = getComputedStyle(el);
                    found.push({ line: s.textDecorationLine, color: s.color, plain: plain.color, tag: el.className });
                }
            }
            return found;
        }""")
        assert styled, "the brackets are not in the editor"
        for span in styled:
            assert "underline" not in span["line"] and span["color"] == span["plain"], styled
        nb.cell(2).screenshot(path=str(nb.screenshot(request, "brackets").with_name(
            nb.screenshot(request, "brackets").stem + "-cell.png")))
        assert watch.errors == []
