"""Applied notebook edits in the session log, and ``%dsh undo`` (real agent, real JSONL store, a live double)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import ScriptedModel, call, say
from IPython.core.interactiveshell import InteractiveShell
from notebook_documents import FakeDocument, sample_cells

from dsh_jupyter.agent import Agent
from dsh_jupyter.notebook.magics import DshMagics
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.tools.base import ToolRegistry
from dsh_jupyter.workspace.document import Cell, Edit
from dsh_jupyter.workspace.edits import UNDO_EVENT, UndoRefused, recorded_edits, reverting_edit
from dsh_jupyter.workspace.kernel_record import KernelRecord
from dsh_jupyter.workspace.notebook_tools import Workspace, notebook_tools


class Live:
    def __init__(self, document: Any) -> None:
        self.doc = document

    def document(self) -> Any:
        return self.doc


class Slots:
    def __init__(self, document: Any) -> None:
        self.kernel_record: KernelRecord | None = None
        self.live_source: Live | None = Live(document)
        self.main_thread_calls = None


def edit_call(n: int, **arguments: Any) -> Any:
    return call("notebook_edit", json.dumps(arguments), f"e{n}")


def agent_with_edits(tmp_path: Path, document: FakeDocument, *edits: dict[str, Any]) -> tuple[Agent, JsonlStore]:
    tools = ToolRegistry()
    for tool in notebook_tools(Workspace(Slots(document))):
        tools.register(tool)
    replies = [edit_call(i, **arguments) for i, arguments in enumerate(edits)] + [say("done")]
    store = JsonlStore(tmp_path / "sessions")
    agent = Agent.create(store, ScriptedModel(*replies), cwd=str(tmp_path), tools=tools)
    asyncio.run(agent.send("edit my notebook"))
    return agent, store


@pytest.fixture
def magics() -> Iterator[DshMagics]:
    m = DshMagics(shell=InteractiveShell.instance())
    yield m
    m.host.agent = None


def undo(magics: DshMagics, capsys: pytest.CaptureFixture[str], line: str = "undo") -> str:
    magics.dsh_line(line)
    captured = capsys.readouterr()
    return (captured.out + captured.err).strip()


def test_each_undo_reverts_the_edit_before_and_is_logged(tmp_path: Path, magics: DshMagics,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    document = FakeDocument(sample_cells())
    original = document.sources()
    agent, store = agent_with_edits(
        tmp_path, document,
        {"action": "insert", "cell_id": "b", "source": "inserted = 1"},
        {"action": "replace", "cell_id": "d", "source": "y = 'replaced'"},
        {"action": "delete", "cell_id": "c"},
    )
    assert document.sources() == ["# Title", "x = 1\nprint(x)", "inserted = 1", "y = 'replaced'"]
    magics.host.agent = agent
    magics.host.live_source = Live(document)

    assert undo(magics, capsys) == "undid the agent's delete: the cell is back (new id new-2)"
    assert document.sources() == ["# Title", "x = 1\nprint(x)", "inserted = 1", "1/0", "y = 'replaced'"]
    assert undo(magics, capsys) == "undid the agent's replace: cell d has its earlier source again"
    assert undo(magics, capsys) == "undid the agent's insert: deleted cell new-1"
    assert document.sources() == original
    assert undo(magics, capsys) == ("nothing to undo: the agent has made no notebook edit in this session "
                                    "(or all were undone)")

    events = store.load(agent.id).events  # written to the log on disk
    undos = [e for e in events if e.type == UNDO_EVENT]
    assert len(undos) == 3 and all(e.ignorable for e in undos)
    edits = [e for e in events if e.type == "tool/result" and "notebookEdit" in e.data.get("meta", {})]
    assert [u.data["undoneSeq"] for u in undos] == [e.seq for e in reversed(edits)]
    assert undos[0].data["notebookEdit"]["action"] == "insert" and undos[0].source_event_seqs == (edits[-1].seq,)
    assert recorded_edits(events) == []


def test_undo_refuses_a_cell_changed_since_unless_forced(tmp_path: Path, magics: DshMagics,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    document = FakeDocument(sample_cells())
    agent, _ = agent_with_edits(tmp_path, document, {"action": "replace", "cell_id": "b", "source": "x = 2"})
    magics.host.agent = agent
    magics.host.live_source = Live(document)
    document.user_type("b", "x = 3  # mine")
    refused = undo(magics, capsys)
    assert refused.startswith("dsh: cannot undo the agent's last edit: cell b was changed since the agent's replace")
    assert "--force" in refused and "\n" not in refused
    assert document.cells[1].source == "x = 3  # mine"
    assert undo(magics, capsys, "undo --force").startswith("undid the agent's replace")
    assert document.cells[1].source == "x = 1\nprint(x)"


#: A credential-named variable's value: masked wherever it appears in what a tool returns (dsh_jupyter/secrets.py).
SECRET = "sk-live-0123456789abcdef"


def test_undo_never_writes_a_masked_secret_into_a_cell(tmp_path: Path, magics: DshMagics,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool result (its notebookEdit record too) keeps a secret value only as [masked]: undo cannot put the value
    back, so it says so instead of writing [masked] into the cell, and loses nothing (not even with --force)."""
    monkeypatch.setenv("DSH_TEST_SERVICE_TOKEN", SECRET)
    document = FakeDocument([Cell("k", "code", f'key = "{SECRET}"\nconnect(key)')])
    agent, store = agent_with_edits(tmp_path, document,
                                    {"action": "replace", "cell_id": "k", "source": "connect(os.environ['TOKEN'])"})
    magics.host.agent = agent
    magics.host.live_source = Live(document)
    for line in ("undo", "undo --force"):
        refused = undo(magics, capsys, line)
        assert refused.startswith("dsh: cannot undo the agent's last edit: cell k's source before the agent's "
                                  "replace held a secret value, which the session keeps only as [masked]"), refused
        assert "restore that cell by hand" in refused
        assert document.cells[0].source == "connect(os.environ['TOKEN'])"
    assert SECRET not in store.log_path(agent.id).read_text()  # the log never held it


