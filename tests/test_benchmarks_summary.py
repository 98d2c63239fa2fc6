"""``benchmarks/run_all.py``: the summary table of goal figures, and a non-zero exit when a benchmark misses one."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import run_all  # noqa: E402
from benchmarks._summary import RESULTS_ENV, Figure, goal, read  # noqa: E402


def test_goal_figures_are_recorded_for_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "r.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(results))
    assert goal("bench_x", "reads", "1.5x", "<= 2x", "decode 40 ms", True) is True
    assert goal("bench_x", "appends", "10 ev/s", ">= 50 ev/s", "fsync 5 ms", False, why="the disk") is False
    printed = capsys.readouterr().out
    assert "MISSED" in printed and "why: the disk" in printed
    figures = read(results)
    assert [(f.name, f.ok, f.why) for f in figures] == [("reads", True, ""), ("appends", False, "the disk")]
    table = run_all.table(figures)
    assert table.splitlines()[0] == "| benchmark | figure | measured | goal | baseline | ok |"
    assert "| bench_x | appends | 10 ev/s | >= 50 ev/s | fsync 5 ms | **MISSED** (the disk) |" in table


def test_a_pipe_in_a_figure_does_not_break_the_table() -> None:
    table = run_all.table([Figure("b", "a|b", "1", "2", "3", True)])
    assert "a\\|b" in table


def test_every_benchmark_is_listed_and_an_unknown_one_fails_the_run(tmp_path: Path) -> None:
    listed = set(run_all.BENCHMARKS)
    assert {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")} <= listed
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "bench_no_such_thing"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert done.returncode == 1
    assert "no benchmark bench_no_such_thing.py" in done.stderr and "failed: bench_no_such_thing.py" in done.stdout


def _calls_summary_goal(source: str) -> bool:
    """Whether a module imports ``goal`` from ``benchmarks._summary`` (anywhere) and calls it."""
    tree = ast.parse(source)
    imported = any(isinstance(node, ast.ImportFrom) and node.module == "benchmarks._summary"
                   and any(alias.name == "goal" and alias.asname is None for alias in node.names)
                   for node in ast.walk(tree))
    called = any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "goal"
                 for node in ast.walk(tree))
    return imported and called


@pytest.mark.parametrize("name", sorted(run_all.BENCHMARKS))
def test_every_listed_benchmark_reports_its_figures_through_summary_goal(name: str) -> None:
    source = (ROOT / "benchmarks" / name).read_text(encoding="utf-8")
    assert _calls_summary_goal(source), f"{name} prints its goals without benchmarks._summary.goal"


def test_the_static_check_tells_a_reporting_module_from_one_that_only_prints() -> None:
    assert _calls_summary_goal("def main():\n    from benchmarks._summary import goal\n"
                               "    goal('b', 'n', '1', '2', '-', True)\n")
    assert not _calls_summary_goal("from benchmarks._summary import goal\n")
    assert not _calls_summary_goal("print('goal <= 5 ms OK')\n")


def _run_fake(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """``run_all.py`` on one fake benchmark whose ``main`` is ``body``."""
    fake = tmp_path / "bench_fake.py"
    fake.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom benchmarks._summary import goal\n{body}\n",
                    encoding="utf-8")
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), str(fake)],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)


def test_a_benchmark_that_exits_0_with_a_missed_figure_fails_the_run(tmp_path: Path) -> None:
    done = _run_fake(tmp_path, "goal('bench_fake', 'speed', '3 s', '<= 1 s', 'cat 1 s', False)\nsys.exit(0)")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "| bench_fake | speed | 3 s | <= 1 s | cat 1 s | **MISSED** |" in done.stdout
    assert "failed: " in done.stdout and done.stdout.rstrip().endswith("bench_fake.py")


def test_a_benchmark_that_meets_every_goal_passes_the_run(tmp_path: Path) -> None:
    done = _run_fake(tmp_path, "goal('bench_fake', 'speed', '1 s', '<= 2 s', 'cat 1 s', True)\n"
                               "goal('bench_fake', 'argued', '3x', '<= 2x', '-', True, why='the floor is 2.5x')")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| bench_fake | argued | 3x | <= 2x | - | yes (the floor is 2.5x) |" in done.stdout
    assert "failed:" not in done.stdout and "(no figure reported" not in done.stdout


def test_a_benchmark_that_crashes_fails_the_run_even_with_its_figures_met(tmp_path: Path) -> None:
    done = _run_fake(tmp_path, "goal('bench_fake', 'speed', '1 s', '<= 2 s', '-', True)\nraise RuntimeError('boom')")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "| bench_fake | (no figure reported, see its output) | exit 1 | exit 0 | - | **MISSED** |" in done.stdout
    assert "failed: " in done.stdout and done.stdout.rstrip().endswith("bench_fake.py")


def test_the_outcome_of_each_kind_of_benchmark_run() -> None:
    met, missed = Figure("b", "x", "1", "2", "-", True), Figure("b", "y", "3", "2", "-", False)
    assert run_all.outcome("b", 0, [met]) == ([met], True)
    assert run_all.outcome("b", 0, [met, missed]) == ([met, missed], False)
    assert run_all.outcome("b", 1, [met, missed]) == ([met, missed], False)
    rows, ok = run_all.outcome("b", 2, [met])
    assert not ok and rows[-1] == Figure("b", "(no figure reported, see its output)", "exit 2", "exit 0", "-", False)
    rows, ok = run_all.outcome("b", 0, [])  # e.g. skipped: no PostgreSQL on this machine
    assert ok and rows == [Figure("b", "(no figure reported, see its output)", "exit 0", "exit 0", "-", True)]


def test_a_benchmark_that_misses_a_goal_fails_the_run(tmp_path: Path) -> None:
    fake = tmp_path / "bench_fake.py"
    fake.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom benchmarks._summary import goal\n"
                    "sys.exit(0 if goal('bench_fake', 'speed', '3 s', '<= 1 s', 'cat 1 s', False) else 1)\n",
                    encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), str(fake)],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "| bench_fake | speed | 3 s | <= 1 s | cat 1 s | **MISSED** |" in done.stdout
    assert "failed: " in done.stdout


# -- the published summary (run_all.py --write) ---------------------------------------------------------------
def test_a_run_replaces_the_rows_of_the_benchmarks_it_ran_and_keeps_the_others() -> None:
    from benchmarks._published import figures_of, merge

    old = merge({}, [Figure("bench_a", "speed", "1 s", "<= 2 s", "-", True),
                     Figure("bench_b", "size", "9 MB", "<= 5 MB", "-", False)], "2026-11-30")
    new = merge(old, [Figure("bench_b", "size", "4 MB", "<= 5 MB", "-", True)], "2026-12-02")
    assert [(d, f.benchmark, f.figure) for d, f in figures_of(new)] == [
        ("2026-11-30", "bench_a", "1 s"), ("2026-12-02", "bench_b", "4 MB")]


def test_the_short_table_counts_goals_and_names_the_missed_ones() -> None:
    from benchmarks._published import full_table, merge, short_table

    saved = merge({}, [Figure("bench_a", "speed", "1 s", "<= 2 s", "-", True),
                       Figure("bench_a", "argued", "3x", "<= 2x", "-", True, why="the floor is 2.1x"),
                       Figure("bench_a", "memory", "9 MB", "<= 5 MB", "-", False)], "2026-12-02")
    assert "| bench_a | 2 of 3 | memory | 2026-12-02 |" in short_table(saved)
    assert "| bench_a | argued | 3x | <= 2x | - | yes (the floor is 2.1x) | 2026-12-02 |" in full_table(saved)


def test_writing_needs_both_markers_and_keeps_what_is_around_them(tmp_path: Path) -> None:
    from benchmarks._published import END, START, write_between

    page = tmp_path / "page.md"
    page.write_text(f"before\n{START}\nold\n{END}\nafter\n", encoding="utf-8")
    write_between(page, "| new |")
    assert page.read_text(encoding="utf-8") == f"before\n{START}\n| new |\n{END}\nafter\n"
    page.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="markers"):
        write_between(page, "| new |")
    assert page.read_text(encoding="utf-8") == "no markers\n"


def test_the_published_tables_are_the_ones_generated_from_latest_json() -> None:
    from benchmarks._published import DOCS, END, README, START, full_table, load, short_table

    saved = load()
    assert saved, "benchmarks/latest.json is missing or empty"
    for path, table in ((README, short_table(saved)), (DOCS, full_table(saved))):
        text = path.read_text(encoding="utf-8")
        assert f"{START}\n{table}\n{END}" in text, f"{path.name}: run `python benchmarks/run_all.py --write` again"
