"""The kernel's record of the cells it executed: the ``"kernel"`` view of the notebook.

:class:`KernelRecord` is the ``"kernel"`` view of :class:`~.document.NotebookDocument`. It answers in every
frontend (VS Code, nbclient, papermill, terminal IPython) because it only listens to the kernel itself:

- IPython's ``pre_run_cell`` event gives the source and, when the frontend sends one (JupyterLab and
  Notebook 7 do; nbclient 0.11 does not), the cell id; otherwise the id is ``exec-N`` from the execution count;
- ``post_run_cell`` gives the execution count and the error, if any;
- outputs come from three seams: ipykernel's display publisher hooks (``shell.display_pub.register_hook``:
  ``display_data`` bundles), the displayhook's ``log_output`` (the ``execute_result`` bundle, also in terminal
  IPython) and ``sys.stdout``/``sys.stderr`` writes, wrapped for the length of each cell (ipykernel's own
  ``OutStream.register_hook`` hooks run in its IO thread, where hooks registered from the main thread are not
  seen, so they cannot be used here). Tracebacks come from the shell's ``_showtraceback`` (the text the user
  sees, ANSI colours removed).

The record is bounded: at most ``max_cells`` cells (the oldest run is dropped first), ``max_output_chars`` of
output text per cell and ``max_image_bytes`` of images in all (older cells' images are dropped first, and
noted by size). A re-run of a cell id replaces its entry and moves it to the end (execution order).
``%%dsh`` cells are recorded with their source (the agent should see what the user asked) but not their own
output.

While :func:`~.cell_runner.execute_cell` runs a source as a cell, :meth:`KernelRecord.capturing` keeps that
run's outputs from the running ``%%dsh`` cell and collects them (see :mod:`.cell_runner` for how and why).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback as tb
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from .document import (
    AppliedEdit,
    Cell,
    CellNotFound,
    CellOutput,
    Edit,
    EditsUnsupported,
    NotebookError,
    NotebookSnapshot,
    RunResult,
    View,
    is_dsh_cell,
    missing_cell,
)
from .outputs import image_outputs, plain_text, trim_traceback


class RanCell(Protocol):
    """What a runner hands back for a source it ran: the cell as it stands after the run."""

    @property
    def cell(self) -> Cell: ...


class SourceRunner(Protocol):
    """Runs a source as a cell of the kernel on the right thread (:class:`~.cell_runner.CellRunner`)."""

    def execute(self, source: str, cell_id: str | None, timeout: float) -> RanCell: ...

MAX_CELLS = 200
MAX_OUTPUT_CHARS = 20_000
MAX_IMAGE_BYTES = 8_000_000
MAX_CAPTURED_STREAM_CHARS = 1_000_000  # printed text execute_cell hands on for the browser cell

#: Where the agent can add cells when this frontend takes no direct edits (said in refusals).
LIVE_FRONTENDS = "JupyterLab or Notebook 7 with the dsh-jupyter extension"


@dataclass
class _Entry:
    """A cell as recorded (mutable while it runs)."""

    id: str
    source: str
    execution_count: int | None
    dsh: bool
    outputs: list[CellOutput] = field(default_factory=list)
    chars: int = 0
    truncated: int = 0
    image_bytes: int = 0
    finished: bool = False
    ran_at: float = field(default_factory=time.time)  # wall clock (compared with a file's modification time)

    def add(self, output: CellOutput, limit: int) -> None:
        """Append ``output`` (a stream continues the previous one of its name) within ``limit`` characters."""
        if output.kind == "stream" and self.outputs and self.outputs[-1].kind == "stream" \
                and self.outputs[-1].name == output.name:
            last = self.outputs.pop()
            self.chars -= len(last.text)
            output = CellOutput("stream", last.text + output.text, name=output.name)
        room = max(limit - self.chars, 0)
        if output.kind != "error" and len(output.text) > room:
            self.truncated += len(output.text) - room
            if not room and not output.images and output.kind == "stream":
                return
            output = CellOutput(output.kind, output.text[:room], output.name, images=output.images,
                                execution_count=output.execution_count)
        self.chars += len(output.text)
        self.image_bytes += sum(len(image.data) for image in output.images)
        self.outputs.append(output)

    def cell(self) -> Cell:
        outputs = tuple(self.outputs)
        if self.truncated:
            outputs += (CellOutput("stream", f"… ({self.truncated} more output characters were not kept)",
                                   name="stdout"),)
        return Cell(self.id, "code", self.source, self.execution_count, outputs)

    def drop_images(self) -> int:
        freed = self.image_bytes
        if not freed:
            return 0
        kept: list[CellOutput] = []
        for output in self.outputs:
            if not output.images:
                kept.append(output)
                continue
            sizes = ", ".join(f"{image.mime} {len(image.data)} bytes" for image in output.images)
            note = f"[image not kept in the kernel's record: {sizes}]"
            kept.append(CellOutput(output.kind, (output.text + "\n" + note).strip(), output.name,
                                   execution_count=output.execution_count))
        self.outputs = kept
        self.image_bytes = 0
        return freed


@dataclass
class Capture:
    """Outputs of one :func:`~.cell_runner.execute_cell` run, kept from the running cell (nbformat output dicts)."""

    thread: int
    outputs: list[dict[str, Any]] = field(default_factory=list)

    stream_chars: int = 0

    def here(self) -> bool:
        return threading.get_ident() == self.thread

    def stream(self, name: str, text: str) -> None:
        """Stream text for the browser cell, at most :data:`MAX_CAPTURED_STREAM_CHARS` in all."""
        room = MAX_CAPTURED_STREAM_CHARS - self.stream_chars
        if room <= 0:
            return
        if len(text) > room:
            text = text[:room] + "\n… (the rest of this cell's printed output was not kept)\n"
        self.stream_chars += len(text)
        outputs = self.outputs
        if outputs and outputs[-1].get("output_type") == "stream" and outputs[-1]["name"] == name:
            outputs[-1]["text"] += text
        else:
            outputs.append({"output_type": "stream", "name": name, "text": text})


class KernelRecord:
    """The cells this kernel executed (the ``"kernel"`` view), recorded from IPython's events and outputs."""

    def __init__(self, shell: Any, *, max_cells: int = MAX_CELLS, max_output_chars: int = MAX_OUTPUT_CHARS,
                 max_image_bytes: int = MAX_IMAGE_BYTES) -> None:
        self.shell = shell
        self.max_cells = max_cells
        self.max_output_chars = max_output_chars
        self.max_image_bytes = max_image_bytes
        self._cells: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.RLock()
        # Per thread, a stack of running cells (execute_cell nests a cell in the running one) and their streams.
        self._local = threading.local()
        self._capture: Capture | None = None
        self._inserted_for: _Entry | None = None  # the running cell that already asked for a next cell
        self._main_stack: list[_Entry | None] = []
        self._installed = False
        self._undo: list[Callable[[], None]] = []
        #: How :func:`execute_cell` reaches the kernel (set by the host: main-thread calls and the shared lock).
        self.runner: SourceRunner | None = None

    @property
    def view(self) -> View:
        return "kernel"

    # -- installing ---------------------------------------------------------------------------------
    def install(self) -> None:
        """Listen to the shell (once); :meth:`uninstall` removes every hook again."""
        if self._installed:
            return
        self._installed = True
        shell = self.shell
        shell.events.register("pre_run_cell", self._pre_run_cell)
        shell.events.register("post_run_cell", self._post_run_cell)
        self._undo.append(lambda: _unregister(shell.events, "pre_run_cell", self._pre_run_cell))
        self._undo.append(lambda: _unregister(shell.events, "post_run_cell", self._post_run_cell))
        display_pub = getattr(shell, "display_pub", None)
        if display_pub is not None and hasattr(display_pub, "register_hook"):
            display_pub.register_hook(self._display_hook)
            self._undo.append(lambda: display_pub.unregister_hook(self._display_hook))
        displayhook = getattr(shell, "displayhook", None)
        if displayhook is not None and hasattr(displayhook, "log_output"):
            original_log = displayhook.log_output

            def log_output(format_dict: dict[str, Any]) -> None:
                original_log(format_dict)
                self._result(format_dict, getattr(displayhook, "prompt_count", None))

            displayhook.log_output = log_output
            self._undo.append(lambda: _restore(displayhook, "log_output", log_output))
            if hasattr(displayhook, "finish_displayhook"):
                original_finish = displayhook.finish_displayhook

                def finish_displayhook() -> None:
                    capture = self._capture
                    if capture is not None and capture.here() and hasattr(displayhook, "msg"):
                        displayhook.msg = None  # ipykernel: the execute_result stays out of the running cell
                    original_finish()  # (a terminal's echo is kept out by the stream wrapper)

                displayhook.finish_displayhook = finish_displayhook
                self._undo.append(lambda: _restore(displayhook, "finish_displayhook", finish_displayhook))
        if hasattr(shell, "_showtraceback"):
            original_show = shell._showtraceback

            def showtraceback(etype: Any, evalue: Any, stb: Any) -> Any:
                self._traceback(etype, evalue, stb)
                capture = self._capture
                if capture is not None and capture.here():
                    return None
                return original_show(etype, evalue, stb)

            shell._showtraceback = showtraceback
            self._undo.append(lambda: _restore(shell, "_showtraceback", showtraceback))

    def uninstall(self) -> None:
        while self._undo:
            undo = self._undo.pop()
            with suppress(Exception):  # a hook someone else already removed
                undo()
        self._installed = False

    # -- the events ---------------------------------------------------------------------------------
    def _pre_run_cell(self, info: Any) -> None:
        self._infos().append(info)
        if not getattr(info, "store_history", True) or getattr(info, "silent", False):
            self._stack().append(None)
            self._wrap_streams(None)
            return
        source = str(getattr(info, "raw_cell", "") or "")
        count = int(self.shell.execution_count) - 1
        cell_id = getattr(info, "cell_id", None) or f"exec-{count}"
        entry = _Entry(str(cell_id), source, count, is_dsh_cell(source))
        with self._lock:
            old = self._cells.pop(entry.id, None)
            self._cells[entry.id] = entry
            while len(self._cells) > self.max_cells:
                self._cells.popitem(last=False)
            if old is not None:
                old.outputs.clear()
        self._stack().append(entry)
        self._wrap_streams(entry)

    def _post_run_cell(self, result: Any) -> None:
        infos = self._infos()
        if not infos or (result is not None and getattr(result, "info", infos[-1]) is not infos[-1]):
            return  # an empty cell: IPython fires post_run_cell without pre_run_cell
        infos.pop()
        self._unwrap_streams()
        stack = self._stack()
        entry = stack.pop() if stack else None
        if entry is None:
            return
        entry.finished = True
        count = getattr(result, "execution_count", None)
        if isinstance(count, int):
            entry.execution_count = count
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        with self._lock:
            if error is not None and not any(o.kind == "error" for o in entry.outputs):
                lines = tb.format_exception(type(error), error, error.__traceback__)
                entry.add(self._error_output(type(error), error, lines), self.max_output_chars)
            if entry.image_bytes:  # only a cell that added images can pass the budget
                self._fit_images()

    @staticmethod
    def _error_output(etype: Any, evalue: Any, stb: Any) -> CellOutput:
        name = getattr(etype, "__name__", str(etype))
        value = str(evalue)
        lines = trim_traceback(list(stb) if isinstance(stb, list | tuple) else [str(stb)])
        return CellOutput("error", f"{name}: {value}", ename=name, evalue=value, traceback=lines)

    def _traceback(self, etype: Any, evalue: Any, stb: Any) -> None:
        entry = self._running()
        capture = self._capture
        if capture is not None and capture.here():
            capture.outputs.append({"output_type": "error", "ename": getattr(etype, "__name__", str(etype)),
                                    "evalue": str(evalue), "traceback": [str(line) for line in stb or []]})
        if entry is None or entry.dsh:
            return
        with self._lock:
            entry.add(self._error_output(etype, evalue, stb), self.max_output_chars)

    def _result(self, format_dict: Mapping[str, Any], count: Any) -> None:
        capture = self._capture
        if capture is not None and capture.here():
            capture.outputs.append({"output_type": "execute_result", "execution_count": count,
                                    "data": dict(format_dict), "metadata": {}})
        entry = self._running()
        if entry is None or entry.dsh:
            return
        output = CellOutput("result", plain_text(format_dict), images=image_outputs(format_dict),
                            execution_count=count if isinstance(count, int) else entry.execution_count)
        with self._lock:
            entry.add(output, self.max_output_chars)

    def _display_hook(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        try:
            kind = msg.get("header", {}).get("msg_type") or msg.get("msg_type")
            content = msg.get("content", {})
            capture = self._capture
            captured = capture is not None and capture.here()
            entry = self._running()
            if entry is not None and not entry.dsh and kind == "display_data":
                bundle = content.get("data", {})
                with self._lock:
                    entry.add(CellOutput("display", plain_text(bundle), images=image_outputs(bundle)),
                              self.max_output_chars)
            if not captured or capture is None or kind == "update_display_data":
                return msg  # an update of an earlier display still reaches it
            if kind == "display_data":
                capture.outputs.append({"output_type": "display_data", "data": dict(content.get("data", {})),
                                        "metadata": dict(content.get("metadata", {}))})
            elif kind == "clear_output":
                capture.outputs.clear()
            return None
        except Exception:  # the user's output must never be lost to the record
            return msg
        return msg

    def _stack(self) -> list[_Entry | None]:
        if threading.current_thread() is threading.main_thread():
            return self._main_stack
        stack: list[_Entry | None] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _infos(self) -> list[Any]:
        infos: list[Any] | None = getattr(self._local, "infos", None)
        if infos is None:
            infos = self._local.infos = []
        return infos

    def _stream_stack(self) -> list[list[tuple[Any, Callable[..., Any], Callable[..., Any]]]]:
        streams: list[list[tuple[Any, Callable[..., Any], Callable[..., Any]]]] | None = \
            getattr(self._local, "streams", None)
        if streams is None:
            streams = self._local.streams = []
        return streams

    def _main_running(self) -> _Entry | None:
        """The cell the kernel's main thread runs (the outermost recorded one), if any."""
        return next((entry for entry in self._main_stack if entry is not None), None)

    def running_cell_id(self) -> str | None:
        """The id of the cell the kernel's main thread runs now (a ``%%dsh`` cell sending its prompt), or ``None``."""
        running = self._main_running()
        return running.id if running is not None else None

    def _running(self) -> _Entry | None:
        """The cell running on this thread (the innermost one), if it is recorded."""
        stack = self._stack()
        return stack[-1] if stack else None

    # -- streams ------------------------------------------------------------------------------------
    def _wrap_streams(self, entry: _Entry | None) -> None:
        wrapped: list[tuple[Any, Callable[..., Any], Callable[..., Any]]] = []
        thread = threading.get_ident()
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name, None)
            original = getattr(stream, "write", None)
            if stream is None or original is None:
                continue
            write = self._stream_writer(entry, name, original, thread)
            try:
                stream.write = write
            except (AttributeError, TypeError):
                continue
            wrapped.append((stream, write, original))
        self._stream_stack().append(wrapped)

    def _stream_writer(self, entry: _Entry | None, name: str, original: Callable[..., Any],
                       thread: int) -> Callable[..., Any]:
        def write(data: Any, *args: Any) -> Any:
            if threading.get_ident() != thread or not isinstance(data, str) or not data:
                return original(data, *args)
            capture = self._capture
            captured = capture is not None and capture.here()
            if self._echoing():  # a terminal's "Out[n]:" or traceback: recorded as the result or error already
                return len(data) if captured else original(data, *args)
            if captured and capture is not None:
                capture.stream(name, data)
            if entry is not None and not entry.dsh and not entry.finished:
                with self._lock:
                    entry.add(CellOutput("stream", data, name=name), self.max_output_chars)
            return len(data) if captured else original(data, *args)

        return write

    def _echoing(self) -> bool:
        shell = self.shell
        return bool(getattr(getattr(shell, "displayhook", None), "is_active", False)
                    or getattr(shell, "showing_traceback", False)
                    or getattr(getattr(shell, "display_pub", None), "is_publishing", False))

    def _unwrap_streams(self) -> None:
        streams = self._stream_stack()
        if not streams:
            return
        for stream, write, original in streams.pop():
            if getattr(stream, "write", None) is write:
                with suppress(AttributeError, TypeError):
                    stream.write = original

    def _fit_images(self) -> None:
        total = sum(entry.image_bytes for entry in self._cells.values())
        for entry in list(self._cells.values()):
            if total <= self.max_image_bytes:
                return
            total -= entry.drop_images()

    # -- reading ------------------------------------------------------------------------------------
    def cells(self) -> list[Cell]:
        with self._lock:
            return [entry.cell() for entry in self._cells.values()]

    def executions(self) -> list[tuple[str, float]]:
        """The source of each recorded cell and when it started (seconds since the epoch)."""
        with self._lock:
            return [(entry.source, entry.ran_at) for entry in self._cells.values()]

    def get(self, cell_id: str) -> Cell | None:
        with self._lock:
            entry = self._cells.get(cell_id)
            return entry.cell() if entry is not None else None

    def last_error(self) -> Cell | None:
        """The most recent cell whose last run failed (source and error output), or ``None``."""
        with self._lock:
            for entry in reversed(self._cells.values()):
                if entry.dsh:
                    continue
                if any(output.kind == "error" for output in entry.outputs):
                    return entry.cell()
        return None

    def read(self) -> NotebookSnapshot:
        return NotebookSnapshot("kernel", tuple(self.cells()))

    # -- editing and running ------------------------------------------------------------------------
    def apply(self, edit: Edit) -> AppliedEdit:
        """Only ``insert``: the new cell comes through ``set_next_input`` (below the running cell, when it ends)."""
        if edit.action != "insert":
            raise EditsUnsupported(
                f"this frontend only shows the kernel's record of executed cells, so the agent cannot "
                f"{edit.action} an existing cell here; it can do that in {LIVE_FRONTENDS}, in VS Code once the "
                "notebook is saved (it then edits the saved file), or add a new cell (notebook_edit with action "
                "insert)")
        if edit.cell_id is not None and self.get(edit.cell_id) is None:
            raise CellNotFound(missing_cell(edit.cell_id, "kernel"))
        if edit.cell_type != "code":
            raise EditsUnsupported(f"this frontend can only receive new code cells from the kernel, not "
                                   f"{edit.cell_type} cells; {LIVE_FRONTENDS} can take them")
        shell = self.shell
        if not hasattr(shell, "set_next_input"):
            raise EditsUnsupported(f"this kernel cannot propose new cells; {LIVE_FRONTENDS} can")
        running = self._main_running()
        with self._lock:
            if running is not None and self._inserted_for is running:
                raise EditsUnsupported(
                    "this frontend takes one new cell per %%dsh cell (through set_next_input) and this turn "
                    "already added one; put all the code in that one cell, or add the next one in a later turn")
            self._inserted_for = running
        count = int(shell.execution_count)
        shell.set_next_input(edit.source, replace=False)
        new_id = f"next-input-{count}"
        after = Cell(new_id, "code", edit.source)
        where = "below the running %%dsh cell" if running is not None and running.dsh else "as the next input"
        note = (f"the new cell appears {where} when that cell finishes, in frontends that take IPython's "
                "set_next_input payload (JupyterLab, Notebook, VS Code); it gets its real id when it runs, "
                "and the position asked for is not honoured here")
        return AppliedEdit("insert", new_id, None, after, None, note)

    def run(self, cell_id: str, timeout: float) -> RunResult:
        cell = self.get(cell_id)
        if cell is None:
            raise CellNotFound(missing_cell(cell_id, "kernel"))
        if is_dsh_cell(cell.source):
            raise NotebookError(f"cell {cell_id!r} is a %%dsh prompt; the agent cannot run prompt cells")
        runner = self.runner
        if runner is None:
            raise NotebookError("cells cannot be run from here (no kernel runner)")
        executed = runner.execute(cell.source, cell_id, timeout)
        return RunResult(executed.cell, "kernel")

    # -- execute_cell's capture ---------------------------------------------------------------------
    @contextmanager
    def capturing(self) -> Iterator[Capture]:
        """Within: outputs made on this thread are kept from the running cell and collected."""
        capture = Capture(threading.get_ident())
        hooked = False
        display_pub = getattr(self.shell, "display_pub", None)
        with self._lock:
            previous = self._capture
            self._capture = capture
        if threading.current_thread() is not threading.main_thread() and display_pub is not None \
                and hasattr(display_pub, "register_hook"):
            display_pub.register_hook(self._display_hook)  # ipykernel's hooks are per thread
            hooked = True
        try:
            yield capture
        finally:
            if hooked and display_pub is not None:
                display_pub.unregister_hook(self._display_hook)
            with self._lock:
                self._capture = previous


def _unregister(events: Any, name: str, callback: Callable[..., Any]) -> None:
    with suppress(ValueError):
        events.unregister(name, callback)


def _restore(owner: Any, name: str, wrapper: Callable[..., Any]) -> None:
    """Remove our instance-level ``wrapper`` of ``owner.name`` (the class's method shows again)."""
    if owner.__dict__.get(name) is wrapper:
        del owner.__dict__[name]

