"""SIGKILL a PostgreSQL writer at random moments: every committed turn survives and the session reopens."""

from __future__ import annotations

import sys

import pytest
from store_helpers import run_crash_loop

from dsh_jupyter.store.postgres import PostgresStore


@pytest.fixture
def database(pg_database: str) -> str:
    """A database where `dsh-jupyter postgres init` already ran (as on a hub)."""
    store = PostgresStore(pg_database)
    with store.connection():
        pass
    return pg_database

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fork are POSIX"),
]


def test_postgres_writer_survives_50_kills(database: str) -> None:
    # Kills spread over 0.2 s after the writer is ready; a 10 ms pause inside each turn keeps the log small
    # enough that 50 writers reopening it stay quick, and lands more kills inside a turn.
    report = run_crash_loop("postgres", database, kills=50, seed=5, max_delay=0.2, pace=0.01)
    assert report.kills == 50
    assert report.flushed_turns > 50, "the writers should get turns done between kills"
    assert report.interrupted_turns > 0, "some kills should land inside a turn after its checkpoint flush"


def test_fresh_interpreters_reopen_after_kills(database: str) -> None:
    report = run_crash_loop("postgres", database, kills=4, seed=6, mode="spawn")
    assert report.flushed_turns >= 1
