"""Asking a person before a tool call runs: a widget in the turn's own cell, or a prompt on stdin.

:func:`approver_for` picks the host's :class:`~dsh_jupyter.agent.approvals.Approver`:

- in a kernel (JupyterLab, Notebook 7, VS Code): :class:`WidgetApprover` shows an :class:`ApprovalWidget`
  (``dsh_jupyter/ui/static/approval.js``) with the exact command or code, **Allow once**, **Allow for this session**
  (for bash also "commands starting with ``git``") and **Deny** with an optional reason;
- in terminal IPython: :class:`StdinApprover` asks with ``input()``;
- anywhere else: nobody can be asked, and the policy refuses at once.

How the answer reaches a busy kernel: while a foreground ``%%dsh`` cell runs, the kernel's main thread is
blocked in the cell, so comm messages addressed to the main shell wait until the cell ends (the answer
would never arrive). ipykernel 7 runs *subshells* (one thread each) and routes a comm's incoming messages
to the subshell its ``_reply_subshell_for`` names. The approver creates one subshell per kernel (through
the kernel's own control channel, as a frontend would) and routes its widgets' messages there, so a
click is handled on the subshell thread within milliseconds whether the cell blocks or the turn runs in
the background. With a kernel that has no subshells, the answer still arrives during ``--bg`` turns; a
foreground question then gets no answer and is refused as unanswered.

Why this route: it needs no server extension (VS Code has none) and no re-entrant processing of the main
shell's queue (which would also run queued cells in the middle of the turn). Measured
(``benchmarks/bench_approvals.py``): the subshell is created once in about 25 ms; an answer is handled in
about 3 ms (median) while the cell blocks.

Nobody looking (nbclient, papermill, a frontend without widgets): the view sends ``rendered`` as soon as
it is drawn; without it within :data:`RENDER_WAIT` seconds of being shown, the question is withdrawn and the
call refused with the message naming ``%config DshMagics.approval = "auto"``. No answer within the
``approval_timeout`` setting is refused the same way. A headless run never hangs.

Deferred imports: the kernel client (ipykernel, jupyter_client) and the approval widget (anywidget)
load with the first question asked, not at ``%load_ext``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..agent.approvals import NOBODY_TO_ASK, ApprovalDecision, ApprovalRequest, Approver, Scope
from ..clip import capped
from ..conversation.calls import approval_note
from ..escape import escape_controls, escape_text
from ..ui.approval_choices import MAX_SHOWN, choices_for, default_choice

if TYPE_CHECKING:
    from ..ui.approval_widget import ApprovalWidget

log = logging.getLogger(__name__)

#: Seconds a shown question waits for its view to say it was drawn before "nobody is looking".
RENDER_WAIT = 3.0
#: The same wait while a notebook page with dsh's extension is connected to the kernel: a person is looking,
#: and a browser busy with other work (a large output, a machine short of CPU) can take longer than
#: :data:`RENDER_WAIT` to draw the question. Without such a page (nbclient, papermill, a frontend without the
#: extension) a headless run still learns within :data:`RENDER_WAIT` that nobody can answer.
WATCHED_RENDER_WAIT = 30.0
#: How often a question waiting to be drawn asks again whether such a page is connected now.
WATCH_RECHECK = 0.25


class MainThreadRunner(Protocol):
    """The waiting cell's pump of main-thread calls (see :mod:`.python_tool`)."""

    def submit(self, fn: Callable[[], Any]) -> Any: ...


class ApproverHost(Protocol):
    """What the approvers need of the notebook host."""

    main_thread_calls: MainThreadRunner | None


# --------------------------------------------------------------------------- answers


def decision_from_answer(request: ApprovalRequest, answer: Mapping[str, Any]) -> ApprovalDecision | None:
    """A view's (or a terminal's) answer as a decision; ``None`` when the answer makes no sense."""
    choice = answer.get("choice")
    reason = answer.get("reason")
    reason = reason.strip()[:2000] if isinstance(reason, str) and reason.strip() else None
    if choice == "deny":
        return ApprovalDecision(False, "person", reason=reason)
    scopes: dict[str, Scope] = {"once": "once", "session": "session", "prefix": "prefix"}
    scope = scopes.get(choice) if isinstance(choice, str) else None
    if scope is None:
        return None
    if scope == "prefix":
        if request.prefix is None:
            return None
        return ApprovalDecision(True, "person", scope="prefix", prefix=request.prefix)
    return ApprovalDecision(True, "person", scope=scope)


def record_line(request: ApprovalRequest, decision: ApprovalDecision | None, outcome: str | None = None) -> str:
    """The one line a question turns into once it is answered (also its plain-text form)."""
    command = escape_controls(capped(" ".join(request.shown.split()), 80))
    if outcome is None and decision is not None:
        outcome = approval_note(decision.to_json(request, "ask")) or ("allowed" if decision.allowed else "refused")
    return f"{request.tool} `{command}`: {outcome or 'asking'}"


