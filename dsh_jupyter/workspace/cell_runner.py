"""Running a source as a real cell of the kernel (:func:`execute_cell`), on the right thread (:class:`CellRunner`).

:func:`execute_cell` runs a source as a cell would. It uses ``shell.run_cell(source, store_history=True,
cell_id=...)``, nested inside the running ``%%dsh`` magic. Measured in ipykernel 7.4 / IPython 9.18
(tests/test_workspace_cells.py, the kernel test): the nested call works because ``run_cell`` is re-entrant
for synchronous code (the builtin and display traps count their nesting, ``displayhook.exec_result`` is set
and reset around the inner run only); it applies IPython's transforms and magics, shows a final expression's
value, counts as an execution (``In``/``Out`` and the execution count advance) and fires the cell events, so
this record is updated under the given id by the same code as any cell. Its outputs are captured instead of
reaching the running cell: display messages through the publisher hook (which returns ``None``), the
``execute_result`` by suppressing the displayhook's send, stream writes by the wrapper and the error by the
``_showtraceback`` wrapper. Two caveats, written down here so nobody re-measures them: a cell with a top-level
``await`` cannot be run this way (the kernel's event loop is already running: the cell fails with
``RuntimeError: This event loop is already running`` and the kernel carries on; the tool says why), and
the running ``%%dsh`` cell's execute_reply reports the latest execution count, so the frontend numbers it
after the cells it ran. Alternatives considered: ``exec`` of the transformed source (as the
``python`` tool does) would not count as an execution nor fire the events; sending an ``execute_request`` to
the kernel's own shell channel would wait for the running ``%%dsh`` cell to end, which waits for the tool.

Threads (:class:`CellRunner`): during a foreground ``%%dsh`` cell the source runs on the kernel's main thread
(through ``host.main_thread_calls``), where ``timeout`` interrupts it and the user's Stop interrupts it and
ends the turn; during a ``--bg`` turn it runs on the caller's thread under the kernel execution lock shared
with the ``python`` tool (no timeout there: a thread cannot be interrupted).
"""

from __future__ import annotations

import _thread
import concurrent.futures
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from .document import Cell, CellNotFound, NotebookError, RunResult, is_dsh_cell, missing_cell
from .kernel_record import KernelRecord
from .outputs import output_from_json

_T = TypeVar("_T")

class MainThreadRunner(Protocol):
    """Runs callables on the kernel's main thread (while a foreground cell waits and pumps them)."""

    #: Whether the pumping cell is the running turn's own ``%%dsh`` cell (not a ``%dsh wait`` serving a ``--bg``
    #: turn): only then does a new cell sent through ``set_next_input`` land under the turn's cell.
    turn_cell: bool

    def submit(self, fn: Callable[[], _T]) -> concurrent.futures.Future[_T]: ...

DEFAULT_RUN_TIMEOUT = 120.0


@dataclass(frozen=True)
class ExecutedCell:
    """What :func:`execute_cell` hands back: the recorded cell, nbformat outputs, and how the run ended."""

    cell: Cell
    outputs: tuple[dict[str, Any], ...]
    status: Literal["ok", "error", "interrupted", "timeout"]

    @property
    def interrupted(self) -> bool:
        return self.status in ("interrupted", "timeout")


def execute_cell(record: KernelRecord, source: str, *, cell_id: str | None = None,
                 timeout: float = DEFAULT_RUN_TIMEOUT) -> ExecutedCell:
    """Run ``source`` as a real cell of ``record``'s shell, on the current thread, capturing its outputs.

    The caller chooses the thread (see :class:`CellRunner`). On the main thread a run longer than ``timeout``
    seconds is interrupted (``status`` ``"timeout"``); an interrupt of the kernel gives ``"interrupted"``.
    """
    shell = record.shell
    cell_id = cell_id or None
    state = {"running": True, "timed_out": False}
    guard = threading.Lock()
    timer: threading.Timer | None = None
    if threading.current_thread() is threading.main_thread() and timeout > 0:
        def expire() -> None:
            with guard:
                if state["running"]:
                    state["timed_out"] = True
                    _thread.interrupt_main()

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
    status: Literal["ok", "error", "interrupted", "timeout"] = "ok"
    result: Any = None
    with record.capturing() as capture:
        try:
            if timer is not None:
                timer.start()
            try:
                result = shell.run_cell(source, store_history=True, cell_id=cell_id)
            finally:
                with guard:
                    state["running"] = False
                if timer is not None:
                    timer.cancel()
        except KeyboardInterrupt:
            status = "interrupted"
    error = None if result is None else (getattr(result, "error_in_exec", None)
                                         or getattr(result, "error_before_exec", None))
    if isinstance(error, KeyboardInterrupt):
        status = "interrupted"
    elif error is not None:
        status = "error"
    if state["timed_out"] and status == "interrupted":
        status = "timeout"
    count = getattr(result, "execution_count", None)
    recorded = record.get(cell_id) if cell_id else None
    if recorded is None and isinstance(count, int):
        recorded = record.get(f"exec-{count}")
    if recorded is None:  # the record is not listening (or dropped it): build the cell from the capture
        recorded = Cell(cell_id or f"exec-{count}", "code", source, count if isinstance(count, int) else None,
                        tuple(o for o in map(output_from_json, capture.outputs) if o is not None))
    return ExecutedCell(recorded, tuple(capture.outputs), status)


