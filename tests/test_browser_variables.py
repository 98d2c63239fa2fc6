"""In a real browser: ``@`` in a ``%%dsh`` cell offers the notebook's variables (a data frame first, with its type
and shape), and the picked variable's frozen summary reaches the model request, in JupyterLab 4 and Notebook 7.

The model is ``tests/fake_openai.py`` (a real HTTP server on 127.0.0.1); its recorded requests show what the
kernel sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    NotebookPage,
    require_chromium,
    require_notebook7,
    running_server,
    watched_page,
    write_notebook,
)
from fake_openai import FakeOpenAIServer, text_reply

from dsh_jupyter.references.mentions import format_variable_mention

NOTEBOOK = "work/variables.ipynb"


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
        with running_server(app, root, tmp_path / "state") as server, watched_page(browser) as (page, watch):
            nb = NotebookPage(page, server, NOTEBOOK).open()
            nb.run(0)
            expect(nb.cell(0).locator(".jp-OutputArea-output")).to_have_count(0)

            # `@` opens the popup at once: the data frame first, with its type and shape, before the list.
            # The popup waits about a second for the kernel's variables (see the README's known limitations):
            # ask once the kernel is idle, and again if a loaded machine let that second pass.
            nb.wait_idle()
            popup = page.locator(".jp-Completer")
            variables = popup.locator(".jp-DshCompleter-variable")
            for attempt in range(2):
                nb.focus_end(1)
                page.keyboard.type("@")
                try:
                    expect(variables.first).to_be_visible()
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
