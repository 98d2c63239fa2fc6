"""How ``--dist loadscope`` hands the test modules to the xdist workers (the README's test command uses it).

xdist's own order (modules with the most tests first) knows nothing of how long a module takes: a browser module
of two tests can take a minute and a half, a unit module of two hundred a second. Started late, such a module keeps
one worker busy while the others have finished. :class:`SpreadScheduling` instead

* gives each worker that asks for work the longest module left, by the seconds a module took in a recent run
  (:data:`MODULE_SECONDS`, written by ``python tests/timing_helpers.py <folder> --write-weights``; a module not in
  it is estimated from its tests), so the run ends with short modules on every worker;
* keeps one worker off the browser modules while other modules are left, so not every worker loads pages and
  starts kernels at once: a run is CPU-bound on two cores (about 5 % idle), and browser tests wait on deadlines
  that CPU-bound unit tests do not have.

A module still runs on one worker from start to end (its server, database or browser starts once), as with
xdist's own loadscope.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

#: The browser modules (by file name): what :func:`is_browser` and the ``browser`` tier (tests/conftest.py) mean.
BROWSER_MODULES = ("test_browser_", "test_postgres_browser")

#: Seconds each module took (set-up, tests and teardown) in a recent run of the README's test command.
MODULE_SECONDS = Path(__file__).resolve().parent / "module_seconds.json"

#: Estimates for a module missing from :data:`MODULE_SECONDS`: seconds a test, by kind of module.
BROWSER_TEST_SECONDS = 6.0
OTHER_TEST_SECONDS = 0.05


def is_browser(module: str) -> bool:
    """``module`` (a node id's file part, ``tests/test_x.py``) is a browser module."""
    return Path(module).name.startswith(BROWSER_MODULES)


def load_seconds(path: Path = MODULE_SECONDS) -> dict[str, float]:
    """The recorded seconds per module; empty when the file is missing or unreadable (the estimates then serve)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)} if isinstance(data, dict) else {}


def estimate(module: str, tests: int, seconds: Mapping[str, float]) -> float:
    """How long ``module`` (with ``tests`` tests selected) is expected to take."""
    if module in seconds:
        return seconds[module]
    return tests * (BROWSER_TEST_SECONDS if is_browser(module) else OTHER_TEST_SECONDS)


def pick(queue: Mapping[str, int], seconds: Mapping[str, float], browsers_elsewhere: int, workers: int) -> str:
    """The module to hand out next from ``queue`` (module -> tests selected, not empty): the longest one, but a
    browser module only while fewer than ``workers - 1`` other workers run one, unless only browser modules are
    left."""
    ranked = sorted(queue, key=lambda module: -estimate(module, queue[module], seconds))
    if browsers_elsewhere < max(1, workers - 1):
        return ranked[0]
    return next((module for module in ranked if not is_browser(module)), ranked[0])


def _scheduler_class() -> type:
    from xdist.scheduler import LoadScopeScheduling

    class SpreadScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """xdist's loadscope with the modules handed out by :func:`pick` (see the module's docstring)."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self._seconds = load_seconds()

        def _browsers_elsewhere(self, node: Any) -> int:
            return sum(
                1 for other, work in self.assigned_work.items() if other is not node and any(
                    is_browser(scope) and not all(done.values()) for scope, done in work.items()))

        def _assign_work_unit(self, node: Any) -> None:
            queue = {scope: len(tests) for scope, tests in self.workqueue.items()}
            chosen = pick(queue, self._seconds, self._browsers_elsewhere(node), len(self.nodes))
            self.workqueue.move_to_end(chosen, last=False)
            super()._assign_work_unit(node)

    return SpreadScheduling


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadscope":
        return None  # xdist's own scheduler for the other modes
    return _scheduler_class()(config, log)