class RunnerHost(Protocol):
    """Where :class:`CellRunner` finds the main-thread runner (set while a foreground cell waits), and how it
    stops the turn when the user interrupts the kernel during a run (Stop means stop, not "next tool")."""

    @property
    def main_thread_calls(self) -> MainThreadRunner | None: ...

    def cancel(self) -> None: ...


class CellRunner:
    """Runs sources as cells on the right thread: the main thread while a foreground ``%%dsh`` cell waits
    (it pumps ``host.main_thread_calls``), else the caller's thread under ``lock`` (the kernel execution lock
    the ``python`` tool shares)."""

    def __init__(self, record: KernelRecord, host: RunnerHost, lock: threading.Lock) -> None:
        self.record = record
        self.host = host
        self.lock = lock

    def execute(self, source: str, cell_id: str | None, timeout: float) -> ExecutedCell:
        def run() -> ExecutedCell:
            return execute_cell(self.record, source, cell_id=cell_id, timeout=timeout)

        if threading.current_thread() is threading.main_thread():
            return run()
        calls = self.host.main_thread_calls
        if calls is not None:
            future = calls.submit(run)
            try:
                executed = future.result(timeout=timeout + 30)
            except concurrent.futures.TimeoutError:
                raise NotebookError(f"the cell did not finish within {timeout:g} seconds") from None
            except KeyboardInterrupt:
                executed = self._interrupted(source, cell_id)
            if executed.status == "interrupted":  # the user pressed Stop while the cell ran: end the turn too
                self.host.cancel()
            return executed
        if not self.lock.acquire(timeout=timeout):
            raise NotebookError("the kernel is busy running other agent code; try again when it finishes")
        try:
            return run()
        finally:
            self.lock.release()

    def _interrupted(self, source: str, cell_id: str | None) -> ExecutedCell:
        cell = self.record.get(cell_id) if cell_id else None
        return ExecutedCell(cell or Cell(cell_id or "", "code", source), (), "interrupted")


#: Runs a cell's source as a cell of the kernel and returns what ran (``host.execute_cell``).
Runner = Callable[[str, str, float], Any]


def run_document_cell(document: Any, cell_id: str, timeout: float, runner: Runner | None,
                      put: Callable[[str, list[dict[str, Any]], int | None], None]) -> RunResult:
    """Run code cell ``cell_id`` of ``document`` (any view but the kernel's) with ``runner`` and put its outputs
    back into the cell with ``put``; the same checks everywhere (code cells only, never a ``%%dsh`` prompt)."""
    cell = next((c for c in document.read().cells if c.id == cell_id), None)
    if cell is None:
        raise CellNotFound(missing_cell(cell_id, document.view))
    if cell.cell_type != "code":
        raise NotebookError(f"cell {cell_id!r} is a {cell.cell_type} cell; only code cells run")
    if is_dsh_cell(cell.source):
        raise NotebookError(f"cell {cell_id!r} is a %%dsh prompt; the agent cannot run prompt cells")
    if runner is None:
        raise NotebookError("this kernel cannot run notebook cells for the agent")
    ran = runner(cell.source, cell_id, timeout)
    count = ran.cell.execution_count
    put(cell_id, [dict(o) for o in ran.outputs], count)
    return RunResult(Cell(cell_id, "code", cell.source, count, ran.cell.outputs, cell.metadata), document.view)
