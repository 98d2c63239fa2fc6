"""How fast ``dsh-jupyter`` starts: ``--help`` and ``--version`` beside a bare interpreter start.

Run from the repository root::

    .venv/bin/python benchmarks/bench_cli_start.py

The command line answers ``--help``, ``--version`` and usage errors after building its argparse tree only:
the catalog, the stores and the readers are imported once a command runs. Goals: ``--help`` and
``--version`` in under 0.15 s of wall time each (best of 7 fresh interpreters) and at most 0.1 s above
``python -c pass`` measured in the same run; neither loads the catalog or the store modules.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._timing import row  # noqa: E402

WALL_GOAL_S = 0.15
ABOVE_PYTHON_GOAL_S = 0.1
RUNS = 7
_LOADED = ("import runpy, sys; sys.argv = ['dsh-jupyter', {arg!r}]\n"
           "try:\n    runpy.run_module('dsh_jupyter.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
           "print(' '.join(sorted(m for m in sys.modules if m.startswith(('dsh_jupyter.catalog', "
           "'dsh_jupyter.store')))), file=sys.stderr)")


def _best(argv: list[str], env: dict[str, str]) -> float:
    fastest = float("inf")
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        fastest = min(fastest, time.perf_counter() - started)
    return fastest


def main() -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    bare = _best([sys.executable, "-c", "pass"], env)
    print("dsh-jupyter start-up (best of 7 fresh interpreters):")
    row("python -c pass (baseline)", f"{bare * 1000:.0f} ms")
    missed = 0
    for arg in ("--help", "--version"):
        took = _best([sys.executable, "-m", "dsh_jupyter.cli", arg], env)
        ok = took <= WALL_GOAL_S and took - bare <= ABOVE_PYTHON_GOAL_S
        missed += not ok
        row(f"python -m dsh_jupyter.cli {arg}", f"{took * 1000:.0f} ms",
            f"< {WALL_GOAL_S * 1000:.0f} ms, +{ABOVE_PYTHON_GOAL_S * 1000:.0f} ms", "ok" if ok else "MISSED")
        loaded = subprocess.run([sys.executable, "-c", _LOADED.format(arg=arg)], env=env, capture_output=True,
                                text=True, check=True).stderr.strip()
        missed += bool(loaded)
        row(f"  catalog/store modules loaded by {arg}", str(len(loaded.split())), "0", "ok" if not loaded else
            f"MISSED ({loaded})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
