"""Failed logs are remembered by their stat, per store and folder, until written, forgotten or changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dsh_jupyter.catalog.failures import failed_stats, failure_count, forget_failures, note_failure
from dsh_jupyter.catalog.logs import LogRead, LogRecord, LogStat
from dsh_jupyter.catalog.rows import apply_read, transaction, upsert_store
from dsh_jupyter.catalog.schema import connect, ensure_schema


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    c = connect(tmp_path / "c.sqlite", busy_ms=100)
    ensure_schema(c)
    return c


def test_failures_are_kept_per_folder_with_their_stat(conn: sqlite3.Connection) -> None:
    a, _ = transaction(conn, lambda c: upsert_store(c, "/a"))
    b, _ = transaction(conn, lambda c: upsert_store(c, "/b"))
    transaction(conn, lambda c: note_failure(c, a, "f", LogStat(1, 2, 3), "first"))
    transaction(conn, lambda c: note_failure(c, a, "f", LogStat(4, 5, 6), "x" * 10_000))  # replaces, kept short
    transaction(conn, lambda c: note_failure(c, a, "g\udcff", LogStat(7, 8, 9), "odd name"))
    transaction(conn, lambda c: note_failure(c, b, "f", LogStat(1, 1, 1), "other store"))
    assert failed_stats(conn, a) == {"f": LogStat(4, 5, 6), "g\udcff": LogStat(7, 8, 9)}
    assert failed_stats(conn, a, ["f", "missing"]) == {"f": LogStat(4, 5, 6)}
    assert len(conn.execute("SELECT reason FROM failed_logs WHERE store_id = ? AND folder = ?",
                            (a, b"f")).fetchone()[0]) == 300
    assert failure_count(conn) == 3
    transaction(conn, lambda c: forget_failures(c, a))
    assert failed_stats(conn, a) == {} and failure_count(conn) == 1
    transaction(conn, forget_failures)
    assert failure_count(conn) == 0


def test_writing_the_row_forgets_the_failure(conn: sqlite3.Connection) -> None:
    store, _ = transaction(conn, lambda c: upsert_store(c, "/a"))
    transaction(conn, lambda c: note_failure(c, store, "f", LogStat(1, 2, 3), "was bad"))
    record = LogRecord("s", None, 1, None, True, 1, 1, 1, 0, LogStat(10, 2, 3), 10, b"x", 1)
    transaction(conn, lambda c: apply_read(c, store, "f", LogRead(record, True, bodies=["hello"])))
    assert failed_stats(conn, store) == {}
