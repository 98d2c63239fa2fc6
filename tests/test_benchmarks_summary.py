"""``benchmarks/run_all.py``: the summary table of goal figures, and a non-zero exit when a benchmark misses one."""

from __future__ import annotations

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
