"""Run every benchmark, one after the other, printing each figure with its goal and baseline ratio.

    .venv/bin/python benchmarks/run_all.py

Generated data lives in benchmarks/.data/ (git-ignored) and is reused by later runs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
BENCHMARKS = [
    "bench_store.py", "bench_references.py", "bench_notebook.py", "bench_catalog.py", "bench_bigref.py",
    "bench_secrets.py", "bench_locate.py", "bench_approvals.py", "bench_foreign.py", "bench_foldcache.py",
    "bench_postgres.py", "bench_variables.py", "bench_cells.py", "bench_images.py",
    "bench_live_document.py", "bench_escape.py", "bench_huge_session.py", "bench_rest_huge.py",
    "bench_cli_start.py", "bench_markdown.py", "bench_transcript.py",
]


def main() -> int:
    failed = []
    unlisted = sorted(p.name for p in HERE.glob("bench_*.py") if p.name not in BENCHMARKS)
    for name in BENCHMARKS + unlisted:
        path = HERE / name
        if not path.exists():
            continue
        print(f"\n######## {name}", flush=True)
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(path)], check=False, cwd=HERE.parent)
        print(f"######## {name} took {time.monotonic() - started:.0f} s (exit {result.returncode})", flush=True)
        if result.returncode:
            failed.append(name)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
