"""SIGKILL a writer at random moments: every turn it reported flushed survives, and the log reopens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from store_helpers import run_crash_loop

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]


def test_jsonl_writer_survives_50_kills(tmp_path: Path) -> None:
    report = run_crash_loop("jsonl", tmp_path, kills=50, seed=1)
    assert report.kills == 50
    assert report.flushed_turns > 50, "the child should get some turns done between kills"


def test_sqlite_writer_survives_kills(tmp_path: Path) -> None:
    report = run_crash_loop("sqlite", tmp_path, kills=15, seed=2)
    assert report.flushed_turns > 15
