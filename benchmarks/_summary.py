"""The figures a benchmark reports to ``run_all.py``'s summary table: name, figure, goal, baseline and verdict.

A benchmark calls :func:`goal` for each figure that has a goal (it prints the row as well). ``run_all.py``
sets :data:`RESULTS_ENV` to a file; each call appends one JSON line there, and :func:`read` gives them back.
Run on its own, a benchmark only prints.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS_ENV = "DSH_BENCH_RESULTS"


@dataclass(frozen=True)
class Figure:
    benchmark: str
    name: str
    figure: str
    goal: str
    baseline: str
    ok: bool
    why: str = ""  # when ok is True although the figure missed the number: why that goal was wrong


def goal(benchmark: str, name: str, figure: str, goal: str, baseline: str, ok: bool, *, why: str = "") -> bool:
    """Print one figure with its goal and baseline, and record it for the summary; returns ``ok``."""
    verdict = "ok" if ok else "MISSED"
    print(f"  {name:<52} {figure:>14}  {goal:<24} {verdict}  (baseline: {baseline})")
    if why:
        print(f"    why: {why}")
    target = os.environ.get(RESULTS_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(Figure(benchmark, name, figure, goal, baseline, ok, why))) + "\n")
    return ok


def read(path: Path) -> list[Figure]:
    """The figures recorded in ``path`` (none when the file is missing)."""
    if not path.is_file():
        return []
    return [Figure(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
