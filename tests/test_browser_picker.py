"""In a real browser, in JupyterLab 4 and Notebook 7: the anywidget session picker of ``%dsh pick`` filters as
you type (the search runs in Python) and inserts the chosen session's mention into the prompt box, by keyboard
and by click. The box shows each mention as a chip reading ``@label`` (what it names on hover) while the text
it sends keeps the markup; one Backspace removes a chip whole, the caret steps over it, copy gives the markup.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TIMEOUT_MS,
    JupyterServer,
    NotebookPage,
    copied_text,
    let_go,
    serve,
    watched_page,
    write_notebook,
    write_session,
)

from dsh_jupyter.references.mentions import format_session_reference_mention

NOTEBOOK = "work/picker.ipynb"
SESSIONS = [  # (id, title, created_at); the first two live in the notebook's folder
    ("analysis-1", "Quarterly revenue analysis", 1_787_000_000_000),
    ("cleanup-2", "Data cleanup notes", 1_787_000_100_000),
    ("other-3", "Unrelated experiment", 1_787_000_200_000),
]
CHECK = """\
print("query:", repr(panel.picker.query))
print("results:", [row["sessionId"] for row in panel.picker.results])
print("selected:", panel.picker.selected)
print("value:", repr(panel.prompt.value))"""
#: Makes each pick come back from the kernel 2 s late, as on a loaded machine: keys typed meanwhile reach the box
#: before the kernel's insertion does.
SLOW_PICKS = """\
import time
pick = panel.picker.choose
panel.picker.choose = lambda which: (time.sleep(2), pick(which))[1]"""
#: Holds each prompt sent from the box in the kernel until the test makes the file ``go`` beside the notebook
#: (:func:`let_go`; at most 30 s). A running cell would not hold it: widget messages need not wait behind one
#: (ipykernel hands them to the thread their comm last sent from), so it is held where the box's command takes it.
SEND_ON_GO = """\
import pathlib, time
send = panel.prompt.submit
def send_on_go(sent=None, go=pathlib.Path("go")):
    for _ in range(600):
        if go.exists():
            break
        time.sleep(0.05)
    go.unlink(missing_ok=True)
    return send(sent)
panel.prompt.submit = send_on_go"""
#: Makes the kernel take 2 s over the next caret position the box sends: the box's updates that follow are held back
#: in the page meanwhile (ipywidgets sends a model's next update once the kernel is done with the one before), while a
#: pick (another widget's command) goes out at once and reaches the kernel before them.
SLOW_CARET = """\
import time
def slow_once(change, slept=[]):
    if not slept:
        slept.append(change["new"])
        time.sleep(2)
