"""In a real browser: ``@`` in a ``%%dsh`` cell offers the notebook's variables (a data frame first, with its type
and shape), also while another cell keeps the kernel busy (the question goes to a kernel subshell), and the picked
variable's frozen summary reaches the model request, in JupyterLab 4 and Notebook 7.

The model is ``tests/fake_openai.py`` (a real HTTP server on 127.0.0.1); its recorded requests show what the
kernel sent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    WAIT_FOR_GO,
    NotebookPage,
    finished_cell,
    hold,
    let_go,
    require_chromium,
    require_notebook7,
    running_server,
    watched_page,
    write_notebook,
    write_session,
)
from fake_openai import FakeOpenAIServer, text_reply

from dsh_jupyter.references.mentions import format_variable_mention

NOTEBOOK = "work/variables.ipynb"
#: Two earlier sessions beside the notebook: the busy cell resumes the first, so the popup offers the other only.
EARLIER, OTHER = "earlier-1", "other-2"


def cells(base_url: str) -> tuple[str, ...]:
    return (
        "\n".join([
            "%load_ext dsh_jupyter",
            f'%config DshMagics.base_url = "{base_url}"',
            '%config DshMagics.model = "fake-model"',
            "%config DshMagics.model_titles = False",
            "import pandas as pd",
            "sales = pd.DataFrame({'region': ['north', 'south', None, 'east'] * 250, 'units': range(1000),",
            "                      'price': [9.5] * 1000, 'returned': [False] * 1000})",
            "notes = ['check the south region']",
        ]),
        "%%dsh\nSummarise ",
        f"%dsh resume {EARLIER}\n{WAIT_FOR_GO}",
    )


def variables_flow(browser: Any, app: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    require_chromium()
    if app == "notebook":
        require_notebook7()
    model = FakeOpenAIServer()
    try:
        model.queue(text_reply("The frame has 1,000 rows."))
        root = tmp_path / "root"
        write_notebook(root / NOTEBOOK, *cells(model.base_url))
        here = os.path.realpath(root / "work")
        write_session(root / "work", EARLIER, "Earlier work", cwd=here, created_at=1_787_000_000_000)
        write_session(root / "work", OTHER, "Other analysis", cwd=here, created_at=1_787_000_100_000)
        with running_server(app, root, tmp_path / "state") as server, watched_page(browser) as (page, watch):
            nb = NotebookPage(page, server, NOTEBOOK).open()
            nb.run(0)
            expect(nb.cell(0).locator(".jp-OutputArea-output")).to_have_count(0)

            # `@` opens the popup at once: the data frame first, with its type and shape, before the list. The
            # kernel is busy with another cell meanwhile, which made an earlier session its current one: the
            # popup's questions go to a subshell of their own, which answers while the main shell runs the cell
            # (without it the popup would come with sessions and files only, and offer the current session). The
            # popup waits 0.8 s for the answers: on a loaded machine that may pass, so ask again.
            nb.wait_idle()
            hold(nb, 2)
            popup = page.locator(".jp-Completer")
            variables = popup.locator(".jp-DshCompleter-variable")
            sessions = popup.locator(".jp-DshCompleter-session .jp-DshCompleter-title")
            for attempt in range(2):
                nb.focus_end(1)
                page.keyboard.type("@")
                try:
                    expect(variables.first).to_be_visible()
                    expect(sessions).to_have_text(["Other analysis"], timeout=5000)  # the current one left out
                    break
                except AssertionError:
                    if attempt:
                        raise
                    page.keyboard.press("Escape")
                    page.keyboard.press("Backspace")
            expect(variables).to_have_count(2)
            first = popup.locator(".jp-DshCompleter-item").first
            expect(first.locator(".jp-DshCompleter-title")).to_have_text("sales")
            expect(first.locator(".jp-DshCompleter-detail")).to_have_text("DataFrame 1,000×4")
            expect(variables.nth(1).locator(".jp-DshCompleter-title")).to_have_text("notes")
            expect(variables.nth(1).locator(".jp-DshCompleter-detail")).to_have_text("list len 1")
            nb.screenshot(request, "1-variables-popup")

            page.keyboard.type("sal")
            expect(variables).to_have_count(1)
            variables.first.click()
            expect(popup).to_be_hidden()
            assert nb.source(1) == "%%dsh\nSummarise " + format_variable_mention("sales")
            # All of that while the other cell still ran: it ends only now.
            expect(nb.cell(2).locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\*\]"))
            let_go(root / "work")
            finished_cell(nb, 2)

            output = nb.run(1)
            expect(output).to_contain_text("The frame has 1,000 rows.")
            rendered = output.locator(".jp-DshReferenceContext")
            expect(rendered).to_have_count(1)
            expect(rendered.locator("details.jp-DshReferenceContext-list > summary")).to_have_text(
                "Referenced: sales · DataFrame 1,000×4")
            rendered.locator("details.jp-DshReferenceContext-list > summary").click()
            source = rendered.locator(".jp-DshReferenceContext-source")
            expect(source.locator(".jp-DshReferenceContext-label")).to_have_text("sales")
            expect(source.locator(".jp-DshReferenceContext-state")).to_have_text("variable")
            fields = rendered.locator("dl.jp-DshReferenceContext-fields")
            terms = fields.locator("dt").all_inner_texts()
            assert terms == ["Variable", "Value", "Captured", "Sent"], terms
            expect(fields).to_contain_text("frozen into the session log")
            rendered.scroll_into_view_if_needed()
            nb.screenshot(request, "2-variable-referenced")

            assert watch.dialogs == []
            assert watch.errors == []
        turns = [r for r in model.chat_requests if "Summarise" in json.dumps(r.body)]
        assert turns, [r.body for r in model.chat_requests]
        sent = json.dumps(turns[0].body["messages"], ensure_ascii=False)
        assert "<referenced-sessions>" in sent and "notebook variables" in sent
        assert "sales: DataFrame 1,000×4" in sent and "region: object, 250 null" in sent
        assert "Summarise @sales" in sent
    finally:
        model.close()


def test_lab_offers_variables_and_sends_the_snapshot(browser: Any, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    variables_flow(browser, "lab", tmp_path, request)


def test_notebook7_offers_variables_and_sends_the_snapshot(browser: Any, tmp_path: Path,
                                                            request: pytest.FixtureRequest) -> None:
    variables_flow(browser, "notebook", tmp_path, request)
