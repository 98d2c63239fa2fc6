"""The catalog database: schema versions, stored text encoding, and what SQLite errors mean."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_jupyter.catalog.schema import SCHEMA_VERSION, connect, dec, enc, ensure_schema, error_kind

TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)


@given(TEXT, TEXT)
def test_stored_text_sorts_and_searches_like_python_strings(a: str, b: str) -> None:
    assert (enc(a) < enc(b)) == (a < b)
    assert (enc(b) in enc(a)) == (b in a)
    assert dec(enc(a)) == a


def test_lone_surrogates_are_stored_too() -> None:
    text = "id-\ud800-end"
    assert dec(enc(text)) == text and dec(None) is None
    assert enc("\ud7ff") < enc("\ud800") < enc("\ue000") < enc("\U00010000")


def test_a_new_file_gets_the_schema_once(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.sqlite", busy_ms=100)
    assert ensure_schema(conn) is True
    assert ensure_schema(conn) is False
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == str(SCHEMA_VERSION)


def test_another_schema_version_is_dropped_and_rebuilt(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.sqlite", busy_ms=100)
    ensure_schema(conn)
    conn.execute("INSERT INTO stores(root, registered_ms) VALUES(x'2f61', 1)")
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    assert ensure_schema(conn) is True
    assert conn.execute("SELECT count(*) FROM stores").fetchone()[0] == 0
    conn.execute("UPDATE meta SET value = 'garbage' WHERE key = 'schema'")
    assert ensure_schema(conn) is True


def test_errors_are_classified(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError) as info:
        sqlite3.connect(bad).execute("SELECT * FROM sqlite_master").fetchall()
    assert error_kind(info.value) == "corrupt"
    path = tmp_path / "c.sqlite"
    ensure_schema(connect(path, busy_ms=100))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    other = connect(path, busy_ms=10)
    with pytest.raises(sqlite3.OperationalError) as busy:
        other.execute("BEGIN IMMEDIATE")
    assert error_kind(busy.value) == "busy"
    holder.execute("ROLLBACK")
    with pytest.raises(sqlite3.OperationalError) as other_error:
        other.execute("SELECT nope FROM nowhere")
    assert error_kind(other_error.value) == "other"
    assert error_kind(sqlite3.OperationalError("database is locked")) == "busy"
    assert error_kind(sqlite3.DatabaseError("database disk image is malformed")) == "corrupt"
