"""Timing and printing helpers shared by the micro-benchmarks (best-of-N timings, one aligned row per figure)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best(fn: Callable[[], object], number: int, repeat: int = 5) -> float:
    """Seconds per call of ``fn``: the best mean over ``repeat`` runs of ``number`` calls."""
    fastest = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(number):
            fn()
        fastest = min(fastest, (time.perf_counter() - started) / number)
    return fastest


def row(name: str, value: str, goal: str = "", verdict: str = "") -> None:
    """One figure: what, the measured value, the goal and whether it was met."""
    print(f"  {name:<52} {value:>14}  {goal:<22} {verdict}")
