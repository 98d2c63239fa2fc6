"""In a real browser: a ``%%dsh`` turn on the offline model, ``@`` completion of an earlier session and
the reference-context renderer, in JupyterLab 4 and in Notebook 7.

Each app gets its own ``jupyter`` server (started here, on 127.0.0.1) over a temporary root holding
earlier sessions written with the real JSONL store. The browser is Debian chromium, driven headless.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    JupyterServer,
    NotebookPage,
    serve,
    watched_page,
    write_notebook,
    write_session,
)

from dsh_jupyter.references.mentions import format_session_reference_mention

FOLDER = "project"
NOTEBOOK = f"{FOLDER}/mentions.ipynb"
TARGET_ID = "analysis-1"
TARGET_TITLE = "Quarterly revenue analysis"
CELLS = (
    "%load_ext dsh_jupyter",
    "%%dsh\nHello! What can you do in this notebook?",
    "%%dsh\nWhat did we conclude in ",
    "import os  # an ordinary Python cell",
    "%%dsh\nAnd compare with ",
    # Brackets in a prompt are text (Markdown would read them as links); a real mention is a chip.
    "%%dsh\nSplit the rows into ['north', 'south'] and [x], **bold** stays, see [the docs](https://example.org) "
    + format_session_reference_mention("cleanup-2", "Data cleanup notes"),
)


@dataclass
class Root:
    """A server root with earlier sessions beside the notebook."""

    path: Path
    target_seq: int


def make_root(path: Path) -> Root:
    folder = path / FOLDER
    here = os.path.realpath(folder)
    target_seq = write_session(folder, TARGET_ID, TARGET_TITLE, cwd=here, created_at=1_787_000_000_000, turns=2)
    write_session(folder, "cleanup-2", "Data cleanup notes", cwd=here, created_at=1_787_000_100_000)
    write_session(folder, "sales-4", "Regional sales Q3", cwd=here, created_at=1_787_000_050_000)
    write_session(folder, "budget-5", "Regional budget", cwd=here, created_at=1_787_000_060_000)
    write_session(folder, "other-3", "Unrelated experiment", cwd="/elsewhere", created_at=1_787_000_200_000)
    write_notebook(path / NOTEBOOK, *CELLS)
    return Root(path, target_seq)



def _server(app: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, Root]]:
    roots: list[Root] = []
    for server in serve(app, tmp_path_factory, "mentions", lambda root, _state: roots.append(make_root(root))):
        yield server, roots[0]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, Root]]:
    yield from _server("lab", tmp_path_factory)


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, Root]]:
    yield from _server("notebook", tmp_path_factory)


def mention_flow(browser: Any, server: JupyterServer, root: Root, request: pytest.FixtureRequest) -> None:
    """Run a turn, complete ``@qua`` to the target session from the popup, run it, inspect the sources."""
    from playwright.sync_api import expect

    # a rerun (pytest-rerunfailures counts runs): start again from the seeded folder and a fresh kernel
    if getattr(request.node, "execution_count", 1) > 1:
        server.shut_down_kernels()
        shutil.rmtree(root.path / FOLDER)
        make_root(root.path)
    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()

        nb.run(0)
        nb.wait_idle()
        shown = nb.cell(0).locator(".jp-OutputArea-output")
        # Loading prints nothing a person would read (an empty output, e.g. a comm's, is not text).
        assert not "".join(shown.all_inner_texts()).strip(), [el.inner_html() for el in shown.all()]

        answer = nb.run(1)
        expect(answer).to_contain_text("Offline model (no API key needed)")
        expect(answer).to_contain_text("Hello! What can you do in this notebook?")
        # The answer is one Markdown output: the turn view streams into it in place, and ends with the footer.
        streamed = answer.locator(".jp-RenderedHTMLCommon", has_text="Hello! What can you do")
        expect(streamed).to_have_count(1)
        expect(streamed.locator("sub.dsh-turn-footer")).to_have_text(
            re.compile(r"^✓ done · .+ \([0-9a-f]{8}\) · offline · (under )?\d+\.\d s · tokens [\d,]+ in, [\d,]+ out"
                       r"( · context \d+% of [\d.]+K \(compacts at \d+%\))?$"))
        # The first-use notice above it is Markdown: a quote with `%dsh models` as code, not backticks.
        notice = answer.locator(".jp-RenderedHTMLCommon blockquote", has_text="Using the offline model")
        expect(notice).to_have_count(1)
        expect(notice.locator("code")).to_have_text("%dsh models")
        nb.screenshot(request, "1-offline-answer")

        # `%%dsh` cells are prompts: their editor highlights Markdown, so the Python keyword "in" is plain
        # text there, while an ordinary cell keeps Python highlighting.
        python_words = nb.cell(3).locator(".cm-line span", has_text="import")
        expect(python_words).to_have_count(1)
        keyword_class = python_words.first.get_attribute("class")
        assert keyword_class, "the Python cell's keyword carries a highlight class"
        expect(nb.cell(2).locator(f".cm-line span.{keyword_class.split()[0]}")).to_have_count(0)

        # Brackets are not links in a `%%dsh` cell: `['north', 'south']`, `[x]` and `[the docs](…)` stay plain
        # text (no highlight span at all), Markdown's emphasis is still highlighted, and the one real mention
        # is the one chip.
        brackets = nb.cell(5).locator(".cm-line").nth(1)
        expect(brackets.locator(".jp-DshChip")).to_have_text(["@Data cleanup notes"])
        for plain in ("north", "x]", "the docs", "example.org"):
            expect(brackets.locator("span:not(.jp-DshChip)", has_text=plain)).to_have_count(0)
        expect(brackets.locator("span", has_text="bold")).not_to_have_count(0)
        brackets.scroll_into_view_if_needed()
        nb.screenshot(request, "1-brackets-are-text")

        # `@` alone opens the popup (no Tab): every session of the folder is offered, except the notebook's
        # own current session (made by the turn above), which cannot be referenced from itself.
        nb.focus_end(2)
        page.keyboard.type("@")
        popup = page.locator(".jp-Completer")
        sessions = popup.locator(".jp-DshCompleter-session")
        expect(sessions.first).to_be_visible()
        # Ranked as the server ranks them: this folder first (newest first), then other folders.
        expect(sessions).to_have_count(5)
        titles = sessions.locator(".jp-DshCompleter-title").all_inner_texts()
        assert titles == ["Data cleanup notes", "Regional budget", "Regional sales Q3", TARGET_TITLE,
                          "Unrelated experiment"], titles
        # A few letters narrow it to the one session whose label, id or folder holds them.
        page.keyboard.type("qua")
        expect(sessions).to_have_count(1)
        row = sessions.first
        expect(row.locator(".jp-DshCompleter-title")).to_have_text(TARGET_TITLE)
        expect(row.locator(".jp-DshCompleter-detail")).to_contain_text(TARGET_ID)
        # Every row reads as label and details, never as the markup picking inserts.
        expect(popup.locator(".jp-Completer-item")).to_have_count(1)
        assert "dsh-session:" not in popup.inner_text() and "](" not in popup.inner_text()
        nb.screenshot(request, "2-completion-popup")

        row.click()
        expect(popup).to_be_hidden()
        mention = format_session_reference_mention(TARGET_ID, TARGET_TITLE)
        assert nb.source(2) == f"%%dsh\nWhat did we conclude in {mention}"
        nb.screenshot(request, "3-mention-inserted")

        output = nb.run(2)
        rendered = output.locator(".jp-DshReferenceContext")
        expect(rendered).to_have_count(1)
        expect(output).to_contain_text("Offline model (no API key needed)")
        # One line for people; it opens to the source in plain words and to what the agent received.
        summary = rendered.locator("details.jp-DshReferenceContext-list > summary")
        expect(summary).to_have_text(f"Referenced: {TARGET_TITLE} · 4 messages · complete")
        fields = rendered.locator("dl.jp-DshReferenceContext-fields")
        expect(fields).to_be_hidden()  # collapsed until opened
        rendered.scroll_into_view_if_needed()
        nb.screenshot(request, "4-reference-line")
        summary.click()
        expect(fields).to_be_visible()
        source = rendered.locator(".jp-DshReferenceContext-source")
        expect(source).to_have_count(1)
        expect(source.locator(".jp-DshReferenceContext-label")).to_have_text(TARGET_TITLE)
        expect(source.locator(".jp-DshReferenceContext-state")).to_have_text("complete")
        rows = dict(zip(fields.locator("dt").all_inner_texts(), fields.locator("dd").all_inner_texts(), strict=True))
        assert list(rows) == ["Session id", "Captured", "Messages", "Left out"], rows
        assert rows["Session id"] == TARGET_ID
        assert re.fullmatch(r"\d{1,2} \w{3} \d{4}, \d\d:\d\d:\d\d", rows["Captured"]), rows
        assert rows["Messages"] == "4 messages sent to the agent"
        assert rows["Left out"] == "nothing"
        words = summary.inner_text() + fields.inner_text()
        for debug in ("seq", "Format version", "—", "Captured through", "Full snapshot"):
            assert debug not in words, debug
        preview = rendered.locator("details.jp-DshReferenceContext-preview")
        expect(preview.locator("summary")).to_have_text(re.compile(r"^What the agent received \([\d,]+ characters\)$"))
        text = preview.locator("pre.jp-DshReferenceContext-previewText")
        expect(text).to_be_hidden()
        preview.locator("summary").click()
        expect(text).to_be_visible()
        expect(text).to_contain_text("<referenced-sessions>")
        expect(text).to_contain_text(f"sessionId: {TARGET_ID}")  # shown readably, not as raw JSON
        # Our renderer, not the text/html fallback of the same bundle, drew it.
        expect(output.locator("details.dsh-reference-context")).to_have_count(0)
        # The offline model received the snapshot: its answer reports the referenced session.
        answer = output.locator(".jp-RenderedHTMLCommon")
        expect(answer.filter(has_text="You referenced 1 session")).to_contain_text(
            f"session {TARGET_ID}, cwd {os.path.realpath(root.path / FOLDER)}, captured through seq {root.target_seq}")
        rendered.scroll_into_view_if_needed()
        nb.screenshot(request, "4-reference-context-open")

        # Titles hold spaces: typing on across a space keeps filtering by every word, and Enter picks
        # the highlighted row.
        nb.focus_end(4)
        page.keyboard.type("@")
        expect(sessions.first).to_be_visible()
        page.keyboard.type("regional sa")
        expect(sessions).to_have_count(1)
        expect(sessions.first.locator(".jp-DshCompleter-title")).to_have_text("Regional sales Q3")
        nb.screenshot(request, "5-popup-across-space")
        page.keyboard.press("Enter")
        expect(popup).to_be_hidden()
        mention = format_session_reference_mention("sales-4", "Regional sales Q3")
        assert nb.source(4) == "%%dsh\nAnd compare with " + mention

        # `@cell` in the popup names the cell above the prompt by its first line (after the variables and the
        # sessions, so `@` and Enter still picks those); sent, the prompt carries that cell (source and
        # outputs) as one more collapsible source.
        page.keyboard.type(" and @cell")
        first = popup.locator(".jp-Completer-item").first
        expect(first).to_have_class(re.compile(r"jp-DshCompleter-cell"))
        expect(first.locator(".jp-DshCompleter-detail")).to_have_text(
            "cell above · import os  # an ordinary Python cell")
        expect(popup.locator(".jp-DshCompleter-cell .jp-DshCompleter-title").nth(1)).to_have_text(
            re.compile(r"^cell:[A-Za-z0-9_-]+$"))
        nb.screenshot(request, "6-cell-in-popup")
        page.keyboard.press("Enter")
        expect(popup).to_be_hidden()
        assert nb.source(4) == f"%%dsh\nAnd compare with {mention} and @cell"
        output = nb.run(4)
        summary = output.locator(".jp-DshReferenceContext details.jp-DshReferenceContext-list > summary")
        expect(summary).to_have_text(re.compile(r"^Referenced: Regional sales Q3 · .*; cell · code cell$"))
        summary.click()
        cell_source = output.locator(".jp-DshReferenceContext-source", has_text="notebook cell")
        expect(cell_source.locator(".jp-DshReferenceContext-label")).to_have_text("cell")
        expect(cell_source.locator("dd").first).to_have_text(re.compile(r"^[A-Za-z0-9_-]+$"))  # the cell's id
        received = output.locator("details.jp-DshReferenceContext-preview")
        received.locator("summary").click()
        expect(received.locator("pre")).to_contain_text("import os  # an ordinary Python cell")
        output.scroll_into_view_if_needed()
        nb.screenshot(request, "6-cell-reference")

        assert watch.dialogs == []
        assert watch.errors == []


def test_lab_mention_completion_and_reference_context(
    browser: Any, lab: tuple[JupyterServer, Root], request: pytest.FixtureRequest
) -> None:
    server, root = lab
    mention_flow(browser, server, root, request)


def test_notebook7_mention_completion_and_reference_context(
    browser: Any, notebook7: tuple[JupyterServer, Root], request: pytest.FixtureRequest
) -> None:
    server, root = notebook7
    mention_flow(browser, server, root, request)


#: Holds every answer of the server's session candidates for 1.5 s: longer than JupyterLab's provider timeout (a
#: second by default), after which the completer drops a provider's items. (A page script, so it wraps the ``fetch``
#: JupyterLab's requests go through before the app starts.)
SLOW_CANDIDATES = """
(() => {
  const fetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const response = await fetch(input, init);
    if (url.includes('/dsh/api/candidates')) {
      await new Promise(resolve => setTimeout(resolve, 1500));
    }
    return response;
  };
})();
"""


def test_a_slow_server_still_opens_the_popup(
    browser: Any, lab: tuple[JupyterServer, Root], request: pytest.FixtureRequest
) -> None:
    """A server that answers later than JupyterLab waits for a provider (a busy machine) still gets its sessions
    into the popup: the answer that came too late opens it, without another key."""
    from playwright.sync_api import expect

    server, _root = lab
    with watched_page(browser) as (page, watch):
        page.add_init_script(SLOW_CANDIDATES)
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.focus_end(2)
        page.keyboard.type("@reg")
        sessions = page.locator(".jp-Completer .jp-DshCompleter-session .jp-DshCompleter-title")
        expect(sessions).to_have_text(["Regional budget", "Regional sales Q3"])
        nb.screenshot(request, "late-popup")
        # It is an ordinary completer session from then on: typing filters it, and Enter picks.
        page.keyboard.type("ional sa")
        expect(sessions).to_have_text(["Regional sales Q3"])
        page.keyboard.press("Enter")
        expect(page.locator(".jp-Completer")).to_be_hidden()
        assert nb.source(2).endswith(format_session_reference_mention("sales-4", "Regional sales Q3"))
        assert watch.dialogs == []
        assert watch.errors == []
