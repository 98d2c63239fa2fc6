"""The notebook tools over a live document (an in-memory double) and over the kernel record (a real shell)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from IPython.core.interactiveshell import InteractiveShell
from kernel_helpers import EVERY_MIME, KernelRunner, output_text
from notebook_documents import FakeDocument, sample_cells

from dsh_jupyter.agent.approvals import describe_call
from dsh_jupyter.images import ToolImage
from dsh_jupyter.tools.base import ToolExecution, ToolOutput, ToolRegistry
from dsh_jupyter.workspace.document import Cell, CellOutput, NotebookDocument
from dsh_jupyter.workspace.kernel_record import KernelRecord
from dsh_jupyter.workspace.notebook_tools import (
    KERNEL_HEADER,
    LIVE_HEADER,
    NotebookEditTool,
    NotebookReadTool,
    NotebookRunTool,
    Workspace,
    notebook_tools,
)

_T = TypeVar("_T")


class Live:
    def __init__(self, document: NotebookDocument | None) -> None:
        self.doc = document

    def document(self) -> NotebookDocument | None:
        return self.doc


class Inline:
    """A main-thread runner that runs at once (a foreground cell is waiting: the turn's own, unless told)."""

    def __init__(self, *, turn_cell: bool = True) -> None:
        self.turn_cell = turn_cell

    def submit(self, fn: Callable[[], _T]) -> Any:
        import concurrent.futures

        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        future.set_result(fn())
        return future


@dataclass
class Host:
    kernel_record: KernelRecord | None = None
    live_source: Live | None = None
    main_thread_calls: Inline | None = None

    def cancel(self) -> None:
        pass


def call(tool: Any, arguments: dict[str, Any]) -> ToolOutput:
    registry = ToolRegistry()
    registry.register(tool)
    return asyncio.run(registry.execute(tool.name, json.dumps(arguments), ToolExecution.create("c1", ".")))


@pytest.fixture
def live() -> tuple[FakeDocument, Workspace]:
    document = FakeDocument(sample_cells())
    return document, Workspace(Host(live_source=Live(document), main_thread_calls=Inline()))


@pytest.fixture
def shell() -> Iterator[tuple[InteractiveShell, KernelRecord]]:
    ip = InteractiveShell.instance()
    record = KernelRecord(ip)
    record.install()
    try:
        yield ip, record
    finally:
        record.uninstall()


# --------------------------------------------------------------------------- notebook_read
def test_read_lists_cells_in_order_with_ids_sources_outputs_and_says_which_view(live: Any) -> None:
    _, workspace = live
    out = call(NotebookReadTool(workspace), {})
    assert not out.is_error
    lines = out.text.splitlines()
    assert lines[0].startswith(LIVE_HEADER) and "work.ipynb" in lines[0] and "4 cells" in lines[0]
    text = out.text
    assert text.index("id a · markdown") < text.index("id b · code · [1]") < text.index("id c") < text.index("id d")
    assert "x = 1\nprint(x)" in text and "[stdout]\n1" in text
    assert "[error] ZeroDivisionError: division by zero\nTraceback\n----> 1 1/0" in text
    assert "[result 3] 2" in text


def test_read_chooses_cells_by_id_slice_and_errors(live: Any) -> None:
    _, workspace = live
    tool = NotebookReadTool(workspace)
    by_id = call(tool, {"cell_ids": ["d", "b", "gone"]}).text
    assert "id d" in by_id and "id b" in by_id and "id c" not in by_id and "'gone'" in by_id
    sliced = call(tool, {"start": 1, "count": 2}).text
    assert "#1 · id b" in sliced and "#2 · id c" in sliced and "id a" not in sliced and "id d" not in sliced
    errors = call(tool, {"errors_only": True}).text
    assert "id c" in errors and "id b" not in errors
    bare = call(tool, {"include_outputs": False}).text
    assert "outputs" not in bare and "print(x)" in bare
    assert "No cells from start=9" in call(tool, {"start": 9}).text


def test_read_refuses_wrong_types_clearly(live: Any) -> None:
    _, workspace = live
    tool = NotebookReadTool(workspace)
    for arguments, word in [({"cell_ids": "b"}, "cell_ids"), ({"cell_ids": [1]}, "cell_ids"),
                            ({"start": -1}, "start"), ({"count": 0}, "count"), ({"start": 1.5}, "start"),
                            ({"errors_only": "yes"}, "errors_only")]:
        out = call(tool, arguments)
        assert out.is_error and word in out.text, (arguments, out.text)


def test_read_of_a_huge_notebook_is_bounded_and_says_how_to_ask_for_more() -> None:
    cells = [Cell(f"id{i}", "code", f"print({i})\n" + "x" * 3000, i,
                  (CellOutput("stream", "y" * 10_000, name="stdout"),)) for i in range(300)]
    workspace = Workspace(Host(live_source=Live(FakeDocument(cells))))
    out = call(NotebookReadTool(workspace), {})
    assert len(out.text) < 32_000
    assert "more cells not shown" in out.text
    hint = out.text.rsplit("ask with start=", 1)[1]
    start = int(hint.split()[0])
    assert 0 < start < 300 and f"id id{start - 1}" in out.text and f"id id{start} " not in out.text
    assert "more characters of output not shown" in out.text
    following = call(NotebookReadTool(workspace), {"start": start})
    assert f"#{start} · id id{start}" in following.text


def test_read_attaches_images_and_notes_their_size() -> None:
    png = ToolImage("image/png", b"\x89PNG" + b"0" * 96, 10, 20)
    cells = [Cell("p", "code", "plot()", 1, (CellOutput("display", "<Figure>", images=(png,)),))]
    out = call(NotebookReadTool(Workspace(Host(live_source=Live(FakeDocument(cells))))), {})
    assert out.images == (png,)
    assert "[image/png image, 100 bytes, 10x20]" in out.text


def test_read_falls_back_to_the_kernel_record_when_no_live_document(shell: Any) -> None:
    ip, record = shell
    ip.run_cell("value = 6 * 7\nvalue", store_history=True, cell_id="k1")
    out = call(NotebookReadTool(Workspace(Host(kernel_record=record, live_source=Live(None)))), {})
    assert out.text.startswith(KERNEL_HEADER)
    assert "id k1" in out.text and "value = 6 * 7" in out.text and "] 42" in out.text


def test_no_record_and_no_live_document_is_a_clear_error() -> None:
    out = call(NotebookReadTool(Workspace(Host())), {})
    assert out.is_error and "%load_ext dsh_jupyter" in out.text


# --------------------------------------------------------------------------- notebook_edit (live view)
def test_insert_replace_delete_by_id_and_the_log_record(live: Any) -> None:
    document, workspace = live
    tool = NotebookEditTool(workspace)
    inserted = call(tool, {"action": "insert", "cell_id": "b", "source": "z = 3"})
    assert not inserted.is_error
    new_id = inserted.meta["notebookEdit"]["cellId"]
    assert f"New cell id: {new_id}" in inserted.text
    assert document.sources()[2] == "z = 3"
    assert inserted.meta["notebookEdit"] == {"action": "insert", "cellId": new_id, "index": 2, "view": "live",
                                             "before": None, "after": {"cellType": "code", "source": "z = 3"}}
    before = call(tool, {"action": "insert", "cell_id": "a", "position": "before", "source": "# top",
                         "cell_type": "markdown"})
    assert document.cells[0].source == "# top" and document.cells[0].cell_type == "markdown", before.text
    at_end = call(tool, {"action": "insert", "source": "last"})
    assert document.cells[-1].source == "last" and "at the end" in at_end.text

    replaced = call(tool, {"action": "replace", "cell_id": "d", "source": "y = 10"})
    assert replaced.meta["notebookEdit"]["before"] == {"cellType": "code", "source": "y = x + 1\ny"}
    assert replaced.meta["notebookEdit"]["after"] == {"cellType": "code", "source": "y = 10"}
    assert "y = 10" in document.sources()

    deleted = call(tool, {"action": "delete", "cell_id": "c"})
    record = deleted.meta["notebookEdit"]
    assert record["before"]["source"] == "1/0" and record["after"] is None
    assert record["anchor"] == {"after": new_id}  # the cell that stood before it
    assert "c" not in [cell.id for cell in document.cells]


#: A credential-named variable's value (dsh_jupyter/secrets.py masks it in every tool result).
SECRET = "sk-live-0123456789abcdef"


def test_an_edit_keeps_the_secret_values_the_agent_saw_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent reads a cell holding a secret as [masked] and writes its lines back so: the cell keeps the value.
    A [masked] no line of the notebook reads like is refused, and nothing is written."""
    monkeypatch.setenv("DSH_TEST_SERVICE_TOKEN", SECRET)
    document = FakeDocument([Cell("k", "code", f'key = "{SECRET}"\nclient = connect(key)'),
                             Cell("o", "code", f'other = "{SECRET}"')])
    workspace = Workspace(Host(live_source=Live(document), main_thread_calls=Inline()))
    read = call(NotebookReadTool(workspace), {}).text
    assert 'key = "[masked]"' in read and SECRET not in read
    tool = NotebookEditTool(workspace)
    out = call(tool, {"action": "replace", "cell_id": "k",
                      "source": 'key = "[masked]"\nclient = connect(key, retries=3)'})
    assert not out.is_error, out.text
    assert document.cells[0].source == f'key = "{SECRET}"\nclient = connect(key, retries=3)'
    assert out.meta["notebookEdit"]["after"]["source"] == 'key = "[masked]"\nclient = connect(key, retries=3)'
    copied = call(tool, {"action": "insert", "cell_id": "o", "source": 'other = "[masked]"\nprint(len(other))'})
    assert not copied.is_error and document.cells[-1].source == f'other = "{SECRET}"\nprint(len(other))'

    before = document.sources()
    refused = call(tool, {"action": "replace", "cell_id": "k", "source": 'KEY = "[masked]"  # renamed'})
    assert refused.is_error and refused.text.startswith("Error: notebook_edit: line 1 of 'source' holds [masked]"), \
        refused.text
    assert "ask the user to fill it in" in refused.text
    assert document.sources() == before


def test_edits_survive_the_user_moving_adding_and_deleting_cells(live: Any) -> None:
    document, workspace = live
    read = call(NotebookReadTool(workspace), {}).text
    assert "id d" in read
    # The user reorganises the notebook after the agent read it.
    document.user_move("d", 0)
    document.user_insert(0, "user_cell = 1")
    document.user_insert(3, "another = 2")
    document.user_delete("b")
    tool = NotebookEditTool(workspace)
    call(tool, {"action": "replace", "cell_id": "d", "source": "y = 'fixed'"})
    assert [c.source for c in document.cells if c.id == "d"] == ["y = 'fixed'"]
    assert "user_cell = 1" in document.sources() and "another = 2" in document.sources()
    call(tool, {"action": "insert", "cell_id": "c", "position": "before", "source": "before_c"})
    ids = [c.id for c in document.cells]
    assert document.cells[ids.index("c") - 1].source == "before_c"
    snapshot = document.sources()
    gone = call(tool, {"action": "replace", "cell_id": "b", "source": "never"})
    assert gone.is_error and "'b'" in gone.text and "nothing was changed" in gone.text
    assert document.sources() == snapshot
    deleted_target = call(tool, {"action": "delete", "cell_id": "b"})
    assert deleted_target.is_error and document.sources() == snapshot
    near_gone = call(tool, {"action": "insert", "cell_id": "b", "source": "x"})
    assert near_gone.is_error and document.sources() == snapshot


@pytest.mark.parametrize(("arguments", "words"), [
    ({"action": "move", "cell_id": "b"}, ["action", "insert, replace, delete", "'move'"]),
    ({"action": "insert", "source": "  \n"}, ["source", "empty"]),
    ({"action": "insert"}, ["source", "required"]),
    ({"action": "replace", "source": "x"}, ["cell_id", "required"]),
    ({"action": "delete", "cell_id": ""}, ["cell_id", "empty"]),
    ({"action": "insert", "source": "x", "position": "below"}, ["position", "before, after"]),
    ({"action": "insert", "source": "x", "cell_type": "sql"}, ["cell_type"]),
    ({"action": "replace", "cell_id": 3, "source": "x"}, ["cell_id", "string"]),
    ({"action": 1}, ["action"]),
    ({}, ["action"]),
])
def test_bad_edit_arguments_are_clear_errors_and_change_nothing(live: Any, arguments: dict[str, Any],
                                                                words: list[str]) -> None:
    document, workspace = live
    before = document.sources()
    out = call(NotebookEditTool(workspace), arguments)
    assert out.is_error, out.text
    for word in words:
        assert word in out.text, out.text
    assert document.sources() == before and not document.applied


# --------------------------------------------------------------------------- notebook_edit (kernel view)
def test_kernel_view_insert_goes_through_set_next_input_once_per_cell(shell: Any) -> None:
    ip, record = shell
    payloads: list[tuple[str, bool]] = []
    ip.set_next_input = lambda text, replace=False: payloads.append((text, replace))  # type: ignore[method-assign]
    try:
        ip.run_cell("a = 1", store_history=True, cell_id="k1")
        tool = NotebookEditTool(Workspace(Host(kernel_record=record, main_thread_calls=Inline())))
        out = call(tool, {"action": "insert", "cell_id": "k1", "source": "print('new')"})
        assert not out.is_error, out.text
        assert payloads == [("print('new')", False)]
        assert "set_next_input" in out.text and out.meta["notebookEdit"]["view"] == "kernel"
        replace = call(tool, {"action": "replace", "cell_id": "k1", "source": "b = 2"})
        assert replace.is_error and "JupyterLab or Notebook 7" in replace.text
        delete = call(tool, {"action": "delete", "cell_id": "k1"})
        assert delete.is_error and "cannot delete" in delete.text
        unknown = call(tool, {"action": "insert", "cell_id": "nope", "source": "x"})
        assert unknown.is_error and "'nope'" in unknown.text
        background = NotebookEditTool(Workspace(Host(kernel_record=record)))
        bg = call(background, {"action": "insert", "source": "x = 1"})
        assert bg.is_error and "--bg" in bg.text
        # A background turn's insert is refused even while another cell (%dsh wait) serves main-thread calls:
        registry = ToolRegistry()
        registry.register(tool)
        waiting = asyncio.run(registry.execute(tool.name, json.dumps({"action": "insert", "source": "y = 2"}),
                                               ToolExecution.create("c2", ".", background=True)))
        assert waiting.is_error and "--bg" in waiting.text
        # So is one whose calls a `%dsh wait` cell serves: the turn's tools cannot tell it is a --bg turn, but the
        # new cell would land under that cell, not under the turn's.
        waited = NotebookEditTool(Workspace(Host(kernel_record=record, main_thread_calls=Inline(turn_cell=False))))
        served = call(waited, {"action": "insert", "source": "z = 3"})
        assert served.is_error and "--bg" in served.text
        assert payloads == [("print('new')", False)]
    finally:
        del ip.set_next_input


def test_kernel_view_takes_one_new_cell_per_running_cell(shell: Any) -> None:
    ip, record = shell
    payloads: list[str] = []
    ip.set_next_input = lambda text, replace=False: payloads.append(text)  # type: ignore[method-assign]
    try:
        tool = NotebookEditTool(Workspace(Host(kernel_record=record, main_thread_calls=Inline())))
        results: list[ToolOutput] = []
        ip.user_ns["_agent"] = lambda: results.extend(
            [call(tool, {"action": "insert", "source": "one"}), call(tool, {"action": "insert", "source": "two"})])
        ip.run_cell("_agent()", store_history=True, cell_id="running")
        first, second = results
        assert not first.is_error and second.is_error and "one new cell" in second.text
        assert payloads == ["one"]
        ip.run_cell("_agent()", store_history=True, cell_id="running")  # the next run of a cell may add one
        assert payloads == ["one", "one"]
    finally:
        del ip.set_next_input


# --------------------------------------------------------------------------- notebook_run
def test_run_by_id_returns_outputs_in_the_live_view(live: Any) -> None:
    document, workspace = live
    out = call(NotebookRunTool(workspace), {"cell_id": "b"})
    assert not out.is_error and document.runs == ["b"]
    assert out.text.startswith("Ran cell b.") and "ran x = 1" in out.text
    missing = call(NotebookRunTool(workspace), {"cell_id": "zz"})
    assert missing.is_error and "'zz'" in missing.text and document.runs == ["b"]
    for arguments in ({"cell_id": ""}, {"cell_id": 4}, {"cell_id": "b", "timeout": -1},
                      {"cell_id": "b", "timeout": "soon"}, {}):
        assert call(NotebookRunTool(workspace), arguments).is_error, arguments
    assert document.runs == ["b"]


def test_run_in_the_kernel_view_reruns_the_recorded_source(shell: Any) -> None:
    ip, record = shell
    ip.run_cell("counter = globals().get('counter', 0) + 1\nprint('run', counter)\ncounter * 10",
                store_history=True, cell_id="k1")
    ip.run_cell("1/0", store_history=True, cell_id="k2")
    from dsh_jupyter.workspace.cell_runner import CellRunner

    record.runner = CellRunner(record, Host(), __import__("threading").Lock())
    workspace = Workspace(Host(kernel_record=record))
    out = call(NotebookRunTool(workspace), {"cell_id": "k1"})
    assert not out.is_error, out.text
    assert "run 2" in out.text and "] 20" in out.text and ip.user_ns["counter"] == 2
    assert "not in the notebook's cell" in out.text
    failed = call(NotebookRunTool(workspace), {"cell_id": "k2"})
    assert "it raised ZeroDivisionError" in failed.text and "[error] ZeroDivisionError" in failed.text
    assert failed.meta["notebookRun"]["status"] == "error"


# --------------------------------------------------------------------------- registration and questions
def test_the_tools_register_with_their_effects(live: Any) -> None:
    _, workspace = live
    registry = ToolRegistry()
    for tool in notebook_tools(workspace):
        registry.register(tool)
    assert registry.names() == ["notebook_read", "notebook_edit", "notebook_run"]
    assert [registry.effect(n) for n in registry.names()] == ["read", "act", "act"]


def test_the_approval_question_shows_source_diff_or_deleted_cell(live: Any) -> None:
    _, workspace = live
    edit, run_tool = NotebookEditTool(workspace), NotebookRunTool(workspace)
    shown, language = edit.describe({"action": "insert", "cell_id": "b", "source": "z = 3"}) or ("", "")
    assert shown == "# insert a new code cell after cell b\nz = 3" and language == "python"
    diff, language = edit.describe({"action": "replace", "cell_id": "d", "source": "y = 10\ny"}) or ("", "")
    assert language == "diff"
    assert "--- cell d (now)" in diff and "-y = x + 1" in diff and "+y = 10" in diff and " y" in diff
    same, _ = edit.describe({"action": "replace", "cell_id": "d", "source": "y = x + 1\ny"}) or ("", "")
    assert "no change" in same
    deleted, _ = edit.describe({"action": "delete", "cell_id": "c"}) or ("", "")
    assert deleted == "# delete cell c\n1/0"
    assert edit.describe({"action": "insert", "source": "# Notes", "cell_type": "markdown"}) == (
        "# insert a new markdown cell at the end\n# Notes", "markdown")
    run, language = run_tool.describe({"cell_id": "b"}) or ("", "")
    assert run == "# run cell b\nx = 1\nprint(x)" and language == "python"
    assert run_tool.describe({"cell_id": "zz"}) == ("# run cell zz", "python")
    unknown, language = edit.describe({"action": "replace", "cell_id": "zz", "source": "q"}) or ("", "")
    assert unknown == "# replace the source of cell zz with\nq"
    assert edit.describe({"action": "bogus"}) is None  # the generic description (JSON) is used then
    assert describe_call("notebook_edit", {"action": "bogus"})[1] == "json"


# --------------------------------------------------------------------------- a real kernel (nbclient)
@pytest.mark.slow
def test_kernel_tools_read_run_insert_and_undo_through_the_offline_model(tmp_path: Path,
                                                                         kernel_runner: KernelRunner) -> None:
    sources = [
        "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"\n%config DshMagics.model = \"offline\"",
        "%dsh undo",
        "total = 40\nprint('hello from an earlier cell')\ntotal + 2",
        "def broken():\n    return {}['missing-key']\nbroken()",
        "%%dsh\n/tool notebook_read {}",
        "%%dsh\n/tool notebook_run {\"cell_id\": \"exec-3\"}",
        "%%dsh\n/tool notebook_edit {\"action\": \"insert\", \"source\": \"print('from the agent')\"}",
        "%%dsh\n/tool notebook_edit {\"action\": \"replace\", \"cell_id\": \"no-such-cell\", \"source\": \"x\"}",
        "print(total, Out)",
    ]
    payloads: dict[int, Any] = {}

    def on_cell_executed(cell: Any, cell_index: int, execute_reply: Any) -> None:
        payloads[cell_index] = execute_reply["content"].get("payload")

    nb = kernel_runner.run(sources, tmp_path, allow_errors=True, on_cell_executed=on_cell_executed)

    def text(index: int) -> str:
        return output_text(nb.cells[index].outputs, EVERY_MIME)

    import html

    assert text(1).strip() == "nothing to undo: there is no session yet"
    read = html.unescape(text(4))
    assert KERNEL_HEADER in read
    assert "--- #1 · id exec-3 · code · [3]\ntotal = 40" in read and "hello from an earlier cell" in read
    assert "def broken():" in read and "[error] KeyError: 'missing-key'" in read
    assert "----> 3 broken()" in read
    run = html.unescape(text(5))
    assert "Ran cell exec-3." in run and "hello from an earlier cell" in run and "] 42" in run
    inserted = html.unescape(text(6))
    assert "set_next_input" in inserted and "provisional id next-input-" in inserted
    assert {"source": "set_next_input", "text": "print('from the agent')", "replace": False} in payloads[6]
    wrong = html.unescape(text(7))
    assert "there is no cell with id 'no-such-cell'" in wrong and "nothing was changed" in wrong
    assert not any(p for i, p in payloads.items() if i != 6)
    last = text(8)
    assert last.startswith("40 {3: 42,") and "42}" in last  # the re-run counted as an execution


@pytest.mark.slow
def test_kernel_background_turn_runs_a_cell_off_the_main_thread_and_cannot_insert(
        tmp_path: Path, kernel_runner: KernelRunner) -> None:
    import html

    sources = [
        "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"\n%config DshMagics.model = \"offline\"",
        "v = 1\nprint('cell v', v)\nv * 100",
        "%%dsh --bg\n/tool notebook_run {\"cell_id\": \"exec-2\"}",
        "import time\ntime.sleep(3)\nprint('main slept')",
        "%dsh wait",
        "%%dsh --bg\n/tool notebook_edit {\"action\": \"insert\", \"source\": \"x = 1\"}",
        "%dsh wait",
    ]
    nb = kernel_runner.run(sources, tmp_path, allow_errors=True)

    def text(index: int) -> str:
        return html.unescape(output_text(nb.cells[index].outputs, EVERY_MIME))

    ran = text(2) + text(4)  # the turn's view is in its own cell (or re-sent under %dsh wait)
    assert "Ran cell exec-2." in ran and "cell v 1" in ran and "] 100" in ran
    assert text(3) == "main slept\n"  # the background run's output did not land in the cell running then
    refused = text(5) + text(6)
    # Refused whether the turn's insert came before `%dsh wait` began or while it served the turn's calls (under
    # load it came while it did, and went through set_next_input under the wait cell until 2026-12-07).
    assert "a background (--bg) turn has none" in refused, refused


def test_run_of_a_cell_with_top_level_await_says_why_it_failed() -> None:
    from dsh_jupyter.workspace.document import RunResult

    class AwaitingDocument(FakeDocument):
        def run(self, cell_id: str, timeout: float) -> RunResult:
            error = CellOutput("error", "RuntimeError: This event loop is already running", ename="RuntimeError",
                               evalue="This event loop is already running")
            return RunResult(Cell(cell_id, "code", "await asyncio.sleep(1)", 4, (error,)), "kernel")

    document = AwaitingDocument([Cell("w", "code", "await asyncio.sleep(1)")], view="kernel")
    out = call(NotebookRunTool(Workspace(Host(live_source=Live(document)))), {"cell_id": "w"})
    assert "uses top-level await" in out.text and "ask the user to run it" in out.text


def test_kernel_record_addressing_survives_new_runs_reorders_and_dropped_cells() -> None:
    import threading

    from dsh_jupyter.workspace.cell_runner import CellRunner

    ip = InteractiveShell.instance()
    record = KernelRecord(ip, max_cells=4)
    record.install()
    try:
        record.runner = CellRunner(record, Host(), threading.Lock())
        for name in ("first", "second", "third"):
            ip.run_cell(f"print('{name} ran')", store_history=True, cell_id=name)
        workspace = Workspace(Host(kernel_record=record))
        read = call(NotebookReadTool(workspace), {}).text
        assert "#0 · id first" in read
        # Between the agent's read and its run: the user re-runs "first" (it moves last) and runs new cells.
        ip.run_cell("print('first ran')", store_history=True, cell_id="first")
        ip.run_cell("print('new ran')", store_history=True, cell_id="new")
        ran = call(NotebookRunTool(workspace), {"cell_id": "second"})
        assert "second ran" in ran.text and "first ran" not in ran.text
        ip.run_cell("print('more')", store_history=True, cell_id="more")
        ip.run_cell("print('again')", store_history=True, cell_id="again")  # the record keeps the last 4 runs
        gone = call(NotebookRunTool(workspace), {"cell_id": "third"})
        assert gone.is_error and "'third'" in gone.text
        assert [c.id for c in record.cells()] == ["new", "second", "more", "again"]
    finally:
        record.uninstall()


@pytest.mark.slow
def test_kernel_a_plot_in_an_earlier_cell_reaches_the_model_as_an_artifact(tmp_path: Path,
                                                                            kernel_runner: KernelRunner) -> None:
    """notebook_read attaches a cell's image; the loop stores it beside the session, never inline."""
    import html
    import json as jsonlib

    sources = [
        "%load_ext dsh_jupyter\n%config DshMagics.model = \"offline\"",
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('a plot')\nplt.show()",
        "%%dsh\nWhat does my plot show?\n/tool notebook_read {}",
    ]
    nb = kernel_runner.run(sources, tmp_path)
    assert any("image/png" in o.get("data", {}) for o in nb.cells[1].outputs)
    answer = html.unescape(output_text(nb.cells[2].outputs, EVERY_MIME))
    assert "[image/png image," in answer and "I received an image: PNG image" in answer
    [log] = (tmp_path / ".dsh" / "sessions").glob("*/session.jsonl")
    artifacts = sorted((log.parent / "artifacts").glob("*.png"))
    assert len(artifacts) == 1 and artifacts[0].read_bytes().startswith(b"\x89PNG")
    text = log.read_text(encoding="utf-8")
    assert "iVBORw0KGgo" not in text  # no base64 PNG inline in the log
    blocks = [block for line in text.splitlines() for block in _image_blocks(jsonlib.loads(line))]
    assert blocks and blocks[0]["artifact"] == f"artifacts/{artifacts[0].name}" and blocks[0]["tool"] == "notebook_read"


def _image_blocks(record: Any) -> list[dict[str, Any]]:
    if isinstance(record, dict):
        found = [record] if record.get("type") == "image" and "artifact" in record else []
        return found + [b for value in record.values() for b in _image_blocks(value)]
    if isinstance(record, list):
        return [b for value in record for b in _image_blocks(value)]
    return []
