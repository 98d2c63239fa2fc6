"""What the kernel's record of cells costs each cell, and how fast notebook_read answers from a full record.

    .venv/bin/python benchmarks/bench_cells.py

In one IPython shell: the same small cells (a print and a result) run without the record and with it (the
difference is the record's cost per cell; goal: under 1 ms); ``notebook_read`` renders a full record (200
cells with outputs, the default cap; goal: under 50 ms); ``execute_cell`` runs a one-line cell (its cost
beyond IPython's own ``run_cell``: capturing and the timeout watch; goal: under 10 ms). IPython's SQLite
history is off during the run (it costs more than everything measured here).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

CELLS = 400

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _per_cell(shell: object, label: str) -> float:
    run = shell.run_cell  # type: ignore[attr-defined]
    started = time.perf_counter()
    with redirect_stdout(StringIO()):
        for i in range(CELLS):
            run(f"print('line {i}')\n{i} * 2", store_history=True, cell_id=f"{label}-{i}")
    return (time.perf_counter() - started) / CELLS * 1000


def main() -> int:
    from IPython.core.interactiveshell import InteractiveShell

    from benchmarks._summary import goal
    from dsh_jupyter.tools.base import ToolExecution
    from dsh_jupyter.workspace.cell_runner import execute_cell
    from dsh_jupyter.workspace.kernel_record import KernelRecord
    from dsh_jupyter.workspace.notebook_tools import NotebookReadTool, Workspace

    shell = InteractiveShell.instance()
    shell.history_manager.enabled = False  # IPython's own SQLite history would dominate every figure
    import warnings

    warnings.simplefilter("ignore", UserWarning)  # IPython's "output cache limit hit" after many cells
    record = KernelRecord(shell)
    bares, recordeds = [], []
    for k in range(5):  # alternate, so a shell that slows as it grows weighs on both alike
        bares.append(_per_cell(shell, f"bare{k}"))
        record.install()
        recordeds.append(_per_cell(shell, f"rec{k}"))
        record.uninstall()
    bare, recorded = statistics.median(bares), statistics.median(recordeds)
    record.install()
    cost = recorded - bare
    print(f"cell without the record: {bare:.3f} ms; with it: {recorded:.3f} ms; "
          f"the record's cost: {cost:.3f} ms a cell (goal < 1 ms) {'ok' if cost < 1 else 'SLOW'}")
    ok = goal("bench_cells", "the kernel record's cost per cell", f"{cost:.3f} ms", "< 1 ms",
              f"cell without it {bare:.3f} ms", cost < 1)

    class Slots:
        kernel_record = record
        live_source = None
        main_thread_calls = None

    tool = NotebookReadTool(Workspace(Slots()))
    times = []
    for _ in range(20):
        started = time.perf_counter()
        out = asyncio.run(tool.run({}, ToolExecution.create("bench", ".")))
        times.append((time.perf_counter() - started) * 1000)
    read = statistics.median(times)
    print(f"notebook_read of {len(record.cells())} recorded cells: {read:.1f} ms, {len(out.text):,} characters "
          f"(goal < 50 ms) {'ok' if read < 50 else 'SLOW'}")
    ok &= goal("bench_cells", f"notebook_read of {len(record.cells())} recorded cells", f"{read:.1f} ms", "< 50 ms",
               "-", read < 50)

    runs, plain = [], []
    with redirect_stdout(StringIO()):
        for i in range(50):
            started = time.perf_counter()
            execute_cell(record, f"print({i})\n{i}", cell_id="bench-run")
            runs.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            shell.run_cell(f"print({i})\n{i}", store_history=True, cell_id="bench-plain")
            plain.append((time.perf_counter() - started) * 1000)
    extra = statistics.median(runs) - statistics.median(plain)
    print(f"execute_cell of a one-line cell: {statistics.median(runs):.2f} ms, {extra:.2f} ms more than the shell's "
          f"own run_cell (capture and timeout watch; goal < 10 ms) {'ok' if extra < 10 else 'SLOW'}")
    ok &= goal("bench_cells", "execute_cell beyond the shell's run_cell", f"{extra:.2f} ms", "< 10 ms",
               f"run_cell {statistics.median(plain):.2f} ms", extra < 10)
    record.uninstall()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
