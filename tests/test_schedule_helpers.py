"""The order the xdist workers get the test modules in (tests/schedule_helpers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from schedule_helpers import MODULE_SECONDS, estimate, is_browser, load_seconds, pick

TESTS = Path(__file__).resolve().parent

SIDEBAR, WORKSPACE = "tests/test_browser_sidebar.py", "tests/test_browser_workspace.py"
ESCAPE, LOCAL = "tests/test_escape.py", "tests/test_models_local.py"


def test_browser_modules_are_known_by_name() -> None:
    assert is_browser(SIDEBAR) and is_browser("tests/test_postgres_browser.py")
    assert not is_browser(ESCAPE) and not is_browser("tests/test_postgres_catalog.py")


def test_the_longest_module_goes_first_by_its_recorded_seconds_else_by_its_tests() -> None:
    seconds = {WORKSPACE: 90.0, ESCAPE: 1.0}
    # Two tests, but the longest recorded: first, ahead of a module with many more tests.
    assert pick({SIDEBAR: 14, WORKSPACE: 2, ESCAPE: 300}, seconds, browsers_elsewhere=0, workers=4) == WORKSPACE
    assert estimate(SIDEBAR, 14, seconds) == 14 * 6.0  # not recorded: its tests at a browser test's estimate
    assert estimate("tests/test_new.py", 40, seconds) == 40 * 0.05
    assert pick({ESCAPE: 300, "tests/test_new.py": 100}, seconds, browsers_elsewhere=0, workers=4) == \
        "tests/test_new.py"


def test_one_worker_stays_off_the_browsers_while_other_modules_are_left() -> None:
    seconds = {SIDEBAR: 120.0, WORKSPACE: 90.0, LOCAL: 50.0, ESCAPE: 1.0}
    queue = {SIDEBAR: 14, WORKSPACE: 2, LOCAL: 5, ESCAPE: 300}
    assert pick(queue, seconds, browsers_elsewhere=2, workers=4) == SIDEBAR
    assert pick(queue, seconds, browsers_elsewhere=3, workers=4) == LOCAL  # the longest module that is not one
    assert pick({SIDEBAR: 14, WORKSPACE: 2}, seconds, browsers_elsewhere=3, workers=4) == SIDEBAR  # only browsers
    assert pick(queue, seconds, browsers_elsewhere=0, workers=1) == SIDEBAR  # one worker runs everything


def test_the_recorded_seconds_cover_the_suite_and_a_damaged_file_falls_back(tmp_path: Path) -> None:
    recorded = load_seconds()
    modules = {f"tests/{path.name}" for path in TESTS.glob("test_*.py")}
    assert len(recorded.keys() & modules) > 0.9 * len(modules), sorted(modules - recorded.keys())
    assert all(value >= 0 for value in recorded.values())
    assert MODULE_SECONDS.name == "module_seconds.json"
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    assert load_seconds(tmp_path / "bad.json") == {} and load_seconds(tmp_path / "list.json") == {}
    assert load_seconds(tmp_path / "missing.json") == {}


#: Each test of the generated modules notes which worker ran it.
GENERATED_TEST = """
import os, pathlib

def test_{index}():
    with open(pathlib.Path(__file__).parent / "ran.txt", "a") as out:
        out.write(f"{{os.environ['PYTEST_XDIST_WORKER']}} {{__name__}}\\n")
"""


def test_an_xdist_run_starts_the_browser_modules_first_on_one_worker(tmp_path: Path) -> None:
    # Two workers. xdist's own order (most tests first) would run both light modules first and leave the browser
    # modules to the end; here the browser modules (the longest by their estimates) start at once, on one worker,
    # while the other takes the light modules.
    counts = {"test_browser_a": 2, "test_browser_b": 2, "test_light_c": 30, "test_light_d": 20}
    for name, tests in counts.items():
        (tmp_path / f"{name}.py").write_text("".join(GENERATED_TEST.format(index=i) for i in range(tests)),
                                             encoding="utf-8")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["schedule_helpers"]\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist",
                           "-n", "2", "--dist", "loadscope", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = [line.split() for line in (tmp_path / "ran.txt").read_text(encoding="utf-8").splitlines()]
    assert len(ran) == sum(counts.values())
    order: dict[str, list[str]] = {}  # worker -> the modules it ran, in order
    for worker, module in ran:
        if not order.get(worker) or order[worker][-1] != module:
            order.setdefault(worker, []).append(module)
    assert sorted(m for modules in order.values() for m in modules) == sorted(counts), order  # each module whole
    browser_worker = next(w for w, modules in order.items() if "test_browser_a" in modules)
    assert order[browser_worker][:2] == ["test_browser_a", "test_browser_b"], order
    assert not any(is_browser(m) for w, modules in order.items() if w != browser_worker for m in modules), order
