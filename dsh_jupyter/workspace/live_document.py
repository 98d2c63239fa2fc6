"""The live notebook of JupyterLab and Notebook 7, served by the dsh-jupyter front-end extension.

Who opens what:

- each notebook panel of the browser opens its own comm to the kernel target :data:`LIVE_TARGET`
  (``labextension/src/notebook.ts``) when its kernel is ready, and again after a restart or a change of
  kernel; the open data says ``{"path": ..., "active": bool}``;
- the kernel, as the extension loads, opens a comm to the front-end target :data:`PING_TARGET` and closes it
  at once (the page never closes it: a second close is an unknown comm to either side); a notebook
  panel that gets it (re)opens its document comm. So a page opened before ``%load_ext`` connects too,
  and a page reloaded later connects on its own. Consoles register no target (they close the ping).
  When more cells of the notebook wait to run (a Run All), the panel opens that comm on its kernel subshell
  (JupyterLab's subshell for the target): on the main shell the kernel would read it only after those cells.
  :meth:`LiveConnections.opened` then runs on that subshell's thread.

Several browser tabs on one kernel each hold their own comm; the kernel asks exactly one of them, the
one used last (a tab says so when its notebook becomes the current one, or its page visible again, and the
page that sends a cell to run counts as used at that moment), so an edit is shown and applied once. A tab
that does not answer a request within its wait is set aside (until it sends anything again: a kernel whose
replies wait for the main thread hears them late) and the next is
asked. A frontend without the extension (VS Code, nbclient, papermill) never opens a comm:
:meth:`LiveConnections.document` is then ``None`` and the tools use the kernel's own record (:mod:`.kernel_record`).
A panel that opens its comm before ``%load_ext`` is refused by the kernel (ipykernel logs "No such comm
target" in the kernel's log) and connects at the ping.

Messages, all JSON objects with a ``type``:

- kernel to browser: ``{"type": "request", "id": n, "op": "ping" | "read" | "apply" | "outputs" |
  "propose", ...}`` and ``{"type": "withdraw", "id": n, "note": text}`` (a proposal no longer asked:
  timeout, interrupt);
- browser to kernel: ``{"type": "reply", "id": n, "ok": true, "result": {...}}`` or ``{"ok": false,
  "error": "not-found" | "not-code" | ..., "message": text}``, and ``{"type": "active", "active": bool}``.

Replies travel on the shell channel while the kernel's main thread may be blocked in the ``%%dsh`` cell:
each comm routes its messages to the approval answer subshell (the ``route`` the host gives), so they
are handled within milliseconds on that thread. Anything that makes no sense (unknown type, unknown id,
wrong shapes) is ignored with a log line.

Proposals (:class:`ProposalApprover`): in ``ask`` mode a ``notebook_edit`` call is shown in the notebook
where it would land (a proposed cell, a line diff, a cell marked for removal) with Accept / Reject; it is
not part of the notebook model until accepted, so a save in between never stores it. Every other question
goes to the host's usual approver. An outside agent's run (the host's ``outside`` comm) is asked the same
way on the cell (:meth:`LiveDocument.propose_run`, a ``propose`` request whose edit's action is ``run``;
never ``apply``).

Deferred imports: the approval decisions (they load the agent) are imported with the first proposal that
needs an answer, not at ``%load_ext``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..secrets import MASK
from .applier import cell_of
from .document import (
    AppliedEdit,
    Cell,
    CellNotFound,
    Edit,
    NotebookError,
    NotebookSnapshot,
    RunResult,
    View,
    edit_from_arguments,
    edit_to_json,
    missing_cell,
    with_secrets_restored,
)

if TYPE_CHECKING:
    from ..agent.approvals import ApprovalDecision, ApprovalRequest, Approver
    from .notebook_tools import LiveSource as NotebookSource

log = logging.getLogger(__name__)

#: The kernel's comm target; each notebook panel opens one comm to it.
LIVE_TARGET = "dsh.live-notebook"
#: The front end's comm target; the kernel opens it to ask notebook panels to connect.
PING_TARGET = "dsh.live-notebook-ping"
#: Seconds a request other than a proposal waits for the browser before that tab is given up.
ANSWER_WAIT = 3.0
#: Seconds :meth:`LiveConnections.document` waits for a tab to say it is there (a page still loading is slow).
PING_WAIT = 3.0
#: The tool whose questions become proposals in the notebook.
EDIT_TOOL = "notebook_edit"


class LiveUnavailable(NotebookError):
    """No browser tab answered: the notebook page was closed or reloaded, or its kernel changed."""


class CommLike(Protocol):
    """The part of an ipykernel comm the connections use (a fake in the tests)."""

    comm_id: str

    def send(self, data: dict[str, Any]) -> None: ...

    def on_msg(self, callback: Callable[[dict[str, Any]], None]) -> None: ...

    def on_close(self, callback: Callable[[dict[str, Any]], None]) -> None: ...


class CellRun(Protocol):
    """What running a cell's source gives back (:class:`.cell_runner.ExecutedCell`): the cell as recorded, with
    its execution count and outputs, and the run's nbformat outputs for the browser."""

    @property
    def cell(self) -> Cell: ...

    @property
    def outputs(self) -> Sequence[Mapping[str, Any]]: ...


