"""SIGKILL a writer at random moments: every turn it reported flushed survives, and the log reopens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from store_helpers import run_crash_loop

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fork are POSIX"),
]


def test_jsonl_writer_survives_50_kills(tmp_path: Path) -> None:
    # A 5 ms pause inside each turn keeps the log small enough that 50 reopenings stay quick.
    report = run_crash_loop("jsonl", tmp_path, kills=50, seed=1, pace=0.005)
    assert report.kills == 50
    assert report.flushed_turns > 50, "the writers should get turns done between kills"
    assert report.interrupted_turns > 0, "some kills should land inside a turn after its checkpoint flush"


def test_sqlite_writer_survives_kills(tmp_path: Path) -> None:
    report = run_crash_loop("sqlite", tmp_path, kills=20, seed=2, pace=0.005)
    assert report.flushed_turns > 20


def test_fresh_interpreters_reopen_after_kills(tmp_path: Path) -> None:
    report = run_crash_loop("jsonl", tmp_path, kills=4, seed=3, mode="spawn")
    assert report.flushed_turns >= 1


def test_writers_killed_before_their_first_flush_leave_a_session_to_create(tmp_path: Path) -> None:
    # Each writer is killed at once, inside the 5 s pause of its first turn: none ever flushed, so nothing was
    # stored (sessions are stored lazily), and the last opening creates the session (a busy machine can do this
    # to the fresh interpreters of the tests above).
    report = run_crash_loop("jsonl", tmp_path, kills=2, max_delay=0.0, pace=5.0)
    assert report.flushed_turns == 1  # the last opening's own turn
    assert report.interrupted_turns == 0
