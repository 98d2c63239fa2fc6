"""Run every benchmark, one after the other, then print a summary table of every goal figure.

    .venv/bin/python benchmarks/run_all.py              # all of them
    .venv/bin/python benchmarks/run_all.py bench_store  # only those named (with or without .py, or a path)
    .venv/bin/python benchmarks/run_all.py --write ...  # also publish the summary (benchmarks/_published.py)

Each benchmark prints its figures with their goals and baselines and exits non-zero when it misses one.
Figures reported through :func:`benchmarks._summary.goal` go into the table at the end (name, figure, goal,
baseline, ok); a benchmark that reports none gets one row with its exit status. The exit status is 1 when any
benchmark exited non-zero or reported a missed figure (even if it exited 0). Generated data lives in
benchmarks/.data/ (git-ignored) and is reused by later runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks._published import publish, row, verdict  # noqa: E402
from benchmarks._summary import RESULTS_ENV, Figure, read  # noqa: E402

BENCHMARKS = [
    "bench_store.py", "bench_references.py", "bench_notebook.py", "bench_first_turn.py", "bench_catalog.py",
    "bench_bigref.py", "bench_secrets.py", "bench_locate.py", "bench_approvals.py", "bench_foreign.py",
    "bench_foldcache.py", "bench_postgres.py", "bench_variables.py", "bench_cells.py", "bench_images.py",
    "bench_live_document.py", "bench_escape.py", "bench_huge_session.py", "bench_rest_huge.py",
    "bench_cli_start.py", "bench_markdown.py", "bench_chat_view.py", "bench_transcript.py", "bench_mcp.py",
    "bench_models.py", "bench_completion.py", "bench_session_cost.py",
]


def table(rows: list[Figure]) -> str:
    """The summary as a Markdown table (``--write`` publishes it, with each row's day, in docs/benchmarks.md)."""
    lines = ["| benchmark | figure | measured | goal | baseline | ok |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [row([r.benchmark, r.name, r.figure, r.goal, r.baseline, verdict(r)]) for r in rows]
    return "\n".join(lines)


def outcome(stem: str, code: int, figures: list[Figure]) -> tuple[list[Figure], bool]:
    """A benchmark's rows for the table and whether it passed: it exited 0 and missed no figure it reported.

    A benchmark that reported no figure, or crashed with every reported figure met, gets one more row with its
    exit status (a benchmark that skips, e.g. without PostgreSQL, exits 0 and reports nothing)."""
    rows = list(figures)
    if not rows or (code and all(f.ok for f in rows)):
        rows.append(Figure(stem, "(no figure reported, see its output)", f"exit {code}", "exit 0", "-", code == 0))
    return rows, code == 0 and all(f.ok for f in rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    write = "--write" in args
    wanted = [n if n.endswith(".py") else n + ".py" for n in args if n != "--write"]
    # a name is a module in benchmarks/, or a path to one elsewhere
    unlisted = sorted(p.name for p in HERE.glob("bench_*.py") if p.name not in BENCHMARKS)
    names = wanted or BENCHMARKS + unlisted
    failed: list[str] = []
    summary: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as folder:
        for name in names:
            path = Path(name) if os.sep in name else HERE / name
            if not path.exists():
                print(f"no benchmark {name} in {HERE}", file=sys.stderr)
                failed.append(name)
                continue
            results = Path(folder) / f"{path.stem}.jsonl"
            print(f"\n######## {name}", flush=True)
            started = time.monotonic()
            result = subprocess.run([sys.executable, str(path)], check=False, cwd=HERE.parent,
                                    env={**os.environ, RESULTS_ENV: str(results)})
            took = time.monotonic() - started
            print(f"######## {name} took {took:.0f} s (exit {result.returncode})", flush=True)
            figures, ok = outcome(path.stem, result.returncode, read(results))
            if not ok:
                failed.append(name)
            summary.extend(figures)
    print("\n######## summary\n")
    print(table(summary))
    if write:
        publish(summary, time.strftime("%Y-%m-%d", time.gmtime()))
        print("\nwritten: benchmarks/latest.json, the tables in docs/benchmarks.md and README.md")
    if failed:
        print("\nfailed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
