"""The kernel's record of executed cells and execute_cell: in a real IPython shell, and in a real kernel."""

from __future__ import annotations

import base64
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from kernel_helpers import KernelRunner, stream_text

from dsh_jupyter.workspace.cell_runner import CellRunner, execute_cell
from dsh_jupyter.workspace.document import CellNotFound, Edit, EditsUnsupported, NotebookError
from dsh_jupyter.workspace.kernel_record import KernelRecord
from dsh_jupyter.workspace.outputs import strip_ansi, trim_traceback


class NoRunner:
    main_thread_calls: Any = None
    cancelled = 0

    def cancel(self) -> None:
        self.cancelled += 1


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    yield ip


@pytest.fixture
def record(shell: InteractiveShell) -> Iterator[KernelRecord]:
    rec = KernelRecord(shell)
    rec.install()
    try:
        yield rec
    finally:
        rec.uninstall()


def run(shell: InteractiveShell, source: str, cell_id: str | None = None) -> Any:
    return shell.run_cell(source, store_history=True, cell_id=cell_id)


def test_records_source_id_count_streams_result_and_error(shell: InteractiveShell, record: KernelRecord) -> None:
    run(shell, "v = 20\nprint('out-text')\nprint('err-text', file=__import__('sys').stderr)\nv + 1", "cell-a")
    run(shell, "def boom():\n    raise ValueError('bad value')\nboom()", "cell-b")
    run(shell, "print('no id')")
    cells = record.cells()
    assert [c.id for c in cells][-3:] == ["cell-a", "cell-b", f"exec-{shell.execution_count - 1}"]
    a, b, c = cells[-3:]
    assert a.source.startswith("v = 20") and a.execution_count == shell.execution_count - 3
    kinds = [(o.kind, o.name, o.text) for o in a.outputs]
    assert ("stream", "stdout", "out-text\n") in kinds and ("stream", "stderr", "err-text\n") in kinds
    assert ("result", None, "21") in kinds
    assert not any("Out[" in o.text for o in a.outputs)  # the terminal's echo is not recorded as a stream
    error = b.error
    assert error is not None and error.ename == "ValueError" and error.evalue == "bad value"
    assert error.text == "ValueError: bad value"
    assert any("raise ValueError('bad value')" in line for line in error.traceback)
    assert not any("\x1b[" in line for line in error.traceback)
    assert [o.kind for o in b.outputs] == ["error"]  # the printed traceback is not a stream too
    assert c.outputs[0].text == "no id\n"


def test_an_empty_cell_inside_a_cell_leaves_the_running_cell_recorded(shell: InteractiveShell,
                                                                      record: KernelRecord) -> None:
    shell.user_ns["_empty"] = lambda: shell.run_cell("  ", store_history=True)
    run(shell, "_empty()\nprint('still recorded')", "outer")
    outer = record.get("outer")
    assert outer is not None and [o.text for o in outer.outputs] == ["still recorded\n"]
    run(shell, "", "blank")
    run(shell, "print('after blank')", "later")
    later = record.get("later")
    assert later is not None and later.outputs[0].text == "after blank\n"


def test_syntax_errors_are_recorded(shell: InteractiveShell, record: KernelRecord) -> None:
    run(shell, "def (", "bad-syntax")
    cell = record.get("bad-syntax")
    assert cell is not None and cell.error is not None and cell.error.ename == "SyntaxError"


def test_a_rerun_replaces_the_entry_and_moves_it_last(shell: InteractiveShell, record: KernelRecord) -> None:
    run(shell, "print('first')", "same")
    run(shell, "print('other')", "other")
    run(shell, "print('second')", "same")
    ids = [c.id for c in record.cells()]
    assert ids.count("same") == 1 and ids[-1] == "same"
    cell = record.get("same")
    assert cell is not None and cell.source == "print('second')"
    assert [o.text for o in cell.outputs] == ["second\n"]


def test_last_error_is_the_latest_failing_cell_until_it_is_fixed(shell: InteractiveShell,
                                                                 record: KernelRecord) -> None:
    run(shell, "1/0", "e1")
    run(shell, "[][1]", "e2")
    run(shell, "print('fine')", "ok")
    last = record.last_error()
    assert last is not None and last.id == "e2" and last.error is not None and last.error.ename == "IndexError"
    run(shell, "[1][0]", "e2")
    last = record.last_error()
    assert last is not None and last.id == "e1"
    run(shell, "1/1", "e1")
    assert record.last_error() is None