def test_a_cell_that_differs_only_where_a_secret_was_masked_is_unchanged(
        tmp_path: Path, magics: DshMagics, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TEST_SERVICE_TOKEN", SECRET)
    document = FakeDocument(sample_cells())
    agent, _ = agent_with_edits(tmp_path, document, {"action": "insert", "cell_id": "b",
                                                     "source": f'token = "{SECRET}"\nlen(token)'})
    magics.host.agent = agent
    magics.host.live_source = Live(document)
    [record] = recorded_edits(agent.session.events)
    assert record.side("after") == {"cellType": "code", "source": 'token = "[masked]"\nlen(token)'}
    document.user_type("new-1", 'token = "another value"\nlen(token)')  # not what the agent wrote
    assert "was changed since the agent's insert" in undo(magics, capsys)
    document.user_type("new-1", f'token = "{SECRET}"\nlen(token)')  # what it wrote, its secret included
    assert undo(magics, capsys) == "undid the agent's insert: deleted cell new-1"
    assert document.sources() == [cell.source for cell in sample_cells()]


def test_undo_refuses_when_the_cell_is_gone(tmp_path: Path, magics: DshMagics,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    document = FakeDocument(sample_cells())
    agent, _ = agent_with_edits(tmp_path, document, {"action": "insert", "source": "new_cell = 1"})
    magics.host.agent = agent
    magics.host.live_source = Live(document)
    document.user_delete("new-1")
    before = document.sources()
    message = undo(magics, capsys)
    assert "(new-1) is no longer in the notebook" in message and document.sources() == before


def test_undo_with_no_session_or_a_running_turn(tmp_path: Path, magics: DshMagics,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert undo(magics, capsys) == "nothing to undo: there is no session yet"
    document = FakeDocument(sample_cells())
    agent, _ = agent_with_edits(tmp_path, document, {"action": "insert", "source": "new_cell = 1"})
    magics.host.agent = agent
    magics.host.live_source = Live(document)
    agent._running = True  # a turn is running (as a --bg turn would be)
    try:
        assert "still running a turn" in undo(magics, capsys)
        assert "new_cell = 1" in document.sources()
    finally:
        agent._running = False


def test_a_deleted_cell_returns_to_its_place_between_its_neighbours() -> None:
    document = FakeDocument(sample_cells())
    workspace = Workspace(Slots(document))
    tool = notebook_tools(workspace)[1]
    output = tool.apply(Edit("delete", "c"))  # type: ignore[attr-defined]
    record = output.meta["notebookEdit"]
    assert record["anchor"] == {"after": "b"}
    document.user_insert(0, "user added")
    document.user_move("d", 1)
    from dsh_jupyter.workspace.edits import RecordedEdit

    revert = reverting_edit(RecordedEdit(5, record), document)
    assert revert == Edit("insert", "b", "1/0", "code", "after")
    first = notebook_tools(workspace)[1].apply(Edit("delete", "a"))  # type: ignore[attr-defined]
    assert first.meta["notebookEdit"]["anchor"] == {"after": "d"}  # [user-1, d, a, b]: a stood after d
    document.user_delete("d")
    with pytest.raises(UndoRefused, match="--force"):
        reverting_edit(RecordedEdit(6, first.meta["notebookEdit"]), document)
    assert reverting_edit(RecordedEdit(6, first.meta["notebookEdit"]), document, force=True).cell_id is None


def test_the_kernel_view_cannot_undo_and_says_why(tmp_path: Path) -> None:
    live_edit = {"action": "replace", "cellId": "b", "index": 1, "view": "live",
                 "before": {"cellType": "code", "source": "x"}, "after": {"cellType": "code", "source": "y"}}
    kernel = KernelRecord(InteractiveShell.instance())
    from dsh_jupyter.workspace.edits import RecordedEdit

    with pytest.raises(UndoRefused, match="JupyterLab or Notebook 7"):
        reverting_edit(RecordedEdit(3, live_edit), kernel)
    kernel_insert = {"action": "insert", "cellId": "next-input-4", "index": None, "view": "kernel",
                     "before": None, "after": {"cellType": "code", "source": "z"}}
    with pytest.raises(UndoRefused, match="set_next_input"):
        reverting_edit(RecordedEdit(4, kernel_insert), FakeDocument([Cell("next-input-4", "code", "z")]))


def test_recorded_edits_ignore_damaged_records_and_denied_calls() -> None:
    class E:
        def __init__(self, seq: int, type_: str, data: Any) -> None:
            self.seq, self.type, self.data = seq, type_, data

    events = [
        E(1, "tool/result", {"meta": {"notebookEdit": {"action": "insert", "cellId": "n1"}}}),
        E(2, "tool/result", {"meta": {"denied": True}}),
        E(3, "tool/result", {"meta": {"notebookEdit": {"action": "explode"}}}),
        E(4, "tool/result", {"meta": "not a mapping"}),
        E(5, "tool/result", {"meta": {"notebookEdit": {"action": "delete", "cellId": "n2"}}}),
        E(6, UNDO_EVENT, {"undoneSeq": 5}),
        E(7, UNDO_EVENT, {"undoneSeq": "5"}),
        E(8, "user/message", "text"),
    ]
    assert [e.seq for e in recorded_edits(events)] == [1]