#: Runs a cell's source as a real cell of the kernel (``host.execute_cell``): source, cell id, timeout.
CellRunner = Callable[[str, str, float], CellRun]


# --------------------------------------------------------------------------- conversions


def cell_from_json(raw: Any) -> Cell | None:
    """A cell as the browser sends it (``id``, ``cell_type``, ``source``, ``execution_count``, ``outputs``,
    ``metadata``); ``None`` without an id or a source string."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("source"), str):
        return None
    return cell_of(raw, raw["id"])


# --------------------------------------------------------------------------- the connections


class _Reply:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.body: dict[str, Any] | None = None


@dataclass
class _Tab:
    comm: CommLike
    path: str | None
    active_at: float
    pending: dict[int, _Reply] = field(default_factory=dict)
    #: The kernel client (page connection) the tab's comm came from: its messages' ``header.session``.
    client: str | None = None


def _client_of(message: Any) -> str | None:
    """The ``header.session`` of a kernel message: which page connection sent it (``None``: unknown)."""
    header = message.get("header") if isinstance(message, Mapping) else None
    session = header.get("session") if isinstance(header, Mapping) else None
    return session if isinstance(session, str) and session else None


class BrowserError(NotebookError):
    """The browser refused a request; ``code`` is its error code (``not-found`` ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class LiveConnections:
    """The notebook panels connected to this kernel, and the requests waiting for their replies."""

    def __init__(self, route: Callable[[CommLike], None] | None = None, *, answer_wait: float = ANSWER_WAIT,
                 ping_wait: float = PING_WAIT, runner: CellRunner | None = None) -> None:
        self._route = route
        self.answer_wait = answer_wait
        self.ping_wait = ping_wait
        self.runner = runner
        self._tabs: dict[str, _Tab] = {}
        self._dormant: dict[str, _Tab] = {}  # tabs that did not answer in time (a late message revives them)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # -- the comm target (main thread, or the answer subshell) ----------------------------------------
    def opened(self, comm: CommLike, message: Mapping[str, Any]) -> None:
        """The comm target's handler: a notebook panel connected."""
        content = message.get("content") if isinstance(message, Mapping) else None
        data = content.get("data") if isinstance(content, Mapping) else None
        data = data if isinstance(data, Mapping) else {}
        path = data.get("path")
        tab = _Tab(comm, path if isinstance(path, str) else None, time.monotonic() if data.get("active", True) else 0.0,
                   client=_client_of(message))
        if self._route is not None:
            try:
                self._route(comm)
            except Exception:  # replies then arrive when the main thread is free
                log.warning("could not route the notebook document's replies to the answer subshell", exc_info=True)
        with self._lock:
            self._tabs[comm.comm_id] = tab
        comm.on_msg(lambda msg: self.received(comm.comm_id, msg))
        comm.on_close(lambda _msg: self.closed(comm.comm_id))

    def closed(self, comm_id: str) -> None:
        with self._lock:
            tab = self._tabs.pop(comm_id, None) or self._dormant.pop(comm_id, None)
        if tab is not None:
            for reply in list(tab.pending.values()):
                reply.event.set()  # the waiting request sees no body: the tab went away

    def received(self, comm_id: str, message: Any) -> None:
        """A comm message from a tab (on the answer subshell's thread); nonsense is logged and ignored."""
        content = message.get("content") if isinstance(message, Mapping) else None
        data = content.get("data") if isinstance(content, Mapping) else None
        with self._lock:
            tab = self._tabs.get(comm_id)
            if tab is None and comm_id in self._dormant:  # it answers after all: ask it again
                tab = self._tabs[comm_id] = self._dormant.pop(comm_id)
        if tab is None or not isinstance(data, Mapping):
            log.info("ignored a notebook document message that makes no sense: %r", message)
            return
        kind = data.get("type")
        if kind == "active":  # the tab used last answers: only becoming active counts
            if data.get("active", True):
                tab.active_at = time.monotonic()
            path = data.get("path")
            if isinstance(path, str):
                tab.path = path
            return
        request_id = data.get("id")
        if kind != "reply" or not isinstance(request_id, int) or isinstance(request_id, bool):
            log.info("ignored a notebook document message that makes no sense: %r", dict(data))
            return
        with self._lock:
            reply = tab.pending.pop(request_id, None)
        if reply is None:
            log.info("ignored a reply to no waiting request (id %r; it may have timed out)", request_id)
            return
        reply.body = dict(data)
        reply.event.set()

    def ran_from(self, message: Any) -> None:
        """A cell starts, asked for by the kernel message ``message`` (``pre_run_cell``): the tabs of the page
        that sent it become the most recently active. The user works where they run cells; without this, a
        second page of the notebook that reported itself active last (and holds none of these cells' outputs,
        nor shows the proposals) would answer, stale."""
        client = _client_of(message)
        if client is None:
            return
        now = time.monotonic()
        with self._lock:
            for tab in self._tabs.values():
                if tab.client == client:
                    tab.active_at = now

    # -- choosing the tab --------------------------------------------------------------------------
    @property
    def connected(self) -> int:
        with self._lock:
            return len(self._tabs)

    def tabs_of(self, tab: _Tab) -> list[_Tab]:
        """``tab`` and the other connected tabs on the same notebook (collaborators of a shared notebook, a
        second window), ``tab`` first."""
        with self._lock:
            others = [t for t in self._tabs.values() if t is not tab and tab.path and t.path == tab.path]
        return [tab, *others]

    def _ordered(self) -> list[_Tab]:
        with self._lock:
            return sorted(self._tabs.values(), key=lambda tab: tab.active_at, reverse=True)

    def _drop(self, tab: _Tab) -> None:
        with self._lock:
            if self._tabs.get(tab.comm.comm_id) is tab:
                self._dormant[tab.comm.comm_id] = self._tabs.pop(tab.comm.comm_id)

    def document(self) -> LiveDocument | None:
        """The live document of the most recently active tab that answers now, or ``None`` (no such tab)."""
        for tab in self._ordered():
            try:
                self.request(tab, "ping", {}, self.ping_wait)
            except LiveUnavailable:
                log.info("a notebook tab did not answer; it is left out")
                continue
            return LiveDocument(self, tab)
        return None

    # -- requests ----------------------------------------------------------------------------------
    def request(self, tab: _Tab, op: str, payload: Mapping[str, Any], timeout: float | None = None,
) -> dict[str, Any]:
        """Send one request and wait for its reply's ``result``; raises :class:`LiveUnavailable` when the tab
        does not answer in time (it is set aside until it sends anything again) and :class:`BrowserError`
        when it refuses."""
        reply, request_id = self._send(tab, op, payload)
        wait = self.answer_wait if timeout is None else timeout
        deadline = time.monotonic() + wait
        while not reply.event.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                break
        return self._result(tab, request_id, reply, op)

    def _send(self, tab: _Tab, op: str, payload: Mapping[str, Any]) -> tuple[_Reply, int]:
        reply = _Reply()
        request_id = next(self._ids)
        with self._lock:
            tab.pending[request_id] = reply
        try:
            tab.comm.send({"type": "request", "id": request_id, "op": op, **payload})
        except Exception as exc:
            with self._lock:
                tab.pending.pop(request_id, None)
            self._drop(tab)
            raise LiveUnavailable(f"the notebook page could not be reached ({exc})") from None
        return reply, request_id

    def _result(self, tab: _Tab, request_id: int, reply: _Reply, op: str) -> dict[str, Any]:
        with self._lock:
            tab.pending.pop(request_id, None)
        body = reply.body
        if body is None:
            if op != "propose":
                self._drop(tab)
            raise LiveUnavailable("the notebook page did not answer; it may have been closed or reloaded")
        if body.get("ok") is True:
            result = body.get("result")
            return dict(result) if isinstance(result, Mapping) else {}
        code, message = body.get("error"), body.get("message")
        raise BrowserError(code if isinstance(code, str) else "error",
                           message if isinstance(message, str) else "the notebook page refused the request")

    def withdraw(self, tab: _Tab, request_id: int, note: str) -> None:
        with self._lock:
            reply = tab.pending.pop(request_id, None)
        if reply is not None:
            reply.event.set()  # the thread waiting for it returns
        try:
            tab.comm.send({"type": "withdraw", "id": request_id, "note": note})
        except Exception:
            log.info("could not withdraw a proposal", exc_info=True)


# --------------------------------------------------------------------------- the document


class LiveDocument:
    """The notebook as one browser tab holds it (unsaved edits included): the ``live`` view."""

    def __init__(self, connections: LiveConnections, tab: _Tab) -> None:
        self.connections = connections
        self.tab = tab

    @property
    def view(self) -> View:
        return "live"

    @property
    def path(self) -> str | None:
        return self.tab.path

    def _request(self, op: str, payload: Mapping[str, Any], cell_id: str | None = None) -> dict[str, Any]:
        try:
            return self.connections.request(self.tab, op, payload)
        except BrowserError as exc:
            if exc.code == "not-found":
                raise CellNotFound(missing_cell(cell_id, "live") if cell_id else str(exc)) from None
            raise

    def read(self) -> NotebookSnapshot:
        result = self._request("read", {})
        raw = result.get("cells")
        cells = [cell_from_json(c) for c in raw] if isinstance(raw, list) else []
        path, selected = result.get("path"), result.get("active_cell_id")
        if isinstance(path, str):
            self.tab.path = path
        return NotebookSnapshot("live", tuple(c for c in cells if c is not None), self.tab.path,
                                selected if isinstance(selected, str) else None)

    def cell(self, cell_id: str) -> Cell:
        found = next((c for c in self.read().cells if c.id == cell_id), None)
        if found is None:
            raise CellNotFound(missing_cell(cell_id, "live"))
        return found

    def apply(self, edit: Edit) -> AppliedEdit:
        result = self._request("apply", {"edit": edit_to_json(edit)}, edit.cell_id)
        cell_id = result.get("cell_id")
        index = result.get("index")
        if not isinstance(cell_id, str):
            raise NotebookError("the notebook page did not say which cell it changed")
        before, after = cell_from_json(result.get("before")), cell_from_json(result.get("after"))
        return AppliedEdit(edit.action, cell_id, before, after, index if isinstance(index, int) else None)

    def put_outputs(self, cell_id: str, outputs: list[dict[str, Any]], count: int | None) -> None:
        self._request("outputs", {"cell_id": cell_id, "outputs": outputs, "execution_count": count}, cell_id)

    def run(self, cell_id: str, timeout: float) -> RunResult:
        from .cell_runner import run_document_cell

        return run_document_cell(self, cell_id, timeout, self.connections.runner, self.put_outputs)

    async def propose(self, request: ApprovalRequest, edit: Edit, timeout: float) -> ApprovalDecision | None:
        """Show ``edit`` in the notebook with Accept / Reject; the person's decision, or a timeout refusal. The card
        shows the source as it would land: with the secret values the agent saw as ``[masked]`` (the page shows
        the notebook with them already)."""
        if MASK in edit.source:
            restored, missing = with_secrets_restored(edit, await asyncio.to_thread(self.read))
            edit = edit if missing else restored  # one that cannot land shows as the agent wrote it
        return await self._ask({"edit": edit_to_json(edit), "reason": request.reason}, edit.cell_id or "", timeout)

    async def propose_run(self, request: ApprovalRequest, cell_id: str, source: str,
                          timeout: float) -> ApprovalDecision | None:
        """Ask in the notebook, on the cell itself, to run ``cell_id`` (holding ``source``) with Accept / Reject."""
        edit = {"action": "run", "cell_id": cell_id, "source": source, "cell_type": "code", "position": "after"}
        return await self._ask({"edit": edit, "reason": request.reason}, cell_id, timeout)

    async def _ask(self, payload: dict[str, Any], cell_id: str, timeout: float) -> ApprovalDecision | None:
        """Show the proposal in every tab of this notebook (each collaborator of a shared notebook has one);
        the first answer decides, and the others' cards are withdrawn saying who decided."""
        from ..agent.approvals import NOBODY_TO_ASK, ApprovalDecision

        connections = self.connections
        asked = [(tab, *connections._send(tab, "propose", payload)) for tab in connections.tabs_of(self.tab)]
        try:
            answered = await asyncio.to_thread(_first_answer, [reply for _, reply, _ in asked], timeout)
        except asyncio.CancelledError:
            for tab, _reply, request_id in asked:
                connections.withdraw(tab, request_id, "stopped: the turn was interrupted")
            raise
        if answered is None:
            for tab, _reply, request_id in asked:
                connections.withdraw(tab, request_id, "refused: no answer in time")
            return ApprovalDecision(False, "timeout", reason=NOBODY_TO_ASK)
        tab, reply, request_id = asked[answered]
        try:
            result = connections._result(tab, request_id, reply, "propose")
        except LiveUnavailable:
            result = None
        except BrowserError as exc:
            result = None
            if exc.code == "not-found":  # the cell is gone (or went while the proposal was shown)
                self._withdraw_others(asked, answered, "the cell was deleted")
                return ApprovalDecision(False, "nobody", reason=missing_cell(cell_id, "live"))
            log.info("the notebook page could not show a proposal: %s", exc)
        choice = result.get("choice") if result is not None else None
        user = result.get("user") if result is not None else None
        who = user.strip()[:200] if isinstance(user, str) and user.strip() else None
        decided = "accepted" if choice == "accept" else "rejected"
        self._withdraw_others(asked, answered, f"{decided} by {who or 'another window'}")
        if result is None:
            return None
        reason = result.get("reason")
        reason = reason.strip()[:2000] if isinstance(reason, str) and reason.strip() else None
        if choice == "accept":
            return ApprovalDecision(True, "person", decided_by=who)
        if choice == "reject":
            return ApprovalDecision(False, "person", reason=reason, decided_by=who)
        log.info("ignored a proposal answer that makes no sense: %r", result)
        return None

    def _withdraw_others(self, asked: Sequence[tuple[_Tab, _Reply, int]], answered: int, note: str) -> None:
        for n, (tab, _reply, request_id) in enumerate(asked):
            if n != answered:
                self.connections.withdraw(tab, request_id, note)


def _first_answer(replies: Sequence[_Reply], timeout: float) -> int | None:
    """The index of the first reply that came with a body (a tab that went away counts only when every tab
    did: then the caller sees no body), or ``None`` at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        done = [reply.event.is_set() for reply in replies]
        for n, reply in enumerate(replies):
            if done[n] and reply.body is not None:
                return n
        if all(done):
            return 0
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        replies[done.index(False)].event.wait(min(0.05, left))


# --------------------------------------------------------------------------- proposals as approvals


class ProposalSource(Protocol):
    """Where proposals are shown: :class:`LiveConnections` (a fake in the tests)."""

    def document(self) -> LiveDocument | None: ...


def with_proposals(approver: Approver, live: object) -> Approver:
    """``approver`` asking ``notebook_edit`` questions as proposals when ``live`` is the browser's notebook."""
    return ProposalApprover(approver, live) if isinstance(live, LiveConnections) else approver


class ProposalApprover:
    """``notebook_edit`` questions as proposals in the live notebook; every other question to ``fallback``."""

    def __init__(self, fallback: Approver | None, live: ProposalSource) -> None:
        self.fallback = fallback
        self.live = live

    async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None:
        if request.tool == EDIT_TOOL:
            edit = edit_from_arguments(request.arguments)
            document = await asyncio.to_thread(self.live.document) if edit is not None else None
            if document is not None and edit is not None:
                return await document.propose(request, edit, timeout)
        if self.fallback is None:
            return None
        return await self.fallback.ask(request, timeout)

    def prepare_cell(self, *, background: bool) -> None:
        prepare = getattr(self.fallback, "prepare_cell", None)
        if prepare is not None:
            prepare(background=background)

    def prepare_panel(self, place: Callable[[Any], None]) -> None:
        prepare = getattr(self.fallback, "prepare_panel", None)
        if prepare is not None:
            prepare(place)


# --------------------------------------------------------------------------- installing in a kernel


def install_live_document(shell: Any, connections: LiveConnections) -> Callable[[], None]:
    """Register :data:`LIVE_TARGET` on ``shell``'s kernel and ping the notebook pages; returns the remover."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None or not hasattr(manager, "register_target"):
        return lambda: None
    manager.register_target(LIVE_TARGET, connections.opened)

    def cell_starts(*_args: Any) -> None:
        get_parent = getattr(shell.kernel, "get_parent", None)  # ipykernel 6+: the request being handled
        connections.ran_from(get_parent("shell") if callable(get_parent) else None)

    events = getattr(shell, "events", None)
    if events is not None:
        events.register("pre_run_cell", cell_starts)
    ping_pages()

    def remove() -> None:
        targets = getattr(manager, "targets", None)
        if isinstance(targets, dict) and targets.get(LIVE_TARGET) == connections.opened:
            del targets[LIVE_TARGET]
        if events is not None:
            with contextlib.suppress(ValueError):  # unregistered already
                events.unregister("pre_run_cell", cell_starts)

    return remove


def ping_pages() -> None:
    """Ask the notebook pages of this kernel to connect (their panels answer by opening their comms)."""
    try:
        from comm import create_comm

        ping = create_comm(target_name=PING_TARGET, data={})
        ping.close()
    except Exception:  # no frontend at all (a terminal): nothing to ask
        log.debug("could not ping the notebook pages", exc_info=True)


class _Host(Protocol):
    live_source: NotebookSource | None

    def execute_cell(self, source: str, cell_id: str | None, timeout: float) -> CellRun: ...


def live_connections(host: _Host, route: Callable[[CommLike], None] | None = None) -> LiveConnections:
    """The kernel's connections to its notebook pages, made the host's live source; ``route`` places each
    page's comm (the host sends its incoming messages to the subshell that answers approvals)."""
    connections = LiveConnections(route, runner=_cell_runner(host))
    host.live_source = connections
    return connections


def _cell_runner(host: _Host) -> CellRunner:
    def run(source: str, cell_id: str, timeout: float) -> CellRun:
        return host.execute_cell(source, cell_id, timeout)

    return run