def test_dsh_cells_keep_their_source_not_their_output(shell: InteractiveShell, record: KernelRecord) -> None:
    shell.register_magic_function(lambda line, cell: print("the agent's long answer"), "cell", "dsh")
    run(shell, "%%dsh\nfix my plot", "prompt")
    cell = record.get("prompt")
    assert cell is not None and cell.source == "%%dsh\nfix my plot" and cell.outputs == ()


def test_the_record_is_bounded(shell: InteractiveShell) -> None:
    record = KernelRecord(shell, max_cells=3, max_output_chars=50)
    record.install()
    try:
        for i in range(6):
            run(shell, f"print('{i}' * 200)", f"b{i}")
        assert [c.id for c in record.cells()] == ["b3", "b4", "b5"]
        cell = record.get("b5")
        assert cell is not None
        assert len(cell.outputs[0].text) == 50 and "151 more output characters were not kept" in cell.outputs[-1].text
        run(shell, "for i in range(1000): print(i)", "many")
        many = record.get("many")
        assert many is not None and sum(len(o.text) for o in many.outputs[:-1]) == 50
    finally:
        record.uninstall()


def test_images_share_one_byte_budget_oldest_dropped_first(shell: InteractiveShell) -> None:
    record = KernelRecord(shell, max_image_bytes=250)
    png = base64.b64encode(b"\x89PNG" + b"1" * 96).decode()
    for i in range(3):
        record._pre_run_cell(type("Info", (), {"raw_cell": f"plot({i})", "cell_id": f"p{i}", "store_history": True,
                                               "silent": False})())
        record._display_hook({"header": {"msg_type": "display_data"},
                              "content": {"data": {"text/plain": "<Figure>", "image/png": png}, "metadata": {}}})
        record._post_run_cell(None)
    first, second, third = (record.get(f"p{i}") for i in range(3))
    assert first is not None and second is not None and third is not None
    assert first.outputs[0].images == () and "image not kept" in first.outputs[0].text
    assert "100 bytes" in first.outputs[0].text
    assert second.outputs[0].images[0].data.startswith(b"\x89PNG") and third.outputs[0].images


def test_uninstall_removes_every_hook(shell: InteractiveShell) -> None:
    record = KernelRecord(shell)
    record.install()
    record.install()  # once only
    assert "_showtraceback" in shell.__dict__ and "log_output" in shell.displayhook.__dict__
    record.uninstall()
    assert "_showtraceback" not in shell.__dict__ and "log_output" not in shell.displayhook.__dict__
    assert record._pre_run_cell not in shell.events.callbacks["pre_run_cell"]
    run(shell, "print('unrecorded')", "after-unload")
    assert record.get("after-unload") is None
    assert "write" not in sys.stdout.__dict__ or "unrecorded" not in str(sys.stdout.__dict__)


def test_kernel_view_edits_and_runs_refuse_clearly(shell: InteractiveShell, record: KernelRecord) -> None:
    run(shell, "x = 1", "k")
    for action in ("replace", "delete"):
        with pytest.raises(EditsUnsupported, match="JupyterLab or Notebook 7"):
            record.apply(Edit(action, "k", "y = 2"))  # type: ignore[arg-type]
    with pytest.raises(CellNotFound, match="'gone'"):
        record.apply(Edit("insert", "gone", "y = 2"))
    with pytest.raises(EditsUnsupported, match="markdown"):
        record.apply(Edit("insert", "k", "# hi", cell_type="markdown"))
    with pytest.raises(CellNotFound, match="'gone'"):
        record.run("gone", 5)
    with pytest.raises(NotebookError, match="no kernel runner"):
        record.run("k", 5)