panel.prompt.observe(slow_once, "cursor")"""


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, _state: Path) -> None:
        folder = root / "work"
        here = os.path.realpath(folder)
        for session_id, title, created_at in SESSIONS:
            cwd = "/elsewhere" if session_id == "other-3" else here
            write_session(folder, session_id, title, cwd=cwd, created_at=created_at)
        write_notebook(root / NOTEBOOK, "%load_ext dsh_jupyter", "panel = %dsh pick\npanel", CHECK,
                       SLOW_PICKS, SEND_ON_GO, SLOW_CARET, "")  # the empty cell: a run of the last one selects it

    yield from serve(request.param, tmp_path_factory, "picker", prepare)



def test_picker_filters_in_python_and_inserts_mentions(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        widgets = nb.run(1)
        prompt = widgets.locator(".dsh-prompt-input")
        search = widgets.locator("input.dsh-picker-input")
        rows = widgets.locator("li.dsh-picker-row")
        labels = rows.locator(".dsh-picker-label")
        expect(prompt).to_be_visible()
        expect(search).to_be_visible()
        # Unfiltered: every session, this folder first (newest first), then the others.
        expect(labels).to_have_text(["Data cleanup notes", "Quarterly revenue analysis", "Unrelated experiment"])
        expect(rows.first.locator(".dsh-picker-same")).to_be_visible()
        nb.screenshot(request, "1-picker")

        prompt.click()
        page.keyboard.type("Compare ")

        # Each keystroke asks Python (search_command); the rows follow what was typed.
        search.click()
        page.keyboard.type("u")
        expect(labels).to_have_count(3)
        page.keyboard.type("a")
        expect(labels).to_have_text(["Quarterly revenue analysis"])
        expect(rows.first).to_have_attribute("aria-selected", "true")
        nb.screenshot(request, "2-filtered")
        page.keyboard.press("Enter")  # keyboard choice of the highlighted row
        first = format_session_reference_mention("analysis-1", "Quarterly revenue analysis")
        expect(prompt).to_have_js_property("value", f"Compare {first} ")
        # The box shows the mention as a chip, not its markup; hovering it says what it names.
        chips = prompt.locator(".jp-DshChip")
        expect(chips).to_have_text(["@Quarterly revenue analysis"])
        expect(chips.first).to_have_attribute("title", "Quarterly revenue analysis: session analysis-1")
        assert "dsh-session:" not in prompt.inner_text()
        assert prompt.inner_text().replace("\xa0", " ").strip() == "Compare @Quarterly revenue analysis"
        search.click()

        page.keyboard.press("Escape")  # clears the search: all rows again
        expect(labels).to_have_count(3)
        page.keyboard.type("clean")
        expect(labels).to_have_text(["Data cleanup notes"])
        rows.first.click()  # mouse choice
        second = format_session_reference_mention("cleanup-2", "Data cleanup notes")
        expect(prompt).to_have_js_property("value", f"Compare {first} {second} ")
        expect(widgets.locator(".dsh-picker-status")).to_have_text("Inserted Data cleanup notes")
        expect(chips).to_have_text(["@Quarterly revenue analysis", "@Data cleanup notes"])
        box = prompt.bounding_box()
        assert box is not None and box["height"] < 120, box  # one line of chips: no sideways scroll, no markup
        nb.screenshot(request, "3-inserted")

        # Copy gives the markup (what the kernel resolves), not the chips' `@label`.
        prompt.click()
        page.keyboard.press("Control+a")
        copied = copied_text(prompt)
        assert copied == f"Compare {first} {second} ", copied

        # The caret steps over a chip whole: from the start, 8 steps pass "Compare ", the 9th the chip.
        page.keyboard.press("Control+Home")
        for _ in range(9):
            page.keyboard.press("ArrowRight")
        page.keyboard.type("!?")  # two keys: each goes after the one before
        expect(prompt).to_have_js_property("value", f"Compare {first}!? {second} ")
        # One Backspace after a chip removes the whole mention (never part of its markup).
        page.keyboard.press("Control+End")
        page.keyboard.press("Backspace")  # the space after the second chip
        page.keyboard.press("Backspace")  # the second chip, whole
        expect(prompt).to_have_js_property("value", f"Compare {first}!? ")
        expect(chips).to_have_text(["@Quarterly revenue analysis"])
        page.keyboard.press("Control+Home")
        for _ in range(8):
            page.keyboard.press("ArrowRight")
        page.keyboard.press("Delete")  # Delete before a chip removes it whole too
        expect(prompt).to_have_js_property("value", "Compare !? ")
        expect(chips).to_have_count(0)
        # Typed back, the mentions come back as chips in the same box.
        search.click()
        page.keyboard.press("Escape")
        page.keyboard.type("clean")
        expect(labels).to_have_text(["Data cleanup notes"])
        rows.first.click()
        expect(chips).to_have_text(["@Data cleanup notes"])

        # Python holds the same state: the query typed, the filtered results, the chosen mentions.
        output = nb.run(2)
        expect(output).to_contain_text("query: 'clean'")
        expect(output).to_contain_text("results: ['cleanup-2']")
        expect(output).to_contain_text(f"selected: {[first, second]!r}")
        expect(output).to_contain_text(f"value: {f'Compare {second} !? '!r}")
        nb.screenshot(request, "4-python-state")

        # A pick that comes back late reaches the box after the keys typed since: they stay (the kernel's insertion,
        # at the caret the page showed when the row was clicked, is merged into what the box shows, never put in
        # its place).
        nb.run(3)
        rows.first.click()  # "Data cleanup notes" again, back 2 s later
        prompt.click()
        page.keyboard.press("Control+End")
        page.keyboard.type("which grew?")
        merged = f"Compare {second} {second} !? which grew?"  # after the chip: the caret the last pick left
        expect(prompt).to_have_js_property("value", merged)
        expect(chips).to_have_text(["@Data cleanup notes", "@Data cleanup notes"])
        nb.screenshot(request, "5-picked-late")
        output = nb.run(2)
        expect(output).to_contain_text(f"value: {merged!r}")  # the kernel holds the merged text too

        # A prompt the kernel refuses once it has left the box comes back above what was typed since. Held in the
        # kernel, its refusal (no such session) comes after the next keys were typed in the page.
        prompt.click()
        page.keyboard.press("Control+a")
        page.keyboard.press("Backspace")
        expect(prompt).to_have_js_property("value", "")  # the <br> the browser leaves in an emptied box is no text
        expect(prompt).to_have_class(re.compile(r"\bdsh-empty\b"))  # so the grey hint is back
        gone = format_session_reference_mention("gone-9", "Deleted notes")
        prompt.evaluate("(box, text) => { box.focus(); document.execCommand('insertText', false, text); }",
                        f"summarise {gone}")
        expect(prompt).to_have_js_property("value", f"summarise {gone}")
        nb.run(4)  # prompts wait in the kernel for `go`
        widgets.locator(".dsh-prompt-send").click()
        expect(prompt).to_have_js_property("value", "")
        prompt.press_sequentially("then plot it")
        expect(prompt).to_have_js_property("value", "then plot it")  # the kernel has not answered yet
        let_go(server.root / "work")  # the kernel goes on: the prompt, refused, comes back now
        given_back = f"summarise {gone}\nthen plot it"
        status = widgets.locator(".dsh-prompt-status")
        expect(status).to_contain_text("your prompt is back in the box", timeout=KERNEL_TIMEOUT_MS)
        expect(prompt).to_have_js_property("value", given_back)
        nb.screenshot(request, "6-given-back")
        output = nb.run(2)
        expect(output).to_contain_text(f"value: {given_back!r}")

        # A pick made while keys typed in the box are still on their way: the kernel inserts the mention into the text
        # the page showed, then gets the box's older text, from before the insertion. The insertion stays.
        nb.run(5)
        prompt.click()
        page.keyboard.press("Control+Home")  # the caret's move: the kernel takes 2 s over it
        page.keyboard.type("Also ")  # held back in the page until then
        rows.first.click()  # "Data cleanup notes": goes out at once
        also = f"Also {second} {given_back}"
        expect(prompt).to_have_js_property("value", also, timeout=KERNEL_TIMEOUT_MS)
        expect(chips).to_have_text(["@Data cleanup notes", "@Deleted notes"])
        output = nb.run(2)
        expect(output).to_contain_text(f"value: {also!r}")
        expect(prompt).to_have_js_property("value", also)
        nb.screenshot(request, "7-picked-while-typing")

        assert watch.dialogs == []
        assert watch.errors == []
