"""Where the suite's time goes: set ``DSH_TEST_TIMES=<folder>`` and each pytest process (every xdist worker) writes
``<folder>/<worker>.json`` with the seconds spent setting up each fixture (summed by fixture name), the seconds of
each module's tests, how many pages each module's browser tests loaded, and how many jupyter servers, kernels,
chromiums and PostgreSQL clusters it started.

The counts come from the processes this pytest process starts (``subprocess.Popen`` commands) plus the kernels
the jupyter servers it started report in their logs. ``python tests/timing_helpers.py <folder>`` prints the sums.
Without the variable the plugin does nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

#: What a started command is, by a word of its command line (first match wins).
KINDS = (
    ("ipykernel_launcher", "kernel"),
    ("jupyterlab", "jupyter server"),
    ("-m notebook", "jupyter server"),
    ("chromium", "chromium"),
    ("initdb", "postgres initdb"),
)

_FOLDER = os.environ.get("DSH_TEST_TIMES")
_fixtures: defaultdict[str, float] = defaultdict(float)
_fixture_counts: Counter[str] = Counter()
_modules: defaultdict[str, float] = defaultdict(float)
#: Per module: how many pages its tests loaded (each costs chromium about 3 s of CPU).
_loads: Counter[str] = Counter()
_started: Counter[str] = Counter()
_server_logs: list[Path] = []
#: Per module: seconds of its tests, and when it started and ended on this worker.
_units: dict[str, list[float]] = {}
_began = time.time()


def kind_of(args: Any) -> str | None:
    """The kind of process ``args`` (a ``Popen`` command) starts, or ``None`` for one not counted."""
    line = " ".join(str(part) for part in args) if isinstance(args, Sequence) and not isinstance(args, str) \
        else str(args)
    return next((kind for word, kind in KINDS if word in line), None)


def _count_popen() -> None:
    original = subprocess.Popen.__init__

    def counting(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        kind = kind_of(args)
        if kind is not None:
            _started[kind] += 1
            if kind == "jupyter server":
                cwd = kwargs.get("cwd")
                if cwd is not None:
                    _server_logs.append(Path(cwd))
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = counting  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if _FOLDER:
        _count_popen()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Generator[None, None, None]:
    start = time.perf_counter()
    yield
    if _FOLDER:
        _fixtures[fixturedef.argname] += time.perf_counter() - start
        _fixture_counts[fixturedef.argname] += 1


def _page_loads() -> int:
    """Load events of the browser tests' pages in this process so far (``browser_helpers.PageWatch``)."""
    helpers = sys.modules.get("browser_helpers")
    return int(getattr(getattr(helpers, "PageWatch", None), "all_loads", 0))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    start, loads = time.time(), _page_loads()
    yield
    if _FOLDER:
        module = item.nodeid.split("::")[0]
        unit = _units.setdefault(module, [0.0, start, start])
        unit[0] += time.time() - start
        unit[2] = time.time()
        _loads[module] += _page_loads() - loads


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _FOLDER:
        _modules[report.nodeid.split("::")[0]] += report.duration


def _server_kernels() -> int:
    total = 0
    for state in _server_logs:
        for log in state.glob("jupyter-*.log"):
            text = log.read_text(encoding="utf-8", errors="replace")
            total += text.count("Kernel started:")
    return total


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _FOLDER:
        return
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is None and not _units:
        return  # the xdist controller runs no test: each worker writes its own file
    worker = str(workerinput["workerid"]) if workerinput is not None else "main"
    folder = Path(_FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    started = dict(_started)
    started["kernel (in jupyter servers)"] = _server_kernels()
    (folder / f"{worker}.json").write_text(json.dumps({
        "started": started,
        "fixtures": {name: [round(seconds, 2), _fixture_counts[name]] for name, seconds in _fixtures.items()},
        "modules": {name: round(seconds, 2) for name, seconds in _modules.items()},
        "page_loads": {name: count for name, count in _loads.items() if count},
        "units": {name: [round(value, 2) for value in (seconds, start - _began, end - _began)]
                  for name, (seconds, start, end) in _units.items()},
        "wall": round(time.time() - _began, 1),
    }, indent=1), encoding="utf-8")


def summary(folder: Path, top: int = 30) -> str:
    """The workers' files in ``folder`` summed: processes started, slowest fixtures, slowest modules."""
    started: Counter[str] = Counter()
    fixtures: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    modules: Counter[str] = Counter()
    loads: Counter[str] = Counter()
    per_worker = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        started.update(data["started"])
        loads.update(data.get("page_loads", {}))
        for name, (seconds, count) in data["fixtures"].items():
            fixtures[name][0] += seconds
            fixtures[name][1] += count
        modules.update(data["modules"])
        per_worker.append(f"{path.stem}: {sum(data['modules'].values()):.0f} s of tests, "
                          f"last test ended at {max((u[2] for u in data.get('units', {}).values()), default=0):.0f} s")
    lines = ["started: " + ", ".join(f"{kind} {count}" for kind, count in sorted(started.items())),
             f"page loads: {sum(loads.values())}", *per_worker, "", "fixture set-up (s, count):"]
    lines += [f"  {seconds:8.1f} {int(count):5d}  {name}"
              for name, (seconds, count) in sorted(fixtures.items(), key=lambda kv: -kv[1][0])[:top]]
    lines += ["", "module (s, set-up + call + teardown; pages loaded):"]
    lines += [f"  {seconds:8.1f}  {name}" + (f"  ({loads[name]} pages)" if loads[name] else "")
              for name, seconds in modules.most_common(top)]
    return "\n".join(lines)


def module_seconds(folder: Path) -> dict[str, float]:
    """Seconds per module (set-up, calls and teardown) over the workers' files in ``folder``."""
    modules: Counter[str] = Counter()
    for path in sorted(folder.glob("*.json")):
        modules.update(json.loads(path.read_text(encoding="utf-8"))["modules"])
    return {name: round(seconds, 1) for name, seconds in sorted(modules.items())}


def main(argv: Sequence[str]) -> None:
    import argparse

    from schedule_helpers import MODULE_SECONDS

    parser = argparse.ArgumentParser(description="Sum the timing files a DSH_TEST_TIMES run wrote.")
    parser.add_argument("folder", type=Path, help="the DSH_TEST_TIMES folder of a finished run")
    parser.add_argument("top", type=int, nargs="?", default=30, help="how many fixtures and modules to list")
    parser.add_argument("--write-weights", action="store_true",
                        help=f"also write each module's seconds to {MODULE_SECONDS.name}, which orders the modules "
                             "among the xdist workers (tests/schedule_helpers.py)")
    args = parser.parse_args(argv)
    print(summary(args.folder, args.top))
    if args.write_weights:
        seconds = module_seconds(args.folder)
        MODULE_SECONDS.write_text(json.dumps(seconds, indent=0) + "\n", encoding="utf-8")
        print(f"\nwrote the seconds of {len(seconds)} modules to {MODULE_SECONDS}")


if __name__ == "__main__":
    main(sys.argv[1:])
