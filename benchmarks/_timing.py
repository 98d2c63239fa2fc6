"""Timing and printing helpers shared by the micro-benchmarks (best-of-N timings, one aligned row per figure)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best(fn: Callable[[], object], number: int, repeat: int = 5,
         clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of ``fn``: the best mean over ``repeat`` runs of ``number`` calls.

    ``clock=time.process_time`` counts this process's CPU time instead of the wall: what a figure should be
    measured in on a shared machine, where other processes take the cores in turns with this one."""
    fastest = float("inf")
    for _ in range(repeat):
        started = clock()
        for _ in range(number):
            fn()
        fastest = min(fastest, (clock() - started) / number)
    return fastest


def row(name: str, value: str, goal: str = "", verdict: str = "") -> None:
    """One figure: what, the measured value, the goal and whether it was met."""
    print(f"  {name:<52} {value:>14}  {goal:<22} {verdict}")


def child_seconds(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run ``argv`` to its end (output discarded); returns its (wall, CPU) seconds, CPU being user + system time
    of the child as the kernel accounts it (what a loaded machine's other processes do not inflate)."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
