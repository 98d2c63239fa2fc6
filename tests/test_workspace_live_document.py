"""The live document's protocol against fake comms: a scripted browser tab answers (or does not) on a thread,
as the answer subshell would deliver its replies. Checked: reading converts outputs, edits address cells by
id, nonsense is ignored, silent tabs time out and are dropped, two tabs never both apply, proposals become
approval decisions (accept, reject with a reason, timeout and interrupt withdraw them)."""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh_jupyter.agent.approvals import ApprovalDecision, ApprovalRequest
from dsh_jupyter.workspace.document import (
    Cell,
    CellNotFound,
    CellOutput,
    Edit,
    NotebookError,
    edit_from_arguments,
)
from dsh_jupyter.workspace.live_document import (
    LiveConnections,
    LiveDocument,
    LiveUnavailable,
    ProposalApprover,
    cell_from_json,
    install_live_document,
)

PNG = base64.b64encode(b"\x89PNG fake").decode()

Handler = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass
class FakeComm:
    """A comm whose browser side is ``handler``: it returns a reply body, or ``None`` to stay silent."""

    comm_id: str
    handler: Handler
    connections: LiveConnections | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)
    on_message: Callable[[dict[str, Any]], None] | None = None
    on_closed: Callable[[dict[str, Any]], None] | None = None

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)
        reply = self.handler(data)
        if reply is not None:
            self.deliver(reply)

    def deliver(self, data: Any) -> None:
        """The browser's message, delivered on another thread (the answer subshell)."""
        assert self.on_message is not None
        message = {"content": {"comm_id": self.comm_id, "data": data}}
        thread = threading.Thread(target=self.on_message, args=(message,))
        thread.start()
        thread.join()

    def on_msg(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self.on_message = callback

    def on_close(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self.on_closed = callback

    def requests(self, op: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("type") == "request" and m.get("op") == op]


class Browser:
    """A notebook model held by one tab: answers ping, read, apply and outputs like notebook.ts."""

    def __init__(self, cells: list[dict[str, Any]]) -> None:
        self.cells = cells
        self.counter = 0
        self.proposals: list[dict[str, Any]] = []
        self.propose_answer: dict[str, Any] | None = {"choice": "accept"}

    def __call__(self, data: dict[str, Any]) -> dict[str, Any] | None:
        if data.get("type") != "request":
            return None
        op, rid = data["op"], data["id"]
        try:
            result = getattr(self, "op_" + op)(data)
        except KeyError as exc:
            return {"type": "reply", "id": rid, "ok": False, "error": "not-found", "message": f"no cell {exc}"}
        if result is None:
            return None
        return {"type": "reply", "id": rid, "ok": True, "result": result}

    def index(self, cell_id: str) -> int:
        for i, cell in enumerate(self.cells):
            if cell["id"] == cell_id:
                return i
        raise KeyError(cell_id)

    def op_ping(self, _data: dict[str, Any]) -> dict[str, Any]:
        return {"path": "work/a.ipynb"}

    def op_read(self, _data: dict[str, Any]) -> dict[str, Any]:
        return {"path": "work/a.ipynb", "cells": self.cells}

    def op_apply(self, data: dict[str, Any]) -> dict[str, Any]:
        edit = data["edit"]
        if edit["action"] == "insert":
            self.counter += 1
            new = {"id": f"new-{self.counter}", "cell_type": edit["cell_type"], "source": edit["source"],
                   "execution_count": None, "outputs": []}
            at = len(self.cells) if edit["cell_id"] is None else (
                self.index(edit["cell_id"]) + (0 if edit["position"] == "before" else 1))
            self.cells.insert(at, new)
            return {"cell_id": new["id"], "index": at, "before": None, "after": new}
        at = self.index(edit["cell_id"])
        before = dict(self.cells[at])
        if edit["action"] == "delete":
            del self.cells[at]
            return {"cell_id": edit["cell_id"], "index": at, "before": before, "after": None}
        self.cells[at] = {**before, "source": edit["source"]}
        return {"cell_id": edit["cell_id"], "index": at, "before": before, "after": self.cells[at]}

    def op_outputs(self, data: dict[str, Any]) -> dict[str, Any]:
        cell = self.cells[self.index(data["cell_id"])]
        cell["outputs"], cell["execution_count"] = data["outputs"], data["execution_count"]
        return {"cell_id": data["cell_id"]}

    def op_propose(self, data: dict[str, Any]) -> dict[str, Any] | None:
        self.proposals.append(data)
        if data["edit"]["cell_id"] is not None:
            self.index(data["edit"]["cell_id"])
        return self.propose_answer


def code(cell_id: str, source: str, outputs: list[dict[str, Any]] | None = None,
         count: int | None = None) -> dict[str, Any]:
    return {"id": cell_id, "cell_type": "code", "source": source, "execution_count": count,
            "outputs": outputs or []}


def connect(connections: LiveConnections, comm_id: str, handler: Handler, *, active: bool = True) -> FakeComm:
    comm = FakeComm(comm_id, handler, connections)
    connections.opened(comm, {"content": {"comm_id": comm_id, "data": {"path": "work/a.ipynb", "active": active}}})
    return comm


def fast() -> LiveConnections:
    return LiveConnections(answer_wait=0.3, ping_wait=0.2)


def test_read_converts_the_browsers_cells_and_outputs() -> None:
    connections = fast()
    outputs = [
        {"output_type": "stream", "name": "stdout", "text": ["hel", "lo\n"]},
        {"output_type": "execute_result", "execution_count": 3, "data": {"text/plain": "42"}, "metadata": {}},
        {"output_type": "display_data", "data": {"text/plain": "<Figure>", "image/png": PNG}, "metadata": {}},
        {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
         "traceback": ["\x1b[0;31mZeroDivisionError\x1b[0m  Traceback", "\x1b[1;32m----> 1\x1b[0m 1/0"]},
        {"output_type": "something else"},
        "not even a mapping",
    ]
    browser = Browser([code("a", "print('hello')\n6*7", outputs, 3),
                       {"id": "m", "cell_type": "markdown", "source": "# Title", "outputs": []}])
    connect(connections, "c1", browser)
    document = connections.document()
    assert document is not None and document.view == "live"
    snapshot = document.read()
    assert snapshot.view == "live" and snapshot.path == "work/a.ipynb"
    assert [c.id for c in snapshot.cells] == ["a", "m"]
    first = snapshot.cells[0]
    assert first.execution_count == 3 and first.source == "print('hello')\n6*7"
    stream, result, display, error = first.outputs
    assert stream == CellOutput("stream", "hello\n", name="stdout")
    assert result.kind == "result" and result.text == "42" and result.execution_count == 3
    assert display.images[0].mime == "image/png" and display.images[0].data == b"\x89PNG fake"
    assert error.ename == "ZeroDivisionError" and error.text == "ZeroDivisionError: division by zero"
    assert error.traceback == ("ZeroDivisionError  Traceback", "----> 1 1/0")
    assert first.error == error
    assert snapshot.cells[1].cell_type == "markdown" and snapshot.cells[1].outputs == ()


def test_edits_address_cells_by_id_and_a_missing_id_is_an_error() -> None:
    connections = fast()
    browser = Browser([code("a", "x = 1"), code("b", "y = 2")])
    connect(connections, "c1", browser)
    document = connections.document()
    assert document is not None

    inserted = document.apply(Edit("insert", "a", "z = 3", position="after"))
    assert inserted.cell_id == "new-1" and inserted.index == 1 and inserted.before is None
    assert inserted.after is not None and inserted.after.source == "z = 3"
    assert [c["id"] for c in browser.cells] == ["a", "new-1", "b"]

    browser.cells.reverse()  # the user moved cells around: ids still find them
    replaced = document.apply(Edit("replace", "b", "y = 20"))
    assert replaced.before is not None and replaced.before.source == "y = 2"
    assert replaced.after is not None and replaced.after.source == "y = 20"
    assert browser.cells[0] == code("b", "y = 20")

    del browser.cells[0]  # the user deleted b: an edit of it is refused, nothing else changes
    kept = [dict(c) for c in browser.cells]
    with pytest.raises(CellNotFound, match="no cell with id 'b' in the live notebook"):
        document.apply(Edit("replace", "b", "oops"))
    with pytest.raises(CellNotFound):
        document.apply(Edit("insert", "b", "oops"))
    assert browser.cells == kept

    deleted = document.apply(Edit("delete", "a"))
    assert deleted.after is None and deleted.before is not None and deleted.before.source == "x = 1"
    assert [c["id"] for c in browser.cells] == ["new-1"]


def test_messages_that_make_no_sense_are_ignored_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    connections = fast()
    browser = Browser([code("a", "x = 1")])
    comm = connect(connections, "c1", browser)
    caplog.set_level(logging.INFO, logger="dsh_jupyter.workspace.live_document")
    for nonsense in [None, "text", 12, [], {"type": "shout"}, {"type": "reply"}, {"type": "reply", "id": True},
                     {"type": "reply", "id": 99, "ok": True}, {"type": "reply", "id": "1"}]:
        comm.deliver(nonsense)
    connections.received("unknown-comm", {"content": {"data": {"type": "reply", "id": 1}}})
    connections.received("c1", "not a message")
    assert caplog.text.count("ignored") >= 10
    document = connections.document()  # still works
    assert document is not None and [c.id for c in document.read().cells] == ["a"]

    # A reply whose shapes are wrong: cells that are not cells are left out, a missing id is an error.
    comm.handler = lambda data: {"type": "reply", "id": data["id"], "ok": True,
                                 "result": {"cells": [{"id": 3}, "x", code("a", "x = 1")]}}
    assert [c.id for c in document.read().cells] == ["a"]
    comm.handler = lambda data: {"type": "reply", "id": data["id"], "ok": True, "result": {}}
    with pytest.raises(NotebookError, match="did not say which cell"):
        document.apply(Edit("insert", None, "x"))
    comm.handler = lambda data: {"type": "reply", "id": data["id"], "ok": False}
    with pytest.raises(NotebookError, match="refused"):
        document.read()


def test_a_silent_tab_times_out_is_dropped_and_the_kernel_record_is_used() -> None:
    connections = fast()
    connect(connections, "silent", lambda data: None)
    assert connections.document() is None  # a frontend that never answers (or a closed page)
    assert connections.connected == 0
    assert LiveConnections().document() is None  # no tab at all: VS Code, nbclient

    answering = Browser([code("a", "x = 1")])
    comm = connect(connections, "c1", answering)
    document = connections.document()
    assert document is not None
    comm.handler = lambda data: None  # the page went away after the ping
    with pytest.raises(LiveUnavailable, match="did not answer"):
        document.read()
    assert connections.connected == 0

    # It was only slow: anything it sends brings it back (the late reply itself is ignored).
    late = comm.requests("read")[-1]["id"]
    comm.deliver({"type": "reply", "id": late, "ok": True, "result": {}})
    assert connections.connected == 1
    comm.handler = answering
    document = connections.document()
    assert document is not None and [c.id for c in document.read().cells] == ["a"]


def test_two_tabs_only_the_most_recently_active_one_answers_and_applies() -> None:
    connections = fast()
    first, second = Browser([code("a", "x = 1")]), Browser([code("a", "x = 1")])
    comm1 = connect(connections, "tab-1", first)
    comm2 = connect(connections, "tab-2", second, active=False)
    document = connections.document()
    assert isinstance(document, LiveDocument)
    document.apply(Edit("insert", "a", "y = 2"))
    assert len(first.cells) == 2 and len(second.cells) == 1
    assert comm2.requests("apply") == [] and comm2.requests("ping") == []

    comm2.deliver({"type": "active", "active": True, "path": "work/a.ipynb"})  # the user switched tabs
    document = connections.document()
    assert document is not None
    document.apply(Edit("insert", "a", "z = 3"))
    assert len(first.cells) == 2 and len(second.cells) == 2
    assert len(comm1.requests("apply")) == 1

    assert comm2.on_closed is not None
    comm2.on_closed({})  # that tab closed: the other one answers again
    document = connections.document()
    assert document is not None and document.tab.comm is comm1


def test_the_page_that_runs_a_cell_answers_not_a_later_active_one() -> None:
    """Two pages of one notebook: the one opened last said it was active, but cells run in the other (the
    stale copy of issue 22: no outputs, proposals that never showed)."""
    connections = fast()
    working, fresh = Browser([code("a", "x = 1", count=1)]), Browser([code("a", "x = 1")])
    comm1 = FakeComm("tab-1", working, connections)
    connections.opened(comm1, {"header": {"session": "page-1"},
                               "content": {"data": {"path": "work/a.ipynb", "active": True}}})
    comm2 = FakeComm("tab-2", fresh, connections)
    connections.opened(comm2, {"header": {"session": "page-2"},
                               "content": {"data": {"path": "work/a.ipynb", "active": True}}})
    document = connections.document()
    assert document is not None and document.tab.comm is comm2  # opened last, nothing ran yet
    connections.ran_from({"header": {"session": "page-1", "msg_type": "execute_request"}})
    document = connections.document()
    assert document is not None and document.tab.comm is comm1
    assert document.read().cells[0].execution_count == 1
    connections.ran_from({"header": {}})  # a cell from no page (a test, nbclient): nothing changes
    connections.ran_from(None)
    document = connections.document()
    assert document is not None and document.tab.comm is comm1


def test_a_closed_tab_releases_a_waiting_request_at_once() -> None:
    connections = LiveConnections(answer_wait=30)
    comm = connect(connections, "c1", lambda data: None)
    document = LiveDocument(connections, connections._ordered()[0])
    assert comm.on_closed is not None
    closer = threading.Timer(0.2, comm.on_closed, args=({},))
    closer.start()
    with pytest.raises(LiveUnavailable):
        document.read()
    closer.join()


@dataclass(frozen=True)
class Ran:
    cell: Cell
    outputs: tuple[dict[str, Any], ...]


def test_run_executes_the_cells_current_source_and_sends_its_outputs_to_the_browser() -> None:
    ran: list[tuple[str, str, float]] = []
    stream = {"output_type": "stream", "name": "stdout", "text": "ran\n"}

    def runner(source: str, cell_id: str, timeout: float) -> Ran:
        ran.append((source, cell_id, timeout))
        return Ran(Cell(cell_id, "code", source, 7, (CellOutput("stream", "ran\n", name="stdout"),)), (stream,))

    connections = LiveConnections(answer_wait=0.3, ping_wait=0.2, runner=runner)
    browser = Browser([code("a", "print('ran')  # edited, unsaved"),
                       {"id": "m", "cell_type": "markdown", "source": "text", "outputs": []}])
    connect(connections, "c1", browser)
    document = connections.document()
    assert document is not None
    result = document.run("a", 5.0)
    assert ran == [("print('ran')  # edited, unsaved", "a", 5.0)]
    assert result.view == "live" and result.cell.execution_count == 7
    assert result.cell.outputs[0].text == "ran\n"
    assert browser.cells[0]["outputs"] == [stream] and browser.cells[0]["execution_count"] == 7
    with pytest.raises(NotebookError, match="markdown cell"):
        document.run("m", 5.0)
    browser.cells.append(code("p", "%%dsh\nrun me"))
    with pytest.raises(NotebookError, match="prompt"):
        document.run("p", 5.0)
    with pytest.raises(CellNotFound):
        document.run("gone", 5.0)
    assert len(ran) == 1


def edit_request(arguments: dict[str, Any], tool: str = "notebook_edit") -> ApprovalRequest:
    return ApprovalRequest(tool, "call-1", arguments, "shown")


class Fallback:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []
        self.prepared: list[bool] = []

    async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None:
        self.asked.append(request)
        return ApprovalDecision(True, "person", scope="session")

    def prepare_cell(self, *, background: bool) -> None:
        self.prepared.append(background)


def test_proposals_accept_reject_and_other_questions_go_to_the_usual_approver() -> None:
    connections = fast()
    browser = Browser([code("a", "x = 1")])
    comm = connect(connections, "c1", browser)
    fallback = Fallback()
    approver = ProposalApprover(fallback, connections)
    insert = {"action": "insert", "cell_id": "a", "source": "y = 2", "position": "before"}

    decision = asyncio.run(approver.ask(edit_request(insert), 5))
    assert decision == ApprovalDecision(True, "person")
    assert browser.proposals[0]["edit"] == {**insert, "cell_type": "code"}
    assert browser.cells == [code("a", "x = 1")]  # a proposal changes nothing

    browser.propose_answer = {"choice": "reject", "reason": "  keep x as it is  "}
    decision = asyncio.run(approver.ask(edit_request({"action": "replace", "cell_id": "a", "source": "x = 2"}), 5))
    assert decision == ApprovalDecision(False, "person", reason="keep x as it is")

    browser.propose_answer = {"choice": "maybe"}
    assert asyncio.run(approver.ask(edit_request({"action": "delete", "cell_id": "a"}), 5)) is None

    # The addressed cell is gone (or the user deletes it while the proposal shows): refused, saying so.
    decision = asyncio.run(approver.ask(edit_request({"action": "delete", "cell_id": "gone"}), 5))
    assert decision is not None and not decision.allowed and decision.answered_by == "nobody"
    assert decision.reason is not None and "no cell with id 'gone' in the live notebook" in decision.reason

    # Other tools, arguments that make no sense, and no live notebook: the usual approver asks.
    asyncio.run(approver.ask(edit_request({"command": "ls"}, tool="bash"), 5))
    asyncio.run(approver.ask(edit_request({"action": "explode"}), 5))
    assert comm.on_closed is not None
    comm.on_closed({})
    asyncio.run(approver.ask(edit_request(insert), 5))
    assert [r.tool for r in fallback.asked] == ["bash", "notebook_edit", "notebook_edit"]
    approver.prepare_cell(background=True)
    approver.prepare_panel(lambda widget: None)  # the fallback has none: nothing happens
    assert fallback.prepared == [True]
    assert asyncio.run(ProposalApprover(None, LiveConnections()).ask(edit_request(insert), 1)) is None


def test_a_proposal_shows_the_secret_values_the_agent_saw_masked_as_they_will_land(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The card shows what accepting writes: the agent's [masked] lines with the cell's own values (the page shows
    the notebook with them already); a [masked] no line reads like shows as written (applying it is refused)."""
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("DSH_TEST_SERVICE_TOKEN", secret)
    connections = fast()
    browser = Browser([code("a", f'key = "{secret}"\nclient = connect(key)')])
    connect(connections, "c1", browser)
    approver = ProposalApprover(Fallback(), connections)
    replace = {"action": "replace", "cell_id": "a", "source": 'key = "[masked]"\nclient = connect(key, retries=3)'}
    assert asyncio.run(approver.ask(edit_request(replace), 5)) == ApprovalDecision(True, "person")
    assert browser.proposals[-1]["edit"]["source"] == f'key = "{secret}"\nclient = connect(key, retries=3)'
    unknown = {"action": "replace", "cell_id": "a", "source": 'KEY = "[masked]"'}
    asyncio.run(approver.ask(edit_request(unknown), 5))
    assert browser.proposals[-1]["edit"]["source"] == 'KEY = "[masked]"'


def test_a_proposal_is_withdrawn_on_timeout_and_on_interrupt() -> None:
    connections = fast()
    browser = Browser([code("a", "x = 1")])
    browser.propose_answer = None  # nobody clicks
    comm = connect(connections, "c1", browser)
    approver = ProposalApprover(Fallback(), connections)
    request = edit_request({"action": "replace", "cell_id": "a", "source": "x = 2"})

    decision = asyncio.run(approver.ask(request, 0.3))
    assert decision is not None and not decision.allowed and decision.answered_by == "timeout"
    withdrawn = [m for m in comm.sent if m["type"] == "withdraw"]
    assert withdrawn == [{"type": "withdraw", "id": comm.requests("propose")[0]["id"],
                          "note": "refused: no answer in time"}]
    comm.deliver({"type": "reply", "id": withdrawn[0]["id"], "ok": True, "result": {"choice": "accept"}})  # late

    async def interrupted() -> None:
        task = asyncio.create_task(approver.ask(request, 30))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert [m["note"] for m in comm.sent if m["type"] == "withdraw"][-1] == "stopped: the turn was interrupted"
    assert connections.connected == 1  # a proposal nobody answered does not drop the tab


def test_edit_arguments_and_cells_that_make_no_sense() -> None:
    assert edit_from_arguments({"action": "insert"}) == Edit("insert", None)
    assert edit_from_arguments({"action": "replace", "cell_id": "a", "source": "s", "cell_type": "markdown"}) \
        == Edit("replace", "a", "s", "markdown")
    for bad in [{}, {"action": "replace"}, {"action": "delete", "cell_id": 3}, {"action": "insert", "source": 1}]:
        assert edit_from_arguments(bad) is None
    assert cell_from_json({"id": "a", "source": "s", "cell_type": "weird"}) == Cell("a", "raw", "s")
    assert cell_from_json({"id": "a"}) is None and cell_from_json(None) is None


class FakeManager:
    def __init__(self) -> None:
        self.targets: dict[str, Any] = {}

    def register_target(self, name: str, handler: Any) -> None:
        self.targets[name] = handler


def test_install_registers_the_comm_target_and_removes_it() -> None:
    manager = FakeManager()
    shell = type("Shell", (), {"kernel": type("Kernel", (), {"comm_manager": manager})()})()
    connections = LiveConnections()
    remove = install_live_document(shell, connections)
    assert manager.targets["dsh.live-notebook"] == connections.opened
    remove()
    assert manager.targets == {}
    assert install_live_document(object(), connections)() is None  # terminal IPython: nothing to do


def test_a_shared_notebooks_proposal_is_shown_in_every_tab_and_the_first_answer_decides() -> None:
    connections = fast()
    alice, bob = Browser([code("a", "x = 1")]), Browser([code("a", "x = 1")])
    alice.propose_answer = None  # Alice looks on; Bob decides
    bob.propose_answer = {"choice": "accept", "user": "  Bob  "}
    alice_comm = connect(connections, "alice", alice)
    bob_comm = connect(connections, "bob", bob)
    elsewhere = connect(connections, "other", Browser([code("z", "")]))
    connections.opened(elsewhere, {"content": {"data": {"path": "other.ipynb", "active": False}}})
    approver = ProposalApprover(Fallback(), connections)

    decision = asyncio.run(approver.ask(edit_request({"action": "insert", "cell_id": "a", "source": "y"}), 5))
    assert decision == ApprovalDecision(True, "person", decided_by="Bob")
    assert len(alice_comm.requests("propose")) == 1 and len(bob_comm.requests("propose")) == 1
    assert elsewhere.requests("propose") == []  # another notebook's tab is not asked
    assert [m["note"] for m in alice_comm.sent if m["type"] == "withdraw"] == ["accepted by Bob"]
    assert not [m for m in bob_comm.sent if m["type"] == "withdraw"]
    assert decision.to_json(edit_request({}), "ask")["decidedBy"] == "Bob"

    bob.propose_answer = {"choice": "reject", "reason": "not now"}  # no name: the note says another window
    decision = asyncio.run(approver.ask(edit_request({"action": "delete", "cell_id": "a"}), 5))
    assert decision == ApprovalDecision(False, "person", reason="not now")
    assert [m["note"] for m in alice_comm.sent if m["type"] == "withdraw"][-1] == "rejected by another window"
