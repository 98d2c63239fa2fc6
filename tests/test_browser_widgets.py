"""In a real browser, in JupyterLab and in Notebook 7: the chat panel and the ``%dsh pick`` panel.

- keys typed in a widget stay there: Enter and Shift+Enter make a newline, Ctrl+Enter sends, and the
  notebook neither runs the cell nor moves to another one;
- the box is empty after a send; the answer streams in under the prompt, rendered as Markdown, with
  the tool call as one expandable line; the header names the session, the model and the status;
- ``%dsh pick`` is one output (no stray prompt between its parts) and its Send's answer shows under it;
- after saving, restarting the kernel and reloading the page, each panel's output shows its
  conversation as a static copy, never a widget error.

Each test runs in both apps, one server per app (module scope), in the order written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    APPS,
    KERNEL_TIMEOUT_MS,
    JupyterServer,
    NotebookPage,
    boxes_of,
    read_saved_notebook,
    serve,
    watched_page,
    write_notebook,
    write_session,
)

NOTEBOOK = "work/widgets.ipynb"
CELLS = (
    "%load_ext dsh_jupyter",
    "chat = %dsh chat\nchat",
    "pick = %dsh pick Regional\npick",
    "print('cells ran:', 4)",
)
#: Typed into the chat box: three lines, the second calls the bash tool through the offline model.
LINES = ["Please **summarise** the data", "/bash echo tool-ran-$((6*7))", "thanks"]
PICK_QUESTION = "what was the total?"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module", params=APPS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, _state: Path) -> None:
        folder = root / "work"
        write_session(folder, "regional-1", "Regional sales Q3", cwd=os.path.realpath(folder),
                      created_at=1_787_000_000_000)
        write_notebook(root / NOTEBOOK, *CELLS)

    yield from serve(request.param, tmp_path_factory, "widgets", prepare)


def test_chat_keys_stay_in_the_widget_and_answers_render(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        out = nb.run(1)
        panel = out.locator(".dsh-panel")
        area = panel.locator(".dsh-prompt-input")
        expect(area).to_be_visible()
        expect(panel.locator(".dsh-chat-empty")).to_be_visible()
        expect(panel.locator(".dsh-chat-title")).to_have_text("New session")
        nb.screenshot(request, "1-empty-chat")

        cells_before, prompts_before = nb.page.locator(f"{nb.scope} .jp-Cell").count(), nb.prompt_numbers()
        area.click()
        page.keyboard.type(LINES[0])
        page.keyboard.press("Enter")
        page.keyboard.type(LINES[1])
        page.keyboard.press("Shift+Enter")  # inside the widget: a newline, never "run cell"
        page.keyboard.type(LINES[2])
        expect(area).to_have_js_property("value", "\n".join(LINES))
        assert nb.page.locator(f"{nb.scope} .jp-Cell").count() == cells_before
        assert nb.prompt_numbers() == prompts_before  # no cell ran (cell 2 would get a number)
        expect(nb.cell(1).locator(".dsh-chat-empty")).to_be_visible()  # the panel was not re-created
        nb.screenshot(request, "2-typed")

        page.keyboard.press("Control+Enter")
        expect(area).to_have_js_property("value", "")
        user = panel.locator(".dsh-chat-user")
        expect(user).to_contain_text("/bash echo tool-ran-$((6*7))")
        tool = panel.locator(".dsh-chat-tool")
        expect(tool.locator(".dsh-chat-tool-name")).to_have_text("bash")
        # The agent asks before it acts: the question appears inside the panel, above the prompt box.
        question = panel.locator(".dsh-approval-card:not([hidden])")
        expect(question).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        expect(question).to_contain_text("echo tool-ran-$((6*7))")
        nb.screenshot(request, "2b-question-in-chat")
        question.locator("button.dsh-approval-once").click()
        answer = panel.locator(".dsh-chat-assistant").last
        expect(answer).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        expect(panel.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)
        expect(answer).to_contain_text("tool-ran-42")
        # Rendered Markdown, not its source: code spans and the fenced block are elements, no backticks.
        expect(answer.locator("p code").first).to_have_text("bash")
        expect(answer.locator("pre code")).to_contain_text("tool-ran-42")
        assert "`" not in answer.inner_text()
        expect(panel.locator(".dsh-chat-title")).not_to_have_text("New session")
        expect(panel.locator(".dsh-chat-details")).to_contain_text("offline")
        tool.locator("summary").click()
        expect(tool.locator(".dsh-chat-tool-result")).to_contain_text("tool-ran-42")
        assert nb.prompt_numbers() == prompts_before
        nb.screenshot(request, "3-answered")

        assert watch.dialogs == []
        assert watch.errors == []


def test_pick_is_one_output_with_the_answer_under_it(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        out = nb.run(2)
        expect(out.locator(".dsh-panel")).to_be_visible()
        assert out.locator(".jp-OutputArea-child").count() == 1  # picker, box and answers in one output
        assert re.fullmatch(r"\s*", out.locator(".jp-OutputPrompt").first.inner_text())  # no [n]: between parts
        rows = out.locator("li.dsh-picker-row")
        expect(rows.locator(".dsh-picker-label")).to_have_text(["Regional sales Q3"])
        expect(out.locator(".dsh-chat")).to_be_hidden()  # no empty transcript before the first Send
        nb.screenshot(request, "1-pick")

        rows.first.click()
        area = out.locator(".dsh-prompt-input")
        expect(area.locator(".jp-DshChip")).to_have_text("@Regional sales Q3")  # the markup stays in the text sent
        assert re.fullmatch(r"@\[Regional sales Q3\]\(dsh-session:[^)]+\) ", area.evaluate("el => el.value"))
        area.click()
        page.keyboard.press("End")
        page.keyboard.type(PICK_QUESTION)
        out.locator("button.dsh-prompt-send").click()
        expect(area).to_have_js_property("value", "")
        answer = out.locator(".dsh-chat-assistant").last
        expect(answer).to_contain_text(PICK_QUESTION, timeout=KERNEL_TIMEOUT_MS)
        expect(answer).to_contain_text("Regional sales Q3")
        expect(out.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)
        # Under the picker and the box, in the same output.
        tops = [box["y"] for box in boxes_of(page, *(out.locator(sel) for sel in (".dsh-picker", ".dsh-prompt",
                                                                                   ".dsh-chat")))]
        assert tops == sorted(tops) and len(set(tops)) == 3, tops
        assert out.locator(".jp-OutputArea-child").count() == 1
        nb.screenshot(request, "2-answered")

        assert watch.dialogs == []
        assert watch.errors == []


def _save(nb: NotebookPage, expected: dict[int, str], *, live: bool) -> dict[str, Any]:
    """Save with Ctrl+S until the file holds, in each cell's one output, the text expected there (and
    the widget view beside it when ``live``, none otherwise)."""
    import time

    path = nb.server.root / nb.path
    saved: dict[str, Any] = {}
    for _attempt in range(3):
        nb.cell(0).locator(".jp-InputPrompt").click()  # command mode, focus in the notebook
        nb.page.keyboard.press("Control+s")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            saved = read_saved_notebook(path) or {}
            if saved and all(_copy_in(saved, index, words, live) for index, words in expected.items()):
                return saved
            time.sleep(0.25)
    raise AssertionError(f"the saved notebook lacks the expected copies {expected}: {saved.get('cells')}")


def _copy_in(saved: dict[str, Any], index: int, words: str, live: bool) -> bool:
    outputs = saved["cells"][index].get("outputs", [])
    if len(outputs) != 1:
        return False
    data = outputs[0].get("data", {})
    return (WIDGET_MIME in data) == live and all(words in "".join(data.get(mime, ""))
                                                 for mime in ("text/html", "text/plain"))


def _restart_kernel(nb: NotebookPage) -> None:
    """Kernel ▸ Restart Kernel… and confirm, as a person does."""
    nb.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
    nb.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel")).first.click()
    nb.page.locator(".jp-Dialog-button.jp-mod-accept").click()


def test_reload_after_a_kernel_restart_shows_the_static_copies(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        chat = nb.run(1)
        chat.locator(".dsh-prompt-input").click()
        page.keyboard.type("hello from the chat panel")
        page.keyboard.press("Control+Enter")
        expect(chat.locator(".dsh-chat-assistant").last).to_contain_text("hello from the chat panel",
                                                                          timeout=KERNEL_TIMEOUT_MS)
        expect(chat.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)
        pick = nb.run(2)
        pick.locator("li.dsh-picker-row").first.click()
        pick.locator(".dsh-prompt-input").click()
        page.keyboard.press("End")
        page.keyboard.type(PICK_QUESTION)
        page.keyboard.press("Control+Enter")
        expect(pick.locator(".dsh-chat-assistant").last).to_contain_text(PICK_QUESTION, timeout=KERNEL_TIMEOUT_MS)
        expect(pick.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)
        expected = {1: "hello from the chat panel", 2: PICK_QUESTION}
        _save(nb, expected, live=True)  # the copies go into the file as it is saved, next to the live widget
        nb.screenshot(request, "1-saved")

        _restart_kernel(nb)
        for index, words in expected.items():
            output = nb.cell(index).locator(".jp-OutputArea")  # the restart turns each panel into its copy
            expect(output.locator(".dsh-static")).to_contain_text(words, timeout=KERNEL_TIMEOUT_MS)
        nb.screenshot(request, "2-restarted")
        _save(nb, expected, live=False)  # a dead widget is not saved: its copy is
        page.reload()
        nb.open()
        for index, words in expected.items():
            output = nb.cell(index).locator(".jp-OutputArea")
            expect(output.locator(".dsh-static")).to_contain_text(words)
            expect(output).not_to_contain_text("Error displaying widget")
            expect(output).not_to_contain_text("object at 0x")
        nb.screenshot(request, "3-reloaded")
        assert watch.dialogs == []
