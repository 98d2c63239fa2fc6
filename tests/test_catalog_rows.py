"""Catalog rows: one primary copy per session id, and index rows that follow every write and delete."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dsh_jupyter.catalog.logs import LogRead, LogRecord, LogStat
from dsh_jupyter.catalog.rows import Row, apply_read, delete_rows, store_rows, transaction, upsert_store
from dsh_jupyter.catalog.schema import connect, ensure_schema


def facts(sid: str, mtime: int, bodies: list[str], *, full: bool = True, title: str | None = "t") -> LogRead:
    record = LogRecord(sid, "/w", 1, title, True, 1, 1, 1, 0, LogStat(10, mtime, 1), 10, b"x", 1)
    return LogRead(record, full, bodies=bodies)


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    c = connect(tmp_path / "c.sqlite", busy_ms=100)
    ensure_schema(c)
    return c


def primaries(conn: sqlite3.Connection) -> list[tuple[int, bytes]]:
    return conn.execute("SELECT store_id, session_id FROM sessions WHERE is_primary = 1 ORDER BY 1").fetchall()


def body_hits(conn: sqlite3.Connection, word: str) -> list[int]:
    return [r[0] for r in conn.execute("SELECT rowid FROM body_index WHERE body_index MATCH ?", (word,))]


def test_the_copy_changed_last_is_primary(conn: sqlite3.Connection) -> None:
    a, created = transaction(conn, lambda c: upsert_store(c, "/a"))
    b, _ = transaction(conn, lambda c: upsert_store(c, "/b"))
    assert created and transaction(conn, lambda c: upsert_store(c, "/a")) == (a, False)
    transaction(conn, lambda c: apply_read(c, a, "f", facts("same", 100, ["x"])))
    transaction(conn, lambda c: apply_read(c, b, "f", facts("same", 200, ["x"])))
    assert primaries(conn) == [(b, b"same")]
    transaction(conn, lambda c: apply_read(c, a, "f", facts("same", 300, ["x"])))
    assert primaries(conn) == [(a, b"same")]
    row_a = store_rows(conn, a)["f"]
    transaction(conn, lambda c: delete_rows(c, [row_a.rowid, 999]))
    assert primaries(conn) == [(b, b"same")]


def test_body_rows_follow_full_and_incremental_writes(conn: sqlite3.Connection) -> None:
    store, _ = transaction(conn, lambda c: upsert_store(c, "/a"))
    rowid = transaction(conn, lambda c: apply_read(c, store, "f", facts("s", 1, ["alpha beta"])))
    transaction(conn, lambda c: apply_read(c, store, "f", facts("s", 2, ["gamma"], full=False)))
    assert len(body_hits(conn, "alpha")) == 1 and len(body_hits(conn, "gamma")) == 1
    row = store_rows(conn, store)["f"]
    assert isinstance(row, Row) and row.chunks == 2 and row.rowid == rowid
    transaction(conn, lambda c: apply_read(c, store, "f", facts("s", 3, ["delta"])))  # a full read replaces all
    assert body_hits(conn, "alpha") == [] and body_hits(conn, "gamma") == [] and len(body_hits(conn, "delta")) == 1
    transaction(conn, lambda c: delete_rows(c, [rowid]))
    assert body_hits(conn, "delta") == [] and conn.execute("SELECT count(*) FROM bodies").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM meta_index WHERE meta_index MATCH '\"t\"'").fetchone()[0] == 0


def test_a_failed_transaction_leaves_nothing(conn: sqlite3.Connection) -> None:
    store, _ = transaction(conn, lambda c: upsert_store(c, "/a"))

    def half(c: sqlite3.Connection) -> None:
        apply_read(c, store, "f", facts("s", 1, ["alpha"]))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        transaction(conn, half)
    assert store_rows(conn, store) == {} and not conn.in_transaction
