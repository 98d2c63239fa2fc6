"""``@cell`` and ``@cell:<id>`` in a prompt: which cell they mean, the bounded snapshot, and the refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from references_helpers import MemoryStore, context_text, make_resolver, prompt_data, target_for

from dsh_jupyter.references import SessionReferenceError, parse_session_reference_text
from dsh_jupyter.references.errors import SESSION_REFERENCE_INVALID_REFERENCE, SESSION_REFERENCE_READ_FAILED
from dsh_jupyter.ui.display import ReferenceContextDisplay
from dsh_jupyter.workspace.cell_refs import (
    MAX_CELL_REFERENCE_CHARS,
    NotebookCells,
    has_cell_mention,
    outputs_brief,
)
from dsh_jupyter.workspace.document import Cell, CellOutput, NotebookError, NotebookSnapshot

LOAD = Cell("load-sales", "code", "df = load('sales.csv')\ndf.head()", 2,
            (CellOutput("result", "   region  total\n0  north    10", execution_count=2),))
FAIL = Cell("plot", "code", "df.plot(x='regoin')", 3,
            (CellOutput("error", "KeyError: 'regoin'", ename="KeyError", evalue="'regoin'"),))
PROMPT = Cell("ask", "code", "%%dsh\nwhy does @cell fail?")
NOTES = Cell("notes", "markdown", "# Sales")


def live(selected: str | None = "plot", *cells: Cell) -> NotebookSnapshot:
    return NotebookSnapshot("live", cells or (NOTES, LOAD, FAIL, PROMPT), "sales.ipynb", selected)


class Reader:
    def __init__(self, snapshot: NotebookSnapshot | Exception) -> None:
        self.snapshot = snapshot
        self.reads = 0

    def __call__(self) -> NotebookSnapshot:
        self.reads += 1
        if isinstance(self.snapshot, Exception):
            raise self.snapshot
        return self.snapshot


def refused(cells: NotebookCells, text: str) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as caught:
        cells.adapt(text)
    return caught.value


def test_the_sidebar_mentions_the_selected_cell_and_a_prompt_cell_the_one_above_it() -> None:
    reader = Reader(live("load-sales"))
    sidebar = NotebookCells(reader)
    assert sidebar.adapt("what does @cell do?") == "what does @[cell](dsh-cell:load-sales) do?"
    # A %%dsh cell is the selection when it runs (Shift+Enter then moves it on): @cell is the cell above it.
    prompt = NotebookCells(Reader(live("notes")), prompt_cell="ask")
    assert prompt.adapt("why does @cell fail?\n(@cell)") == \
        "why does @[cell](dsh-cell:plot) fail?\n(@[cell](dsh-cell:plot))"
    # The notebook is read once per prompt, and not at all without a mention.
    assert sidebar.adapt("and @cell, again @cell.").count("dsh-cell:load-sales") == 2 and reader.reads == 1
    untouched = NotebookCells(Reader(RuntimeError("never read")))
    assert untouched.adapt("no mention here") == "no mention here"


def test_named_cells_code_and_other_words_are_left_as_typed() -> None:
    cells = NotebookCells(Reader(live(None)))
    assert cells.adapt("compare @cell:load-sales with @cell:exec-3") == \
        "compare @[cell:load-sales](dsh-cell:load-sales) with @[cell:exec-3](dsh-cell:exec-3)"
    for text in ("mail me@cell.org", "@cellar door", "`@cell` in code", "```python\n@cell\ndef f(): ...\n```",
                 "@[cell](dsh-cell:plot) already", "@cell-phone"):
        assert not has_cell_mention(text), text
        assert cells.adapt(text) == text
    assert cells.adapt("one ```python block, then @cell:plot") == \
        "one ```python block, then @[cell:plot](dsh-cell:plot)"  # a fence opens a line, not mid-sentence
    named = NotebookCells(Reader(live("plot")))
    assert named.adapt("@cell: explain it") == "@[cell](dsh-cell:plot): explain it"


def test_without_a_page_a_bare_cell_is_refused_in_one_line_that_says_what_to_do() -> None:
    kernel = NotebookSnapshot("kernel", (LOAD, FAIL), None, None)
    error = refused(NotebookCells(Reader(kernel)), "look at @cell")
    assert error.code == SESSION_REFERENCE_INVALID_REFERENCE
    message = str(error)
    assert message.startswith("no cell is selected here: @cell means the cell selected in JupyterLab or Notebook 7")
    assert "the kernel's record of executed cells" in message and "@cell:exec-3 for the cell that ran as [3]" in message
    assert "\n" not in message
    room = NotebookSnapshot("file", (LOAD,), "sales.ipynb", None)
    assert "@cell:<id> with an id notebook_read shows" in str(refused(NotebookCells(Reader(room)), "@cell"))
    # Named cells still work there.
    assert NotebookCells(Reader(kernel)).adapt("@cell:plot") == "@[cell:plot](dsh-cell:plot)"
    first = refused(NotebookCells(Reader(live("ask", PROMPT, LOAD)), prompt_cell="ask"), "@cell")
    assert "this prompt is the notebook's first cell" in str(first)
    from dsh_jupyter.ui.messages import describe

    assert describe(error) == message and describe(first) == str(first)  # the cell's own words reach the user
    broken = refused(NotebookCells(Reader(NotebookError("the page went away"))), "@cell")
    assert broken.code == SESSION_REFERENCE_READ_FAILED and "the page went away" in str(broken)


def test_a_cell_snapshot_holds_id_type_source_and_outputs_within_bounds() -> None:
    cells = NotebookCells(Reader(live()))
    snapshot = cells.snapshot("plot", 10_000)
    assert snapshot is not None and snapshot.cell_type == "code"
    assert snapshot.brief == "code cell [3] · 1 output · KeyError" == outputs_brief(FAIL)
    assert snapshot.text.startswith("--- #3 · id plot · code · [3]")
    assert "df.plot(x='regoin')" in snapshot.text and "[error] KeyError: 'regoin'" in snapshot.text
    assert cells.snapshot("gone", 10_000) is None
    assert outputs_brief(NOTES) == "markdown cell"
    huge = Cell("huge", "code", "x = 1\n" * 50_000, 1, (CellOutput("stream", "y" * 200_000, name="stdout"),))
    big = NotebookCells(Reader(live(None, huge))).snapshot("huge", 1_000_000)
    assert big is not None and len(big.text) <= MAX_CELL_REFERENCE_CHARS
    small = NotebookCells(Reader(live(None, huge))).snapshot("huge", 300)
    assert small is not None and len(small.text) <= 300


def test_a_mention_reaches_the_log_as_a_frozen_untrusted_cell_and_shows_as_source_metadata(tmp_path: Any) -> None:
    store = MemoryStore(tmp_path)
    cells = NotebookCells(Reader(live("load-sales")), prompt_cell="ask")
    parsed = parse_session_reference_text(cells.adapt("why does @cell fail?"))
    assert parsed.text == "why does @cell fail?"
    resolver, _ = make_resolver(store)
    prepared = asyncio.run(resolver.prepare(target_for(store), [{"type": "text", "text": parsed.text}], [],
                                            cells=parsed.cells, cell_source=cells))
    (entry,) = prompt_data(context_text(prepared))
    assert entry["cell"] == "plot" and "KeyError" in entry["content"]
    display = ReferenceContextDisplay.from_context(prepared.additional_context, target_session_id="target")
    assert display.summary == "Referenced: cell · code cell [3] · 1 output · KeyError"
    (source,) = display.view()["sources"]
    assert source["title"] == "cell" and source["state"] == "notebook cell"
    assert ["Cell", "plot"] in source["rows"]
    html = display._repr_mimebundle_()["text/html"]
    assert "<details" in html and "notebook cell" in html


class PageSource:
    """A connected page (the host's ``live_source``) whose document reads ``snapshot``."""

    view = "live"

    def __init__(self, snapshot: NotebookSnapshot) -> None:
        self.snapshot = snapshot

    def document(self) -> PageSource:
        return self

    def read(self) -> NotebookSnapshot:
        return self.snapshot


def test_the_sidebar_path_sends_the_selected_cell_and_without_a_page_sends_nothing(tmp_path: Any) -> None:
    from dsh_jupyter.notebook.config import DshSettings
    from dsh_jupyter.notebook.host import NotebookHost

    host = NotebookHost(DshSettings(model="offline", model_titles=False, catalog=False), shell=None,
                        cwd=str(tmp_path))
    try:
        with pytest.raises(SessionReferenceError, match="could not read the notebook for @cell"):
            host.submit_async("what does @cell do?").result(30)
        assert host.agent is None or not any("what does" in str(e.data) for e in host.agent.session.events)
        host.live_source = PageSource(live("load-sales"))  # type: ignore[assignment]
        host.submit_async("what does @cell do?").result(30)
        assert host.agent is not None
        messages = [e.data for e in host.agent.session.events if e.type == "user/message"]
        (context,) = [m for m in messages if (m.get("source") or {}).get("cells")]
        assert context["source"]["cells"][0]["cell"] == "load-sales"
        assert "df = load('sales.csv')" in context["content"][0]["text"]
        assert any(m["content"][0]["text"] == "what does @cell do?" for m in messages)
    finally:
        host.close()
