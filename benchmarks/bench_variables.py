"""How long variable summaries take on big values (what the ``variables`` tool, ``@`` mentions and ``%dsh fix``
pay).

    .venv/bin/python benchmarks/bench_variables.py

Reported: the summary of a 3,000,000 × 8 float frame (nulls counted on its first 1,000,000 rows), of a
10,000,000-element array, of a 1,000,000-item list, the ``@`` candidates of a namespace of 200 frames, and
a listing of 200 frames (bounded to 16,000 characters: about 25 are summarised). Goal: each summary under
1 s, the listing under 2 s, candidates under 50 ms.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


MISSED: list[str] = []


def timed(label: str, fn: Callable[[], object], limit: float) -> None:
    from benchmarks._summary import goal

    started = time.perf_counter()
    fn()
    took = time.perf_counter() - started
    if not goal("bench_variables", label, f"{took * 1000:.1f} ms", f"<= {limit * 1000:.0f} ms", "-", took <= limit):
        MISSED.append(label)


def main() -> int:
    import numpy as np
    import pandas as pd

    from dsh_jupyter.workspace.variables import list_variables, summarise, variable_candidates

    frame = pd.DataFrame(np.random.default_rng(0).random((3_000_000, 8)), columns=[f"c{i}" for i in range(8)])
    array = np.zeros(10_000_000)
    items = list(range(1_000_000))

    frames = {f"frame{i:03d}": pd.DataFrame({"a": range(1000), "b": [None] * 1000}) for i in range(200)}

    class Shell:
        def __init__(self) -> None:
            self.user_ns: dict[str, object] = frames
            self.user_ns_hidden: dict[str, object] = {}

    variable_candidates(Shell(), "", 1)  # imports once, as the first completion of a kernel does
    timed("summary of a 3,000,000×8 frame", lambda: summarise("frame", frame), 1.0)
    timed("summary of a 10,000,000-element array", lambda: summarise("array", array), 1.0)
    timed("summary of a 1,000,000-item list", lambda: summarise("items", items), 1.0)
    timed("@ candidates of 200 frames", lambda: variable_candidates(Shell(), "", 50), 0.05)
    timed("listing of 200 frames", lambda: list_variables(frames), 2.0)
    return 1 if MISSED else 0


if __name__ == "__main__":
    sys.exit(main())
