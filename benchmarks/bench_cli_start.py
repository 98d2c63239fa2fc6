"""How fast ``dsh-jupyter`` starts: ``--help`` and ``--version`` beside a bare interpreter start.

Run from the repository root::

    .venv/bin/python benchmarks/bench_cli_start.py

The command line answers ``--help``, ``--version`` and usage errors after building its argparse tree only:
the catalog, the stores and the readers are imported once a command runs. Goals: ``--help`` and
``--version`` in under 0.15 s of CPU time each (best of 7 fresh interpreters) and at most 0.1 s of CPU above
``python -c pass`` measured in the same run; neither loads the catalog or the store modules.

The goals are stated in CPU time (user + system of the child process), not wall time: on the 2-core
machine the benchmarks share with test runs, the wall time of a 100 ms process swings by 2-3x with the
load, while its CPU time is what our code costs. The wall times are printed beside them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._summary import goal  # noqa: E402
from benchmarks._timing import child_seconds  # noqa: E402

NAME = "bench_cli_start"
CPU_GOAL_S = 0.15
ABOVE_PYTHON_GOAL_S = 0.1
RUNS = 7
_LOADED = ("import runpy, sys; sys.argv = ['dsh-jupyter', {arg!r}]\n"
           "try:\n    runpy.run_module('dsh_jupyter.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
           "print(' '.join(sorted(m for m in sys.modules if m.startswith(('dsh_jupyter.catalog', "
           "'dsh_jupyter.store')))), file=sys.stderr)")


def _best(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The least wall and the least CPU seconds over ``RUNS`` fresh processes."""
    runs = [child_seconds(argv, env) for _ in range(RUNS)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def main() -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    bare_wall, bare = _best([sys.executable, "-c", "pass"], env)
    print(f"dsh-jupyter start-up (best of {RUNS} fresh interpreters; python -c pass: CPU {bare * 1000:.0f} ms, "
          f"wall {bare_wall * 1000:.0f} ms):")
    ok = True
    for arg in ("--help", "--version"):
        wall, cpu = _best([sys.executable, "-m", "dsh_jupyter.cli", arg], env)
        ok &= goal(NAME, f"dsh-jupyter {arg}, CPU", f"{cpu * 1000:.0f} ms", f"<= {CPU_GOAL_S * 1000:.0f} ms",
                   f"wall {wall * 1000:.0f} ms", cpu <= CPU_GOAL_S)
        ok &= goal(NAME, f"dsh-jupyter {arg}, CPU above python -c pass", f"+{(cpu - bare) * 1000:.0f} ms",
                   f"<= +{ABOVE_PYTHON_GOAL_S * 1000:.0f} ms", f"python -c pass {bare * 1000:.0f} ms",
                   cpu - bare <= ABOVE_PYTHON_GOAL_S)
        loaded = subprocess.run([sys.executable, "-c", _LOADED.format(arg=arg)], env=env, capture_output=True,
                                text=True, check=True).stderr.strip()
        ok &= goal(NAME, f"catalog/store modules loaded by {arg}", loaded or "0", "0", "-", not loaded)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