# --------------------------------------------------------------------------- execute_cell
def test_execute_cell_runs_as_a_cell_and_captures_its_outputs(shell: InteractiveShell, record: KernelRecord,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    shell.user_ns["base"] = 40
    before = shell.execution_count
    done = execute_cell(record, "%time z = base + 2\nprint('captured-text')\nz", cell_id="ec")
    assert done.status == "ok"
    assert shell.execution_count == before + 1 and shell.user_ns["Out"][before] == 42
    assert shell.user_ns["In"][before].startswith("get_ipython().run_line_magic('time'")
    assert done.cell.id == "ec" and done.cell.execution_count == before
    texts = [o.text for o in done.cell.outputs]
    assert any("captured-text" in t for t in texts) and "42" in texts
    kinds = [o["output_type"] for o in done.outputs]
    assert "stream" in kinds and {"output_type": "execute_result", "execution_count": before,
                                  "data": {"text/plain": "42"}, "metadata": {}} in done.outputs
    assert "captured-text" not in capsys.readouterr().out
    assert record.get("ec") == done.cell
    assert not shell.displayhook.is_active  # the next cell's printing is recorded again
    run(shell, "print('next')", "next")
    next_cell = record.get("next")
    assert next_cell is not None and [o.text for o in next_cell.outputs] == ["next\n"]


def test_execute_cell_errors_interrupts_and_timeouts(shell: InteractiveShell, record: KernelRecord,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    failed = execute_cell(record, "{}['missing']", cell_id="ef")
    assert failed.status == "error" and failed.cell.error is not None and failed.cell.error.ename == "KeyError"
    assert [o["output_type"] for o in failed.outputs] == ["error"] and failed.outputs[0]["ename"] == "KeyError"
    assert "KeyError" not in capsys.readouterr().out
    interrupted = execute_cell(record, "raise KeyboardInterrupt", cell_id="ei")
    assert interrupted.status == "interrupted" and interrupted.interrupted
    slow = execute_cell(record, "import time\nwhile True: time.sleep(0.01)", cell_id="et", timeout=0.3)
    assert slow.status == "timeout"
    after = execute_cell(record, "'still fine'", cell_id="ok")
    assert after.status == "ok"


def test_runner_uses_the_lock_off_the_main_thread(shell: InteractiveShell, record: KernelRecord) -> None:
    lock = threading.Lock()
    runner = CellRunner(record, NoRunner(), lock)
    record.runner = runner
    run(shell, "print('from thread')\n6 * 7", "bg")
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(record.run("bg", 10)))
    thread.start()
    thread.join(30)
    assert results and results[0].view == "kernel"
    assert [o.text for o in results[0].cell.outputs] == ["from thread\n", "42"]
    lock.acquire()
    try:
        busy: list[Any] = []

        def blocked() -> None:
            try:
                runner.execute("1", "x", 0.2)
            except NotebookError as exc:
                busy.append(str(exc))

        thread = threading.Thread(target=blocked)
        thread.start()
        thread.join(10)
        assert busy and "busy" in busy[0]
    finally:
        lock.release()


def test_a_stop_during_a_run_on_the_main_thread_stops_the_turn(shell: InteractiveShell,
                                                                record: KernelRecord) -> None:
    import concurrent.futures

    class Pump:
        def __init__(self) -> None:
            self.calls: list[Any] = []

        def submit(self, fn: Any) -> concurrent.futures.Future[Any]:
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self.calls.append((fn, future))
            return future

    host = NoRunner()
    host.main_thread_calls = Pump()
    runner = CellRunner(record, host, threading.Lock())
    results: list[Any] = []
    agent = threading.Thread(target=lambda: results.extend([runner.execute("raise KeyboardInterrupt", "stop", 10),
                                                            runner.execute("'fine'", "fine", 10)]))
    agent.start()
    for _ in range(2):  # the waiting cell pumps the agent's calls on the main thread
        while not host.main_thread_calls.calls:
            agent.join(0.01)
        fn, future = host.main_thread_calls.calls.pop()
        future.set_result(fn())
    agent.join(10)
    assert [r.status for r in results] == ["interrupted", "ok"] and host.cancelled == 1


def test_trimming_helpers() -> None:
    assert strip_ansi("\x1b[31mred\x1b[0m plain") == "red plain"
    lines = [f"line {i}" for i in range(100)]
    trimmed = trim_traceback(lines, limit=10)
    assert len(trimmed) == 10 and trimmed[0] == "line 0" and trimmed[-1] == "line 99"
    assert "traceback lines not shown" in trimmed[2]


# --------------------------------------------------------------------------- a real kernel
@pytest.mark.slow
def test_kernel_records_displays_and_execute_cell_nests_in_a_running_cell(tmp_path: Path,
                                                                          kernel_runner: KernelRunner) -> None:
    probe = (
        "host = get_ipython().find_magic('dsh', 'cell').__self__.host\n"
        "rec = host.kernel_record\n"
        "def show(cid):\n"
        "    c = rec.get(cid)\n"
        "    return [(o.kind, o.text.strip(), [len(i.data) for i in o.images]) for o in c.outputs]\n"
    )
    nb = kernel_runner.run([
        "%load_ext dsh_jupyter",
        "from IPython.display import display, Image, Markdown\n"
        "display(Markdown('**shown**'))\n"
        "display(Image(data=b'\\x89PNG\\r\\n\\x1a\\n' + b'0' * 64, format='png'))\n"
        "print('streamed')\n"
        "'result'",
        probe + "cells = rec.cells()\nprint(show(cells[-2].id))",
        probe + "before = get_ipython().execution_count\n"
        "done = host.execute_cell('print(\"nested\")\\ndisplay(Markdown(\"inner md\"))\\n7 * 6', 'nested-id', 30)\n"
        "print(done.status, done.cell.id, done.cell.execution_count == before,\n"
        "      get_ipython().execution_count - before)\n"
        "print(sorted(o['output_type'] for o in done.outputs), Out[before])",
        probe + "done = host.execute_cell('import asyncio\\nawait asyncio.sleep(0)', 'awaits', 30)\n"
        "print(done.status, done.cell.error.ename, done.cell.error.evalue)",
        "print('the kernel carries on')",
    ], tmp_path, allow_errors=True)
    recorded = stream_text(nb.cells[2].outputs)
    assert "('display', '<IPython.core.display.Markdown object>', [])" in recorded
    assert "('display', '<IPython.core.display.Image object>', [72])" in recorded
    assert "('stream', 'streamed', [])" in recorded and "('result', \"'result'\", [])" in recorded
    nested_cell = nb.cells[3]
    texts = [o.get("text", "") for o in nested_cell.outputs]
    joined = "".join(texts)
    assert "ok nested-id True 1" in joined
    assert "['display_data', 'execute_result', 'stream'] 42" in joined
    # The nested run's own outputs stayed out of the cell that ran it.
    assert "nested\n" not in [t for t in texts] and not any(o.get("output_type") == "display_data"
                                                            for o in nested_cell.outputs)
    assert not any(o.get("output_type") == "execute_result" for o in nested_cell.outputs)
    awaits = stream_text(nb.cells[4].outputs)
    assert awaits == "error RuntimeError This event loop is already running\n"  # top-level await: measured
    assert nb.cells[5].outputs[0]["text"] == "the kernel carries on\n"


def test_execute_cell_hands_on_bounded_printed_text(shell: InteractiveShell, record: KernelRecord) -> None:
    from dsh_jupyter.workspace.kernel_record import MAX_CAPTURED_STREAM_CHARS

    done = execute_cell(record, "for _ in range(30): print('z' * 50_000)", cell_id="loud")
    texts = [o["text"] for o in done.outputs if o["output_type"] == "stream"]
    assert len(texts) == 1 and MAX_CAPTURED_STREAM_CHARS < len(texts[0]) < MAX_CAPTURED_STREAM_CHARS + 100
    assert texts[0].endswith("was not kept)\n")
    kept = record.get("loud")
    assert kept is not None and sum(len(o.text) for o in kept.outputs) < 21_000


def test_captured_display_messages_stay_out_of_the_running_cell_except_updates(shell: InteractiveShell) -> None:
    record = KernelRecord(shell)

    def msg(kind: str, text: str = "") -> dict[str, Any]:
        return {"header": {"msg_type": kind}, "content": {"data": {"text/plain": text}, "metadata": {}}}

    assert record._display_hook(msg("display_data", "outside")) is not None
    with record.capturing() as capture:
        assert record._display_hook(msg("display_data", "gone")) is None
        assert record._display_hook(msg("clear_output")) is None
        assert record._display_hook(msg("display_data", "kept")) is None
        update = msg("update_display_data", "earlier display")
        assert record._display_hook(update) is update
        seen: list[Any] = []
        other = threading.Thread(target=lambda: seen.append(record._display_hook(msg("display_data", "agent"))))
        other.start()
        other.join()
        assert seen and seen[0] is not None  # another thread's display is not this run's
    assert capture.outputs == [{"output_type": "display_data", "data": {"text/plain": "kept"}, "metadata": {}}]