def question_heading(request: ApprovalRequest) -> list[str]:
    """The question's first lines, as a person reads them: what is asked, why, and the hidden-character warning."""
    lines = [f"The agent wants to run {request.tool}" + (f" ({escape_controls(request.reason)})"
                                                         if request.reason else "") + ":"]
    if request.warning:
        lines.append(f"Warning: {request.warning}")
    return lines


# --------------------------------------------------------------------------- terminal


def ask_on_stdin(request: ApprovalRequest, read: Callable[[str], str] | None = None,
                 write: Callable[[str], None] = print) -> ApprovalDecision | None:
    """Ask in a terminal (``read`` defaults to ``input``); ``None`` when there is nothing to read from."""
    read = read or input
    offered = choices_for(request)
    keys = {"once": "y", "session": "s", "prefix": "p", "deny": "n"}
    heading = question_heading(request)
    write("\n" + heading[0])
    for line in heading[1:]:
        write(line)
    write(escape_text(capped(request.shown, MAX_SHOWN)))
    default = default_choice(request) if request.warning else None
    if default is not None:  # the safe answer first, and Enter alone takes it
        offered = sorted(offered, key=lambda pair: pair[0] != default)
    menu = ", ".join(f"[{keys[choice]}] {label}" + (" (Enter)" if choice == default else "")
                     for choice, label in offered)
    by_key = {keys[choice]: choice for choice, _ in offered}
    try:
        while True:
            typed = read(f"{menu}: ").strip().lower()
            choice = by_key.get(typed[:1]) if typed else default
            if choice is None:
                write(f"please type one of {', '.join(by_key)}")
                continue
            reason = read("reason for the agent (optional): ") if choice == "deny" else ""
            return decision_from_answer(request, {"choice": choice, "reason": reason})
    except (EOFError, OSError):
        return None


class StdinApprover:
    """Terminal IPython: the question is asked on the main thread (the waiting cell pumps it)."""

    def __init__(self, host: ApproverHost) -> None:
        self.host = host

    async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None:
        calls = self.host.main_thread_calls
        if calls is not None:
            return await asyncio.wrap_future(calls.submit(lambda: ask_on_stdin(request)))
        return await asyncio.to_thread(ask_on_stdin, request)


# --------------------------------------------------------------------------- the kernel's answer channel

class _AnswerSubshell:
    """The kernel's one subshell for approval answers: created on first use, remembered (or its failure)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subshell_id: str | None = None
        self.failed = False

    def get(self, kernel: Any) -> str | None:
        with self.lock:
            if self.subshell_id is not None or self.failed:
                return self.subshell_id
            if not getattr(kernel, "_supports_kernel_subshells", False):
                self.failed = True
                return None
            try:
                self.subshell_id = _create_subshell()
            except Exception:  # an old or unusual kernel: background turns still get their answers
                log.warning("could not create a subshell for approval answers", exc_info=True)
                self.failed = True
            return self.subshell_id


_answer_subshell = _AnswerSubshell()


def answer_subshell(kernel: Any) -> str | None:
    """This kernel's subshell for approval answers (created once), or ``None`` when it has none."""
    return _answer_subshell.get(kernel)


def _create_subshell() -> str:
    """Ask our own kernel for a subshell through its control channel, as a frontend does."""
    from ipykernel.connect import get_connection_file
    from jupyter_client.blocking.client import BlockingKernelClient

    client = BlockingKernelClient()
    client.load_connection_file(get_connection_file())
    client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
    try:
        message = client.session.msg("create_subshell_request", {})
        client.control_channel.send(message)
        deadline = time.monotonic() + 10
        while True:
            reply = client.control_channel.get_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply.get("parent_header", {}).get("msg_id") == message["header"]["msg_id"]:
                break
        content = reply["content"]
        if content.get("status") != "ok" or not content.get("subshell_id"):
            raise RuntimeError(f"the kernel refused a subshell: {content.get('evalue', content)}")
        return str(content["subshell_id"])
    finally:
        client.stop_channels()


def pin_replies(comm: Any, subshell_id: str | None) -> None:
    """Have the kernel hand every message ``comm`` receives to one thread: the subshell ``subshell_id``, or
    the main shell for ``None``.

    Left alone, ipykernel routes a frontend's message to the subshell the comm last sent from (the parent of
    whatever thread called ``send``); when that subshell is gone by then, the message is never handled and
    the frontend waits for an answer that does not come.
    """
    if comm is not None:
        comm._reply_subshell_for = lambda data, default: subshell_id


