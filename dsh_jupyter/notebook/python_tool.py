"""The ``python`` tool: the agent runs Python in this kernel's namespace, visibly.

While a foreground ``%%dsh`` cell waits, the code runs on the kernel's main thread (the cell pumps
:class:`MainThreadCalls`), so it sees and changes the notebook's variables exactly as a cell would.
During a background turn there is no waiting cell: the code then runs on the agent thread under a lock.

Printed text, errors and the value of a final expression go to the tool result only, which the cell
shows once, inside the call's collapsed tool line. Rich outputs the code displays itself (``display``
of a figure or a table) cannot live in that line: in a foreground cell they appear below it. Image
outputs (a matplotlib figure drawn with the inline backend, ``display(Image(...))``) are also attached
to the result as :class:`~dsh_jupyter.tools.base.ToolImage` values, in foreground and background turns
alike (at most :data:`MAX_IMAGES` per call), so the agent loop can store them and show them to the model.

The tool depends on :class:`~.protocols.PythonToolHost`, not on the notebook host.

Deferred imports: IPython's capture and display publisher and matplotlib's inline backend load when the
tool first runs code, not when the tool is registered.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import binascii
import concurrent.futures
import contextlib
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..clip import capped
from ..images import ToolImage
from ..tools.base import MAX_RESULT_CHARS, Tool, ToolExecution, ToolOutput
from .protocols import PythonToolHost

if TYPE_CHECKING:
    from IPython.utils.capture import RichOutput

_T = TypeVar("_T")

#: Images attached to one result; further ones are only counted in the text.
MAX_IMAGES = 8
#: Display types attached as images, in order of preference (one per output).
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")


class MainThreadCalls:
    """Callables the agent thread wants run on the main thread, pumped by the waiting cell."""

    def __init__(self, *, turn_cell: bool) -> None:
        #: The pumping cell is the running turn's own ``%%dsh`` cell (``False``: ``%dsh wait``, ``%dsh compact``).
        self.turn_cell = turn_cell
        self._queue: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = queue.Queue()

    def submit(self, fn: Callable[[], _T]) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self._queue.put((fn, future))
        return future

    def wake(self) -> None:
        """Make a waiting :meth:`pump` return at once (call when the awaited work finishes)."""
        self._queue.put((lambda: None, concurrent.futures.Future()))

    def pump(self, timeout: float) -> bool:
        """Run at most one pending call; False when none arrived within ``timeout`` seconds."""
        try:
            fn, future = self._queue.get(timeout=timeout)
        except queue.Empty:
            return False
        if not future.set_running_or_notify_cancel():
            return True
        try:
            future.set_result(fn())
        except BaseException as exc:  # KeyboardInterrupt included: the caller decides
            future.set_exception(exc)
        return True

    def drain_cancelled(self) -> None:
        while True:
            try:
                _, future = self._queue.get_nowait()
            except queue.Empty:
                return
            future.cancel()


class PythonTool(Tool):
    name = "python"
    effect = "act"
    description = (
        "Run Python code in the user's Jupyter kernel. It shares the notebook's variables and imports; "
        "printed output and the value of a final expression are returned. Use it to inspect data the "
        "user has loaded or to compute results."
    )

    def __init__(self, host: PythonToolHost, lock: threading.Lock | None = None) -> None:
        self.parameters = {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source to run in the kernel."}},
            "required": ["code"],
        }
        self.host = host
        self._lock = lock or threading.Lock()  # the host's kernel execution lock, shared with notebook_run

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolOutput("Error: 'code' must be a non-empty string of Python source.", is_error=True)
        calls = self.host.main_thread_calls
        result: asyncio.Future[ToolOutput]
        if calls is not None and not execution.background:
            result = asyncio.wrap_future(calls.submit(lambda: self._execute(code, visible=True)))
        else:
            result = asyncio.get_running_loop().run_in_executor(None, self._locked_execute, code)
        try:
            return await result
        except KeyboardInterrupt:
            return ToolOutput("The Python code was interrupted.", is_error=True, meta={"interrupted": True})

    def _locked_execute(self, code: str) -> ToolOutput:
        with self._lock:
            return self._execute(code, visible=False)

    def _execute(self, code: str, *, visible: bool) -> ToolOutput:
        from IPython.utils.capture import capture_output

        shell = self.host.shell
        namespace = shell.user_ns
        try:
            source = shell.transform_cell(code)
            tree = ast.parse(source, "<dsh-python>", "exec")
        except SyntaxError as exc:
            return ToolOutput("SyntaxError: " + "".join(traceback.format_exception_only(exc)).strip(), is_error=True)
        last_expr = None
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr):
            tree.body.pop()
            last_expr = ast.Expression(last.value)
        value: Any = None
        error: str | None = None
        with capture_output(display=False) as captured, _this_thread_displays(shell) as displays:
            try:
                exec(compile(tree, "<dsh-python>", "exec"), namespace)
                if last_expr is not None:
                    value = eval(compile(last_expr, "<dsh-python>", "eval"), namespace)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # the model sees the traceback and can fix its code
                shown = exc.__traceback__.tb_next if exc.__traceback__ else None  # without this module's frame
                error = "".join(traceback.format_exception(type(exc), exc, shown))
            _flush_inline_figures()
        parts = [captured.stdout, captured.stderr]
        images: list[ToolImage] = []
        skipped = 0
        for output in displays:
            parts.append(str(output.data.get("text/plain", "")))
            image = _output_image(output.data)
            if image is not None:
                if len(images) < MAX_IMAGES:
                    images.append(image)
                else:
                    skipped += 1
            if visible and set(output.data) - {"text/plain"}:
                output.display()  # a figure, a table: it cannot live in the tool line
        if skipped:
            parts.append(f"({skipped} more images were displayed; only the first {MAX_IMAGES} are attached)")
        if value is not None:
            parts.append(f"Out: {value!r}")
        if error:
            parts.append(error)
        text = "\n".join(p.rstrip("\n") for p in parts if p and p.strip()) or "(no output)"
        return ToolOutput(capped(text, MAX_RESULT_CHARS), is_error=error is not None, images=tuple(images))


@contextlib.contextmanager
def _this_thread_displays(shell: Any) -> Iterator[list[RichOutput]]:
    """Keep what the code displays on this thread (a list of ``RichOutput``). Displays of other threads (the
    cell's own live transcript, a user's cell during a background run) and the kernel's calls on its
    publisher (``set_parent`` for the next message) go on to the kernel's own publisher."""
    from IPython.core.displaypub import DisplayPublisher
    from IPython.utils.capture import RichOutput

    captured: list[RichOutput] = []
    real = shell.display_pub
    owner = threading.get_ident()

    class ThreadDisplays(DisplayPublisher):
        def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
            if threading.get_ident() == owner:
                captured.append(RichOutput(data=data, metadata=metadata))
            else:
                real.publish(data, metadata, *args, **kwargs)

        def clear_output(self, wait: bool = False) -> None:
            if threading.get_ident() != owner:
                real.clear_output(wait)

        def __getattr__(self, name: str) -> Any:  # set_parent, session, pub_socket...: the kernel's publisher
            return getattr(real, name)

    shell.display_pub = ThreadDisplays()  # type: ignore[no-untyped-call]
    try:
        yield captured
    finally:
        if shell.display_pub is not real:
            shell.display_pub = real


def _flush_inline_figures() -> None:
    """Display the figures the code drew, as a cell's end would (only with matplotlib's inline backend)."""
    if "matplotlib.pyplot" not in sys.modules or "matplotlib_inline.backend_inline" not in sys.modules:
        return
    import matplotlib
    from matplotlib_inline.backend_inline import flush_figures

    if "inline" in str(matplotlib.get_backend()):
        try:
            flush_figures()  # type: ignore[no-untyped-call]
        except Exception:  # a figure that fails to draw must not hide the code's own result
            return


def _output_image(data: Mapping[str, Any]) -> ToolImage | None:
    """The image of one display output (decoded from the base64 Jupyter sends), or ``None``."""
    for mime in _IMAGE_TYPES:
        raw = data.get(mime)
        if isinstance(raw, bytes):
            return ToolImage(mime, raw)
        if isinstance(raw, str) and mime == "image/svg+xml":  # text, not base64: the loop notes it for the model
            return ToolImage(mime, raw.encode("utf-8"))
        if isinstance(raw, str):
            try:
                return ToolImage(mime, base64.b64decode(raw, validate=False))
            except (binascii.Error, ValueError):
                return ToolImage(mime, b"")  # the loop notes an image it cannot read
    return None