# --------------------------------------------------------------------------- the widget approver


class WidgetApprover:
    """Asks with an :class:`ApprovalWidget` in the running turn's cell.

    Foreground turns show each question where the turn has got to (the agent thread displays under the
    running cell). A background turn's cell has finished by then, so :meth:`prepare_cell` reserves an
    empty widget in it as the turn starts; its questions appear there, one after another.
    """

    def __init__(self, kernel: Any, watched: Callable[[], bool] | None = None) -> None:
        self.kernel = kernel
        #: Whether a page with dsh's extension is connected now (:data:`WATCHED_RENDER_WAIT`).
        self.watched = watched
        self._slot: ApprovalWidget | None = None
        self._lock = threading.Lock()

    def _widget(self) -> ApprovalWidget:
        from ..ui.approval_widget import ApprovalWidget

        widget = ApprovalWidget()
        pin_replies(getattr(widget, "comm", None), answer_subshell(self.kernel))
        return widget

    def prepare_cell(self, *, background: bool) -> None:
        """Called on the main thread as a turn starts; a background turn gets its widget now."""
        slot = None
        if background:
            slot = self._widget()
            slot.show(background=True)
        with self._lock:
            self._slot = slot

    def prepare_panel(self, place: Callable[[Any], None]) -> None:
        """Called on the main thread as a chat panel's turn starts: its questions appear in a widget the
        panel places among its own parts (the kernel is idle then, so no cell could show them)."""
        slot = self._widget()
        place(slot)
        slot.shown_at = time.monotonic()  # the browser draws it with the panel's next update
        with self._lock:
            self._slot = slot

    async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None:
        deadline = time.monotonic() + timeout  # the whole question, drawing included
        with self._lock:
            widget, fresh = self._slot, False
        if widget is None or widget.asking:
            widget, fresh = self._widget(), True
        loop = asyncio.get_running_loop()
        rendered: asyncio.Future[None] = loop.create_future()
        answered: asyncio.Future[dict[str, Any]] = loop.create_future()

        def settle(future: asyncio.Future[Any], value: Any) -> None:  # from the answer subshell's thread
            def resolve() -> None:
                if not future.done():
                    future.set_result(value)

            if not loop.is_closed():  # a late message, after the loop that asked has ended, has no one to tell
                with contextlib.suppress(RuntimeError):  # closed between the check and the call
                    loop.call_soon_threadsafe(resolve)

        widget.listen(lambda: settle(rendered, None), lambda answer: settle(answered, answer))
        widget.ask(request)
        if fresh:  # shown with its question, so the plain-text form says what is asked
            widget.show(background=False)  # on the agent thread, under the running cell
        try:
            if not widget.rendered:
                await self._drawn(widget, rendered, deadline)
                if not widget.rendered:
                    widget.settle(record_line(request, None, "refused: nobody could answer here"), False)
                    return None
            while True:
                try:
                    answer = await asyncio.wait_for(asyncio.shield(answered), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    widget.settle(record_line(request, None, "refused: no answer in time"), False)
                    return ApprovalDecision(False, "timeout", reason=NOBODY_TO_ASK)
                decision = decision_from_answer(request, answer)
                if decision is not None:
                    widget.settle(record_line(request, decision), decision.allowed)
                    return decision
                answered = loop.create_future()
                widget.listen(_nothing, partial(settle, answered))
        except asyncio.CancelledError:
            widget.settle(record_line(request, None, "stopped: the turn was interrupted"), False)
            raise

    async def _drawn(self, widget: ApprovalWidget, rendered: asyncio.Future[None], deadline: float) -> None:
        """Wait until the question's view says it was drawn: up to :data:`WATCHED_RENDER_WAIT` while a page with
        dsh's extension is connected, else :data:`RENDER_WAIT`. Asked again every :data:`WATCH_RECHECK` seconds
        while no page is: a page's connection can arrive after the cell began (it is sent when ``%load_ext``
        runs, on a kernel subshell when more cells wait to run), and the question then gets the longer wait."""
        while not widget.rendered:
            looking = self.watched is not None and self.watched()
            left = min(widget.shown_at + (WATCHED_RENDER_WAIT if looking else RENDER_WAIT), deadline) - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(rendered), left if looking else min(left, WATCH_RECHECK))


def _nothing() -> None:
    pass


def approver_for(shell: Any, host: ApproverHost) -> Approver | None:
    """The way this IPython can ask a person, or ``None`` (then calls needing approval are refused)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is not None and getattr(kernel, "session", None) is not None:
        return WidgetApprover(kernel, getattr(host, "page_connected", None))
    if type(shell).__name__ == "TerminalInteractiveShell":
        return StdinApprover(host)
    return None
