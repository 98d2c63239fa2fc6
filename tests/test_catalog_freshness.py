"""What a query checks: changed listings, folders waiting for a log, hot rows, and the rows it returns."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from catalog_helpers import make_session, set_title

from dsh_jupyter.catalog.entries import CatalogEntry
from dsh_jupyter.catalog.freshness import checked, dedupe, freshen, log_path
from dsh_jupyter.catalog.indexer import Indexer
from dsh_jupyter.catalog.registry import load_stores, store_root
from dsh_jupyter.catalog.rows import ROW_COLUMNS, Row, transaction, upsert_store
from dsh_jupyter.catalog.schema import connect, ensure_schema
from dsh_jupyter.catalog.worker import Job
from dsh_jupyter.store import JsonlStore


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = connect(tmp_path / "c.sqlite", busy_ms=100)
    ensure_schema(c)
    yield c
    c.close()


def rows(conn: sqlite3.Connection) -> list[Row]:
    return [Row.from_sql(r) for r in conn.execute(f"SELECT {ROW_COLUMNS} FROM sessions ORDER BY folder")]


def test_dedupe_keeps_the_first_copy_up_to_the_limit() -> None:
    entries = [CatalogEntry(sid, "", "", None, 0, None) for sid in ("a", "b", "a", "c", "d")]
    assert [e.session_id for e in dedupe(entries, 3)] == ["a", "b", "c"]


def test_a_changed_listing_is_reconciled_and_hot_rows_are_re_read(tmp_path: Path, conn: sqlite3.Connection) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "one", title="first")
    root = store_root(store.root)
    sid, _ = transaction(conn, lambda c: upsert_store(c, root))
    indexer = Indexer()
    report = indexer.index_store(conn, load_stores(conn)[sid], deadline=None, full_stat=True, lease=True)
    assert report.indexed == 1
    submitted: list[Job] = []
    make_session(store, "two")
    set_title(store, "one", "renamed")
    stores, unsaved = freshen(conn, indexer, submitted.append, hot_window=900.0, listing_budget=5.0,
                              defer_bytes=None)
    assert unsaved == {} and submitted == [] and sid in stores
    assert [(r.session_id, r.log.title) for r in rows(conn)] == [("one", "renamed"), ("two", None)]


def test_a_folder_waiting_for_its_log_is_indexed_once_it_appears(tmp_path: Path, conn: sqlite3.Connection) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "first")
    root = store_root(store.root)
    sid, _ = transaction(conn, lambda c: upsert_store(c, root))
    indexer = Indexer()
    indexer.index_store(conn, load_stores(conn)[sid], deadline=None, full_stat=True, lease=True)
    folder = store.folder("later")
    folder.mkdir(parents=True)
    indexer.index_store(conn, load_stores(conn)[sid], deadline=None, full_stat=True, lease=True)
    assert conn.execute("SELECT count(*) FROM pending_folders").fetchone() == (1,)
    os.rmdir(folder)
    make_session(store, "later")
    os.utime(store.root, ns=(1, 1))  # hide the listing change: only the pending check can find it
    transaction(conn, lambda c: c.execute("UPDATE stores SET dir_mtime_ns = 1"))
    freshen(conn, indexer, lambda job: None, hot_window=0.0, listing_budget=5.0, defer_bytes=None)
    assert [r.session_id for r in rows(conn)] == ["first", "later"]
    assert conn.execute("SELECT count(*) FROM pending_folders").fetchone() == (0,)


def test_a_store_whose_root_came_back_is_read_until_it_is_indexed(tmp_path: Path, conn: sqlite3.Connection) -> None:
    """A store registered before its folder existed (a server started in a folder with no sessions yet) is marked
    missing; once the folder is there, a query treats it as a store being indexed (its logs read directly), not as
    one to leave out until the background has indexed it."""
    store = JsonlStore(tmp_path / "s")
    root = store_root(store.root)
    sid, _ = transaction(conn, lambda c: upsert_store(c, root))
    indexer = Indexer()
    indexer.index_store(conn, load_stores(conn)[sid], deadline=None, full_stat=True, lease=True)
    assert load_stores(conn)[sid].missing
    make_session(store, "later")
    submitted: list[Job] = []
    stores, _ = freshen(conn, indexer, submitted.append, hot_window=900.0, listing_budget=5.0, defer_bytes=None)
    assert submitted == [("index", sid)]  # the background indexes it
    assert not stores[sid].missing and not stores[sid].ready  # meanwhile: a store being indexed
    assert load_stores(conn)[sid].missing  # the mark itself goes only when it is indexed


def test_rows_about_to_be_returned_are_checked_against_their_logs(tmp_path: Path, conn: sqlite3.Connection) -> None:
    store = JsonlStore(tmp_path / "s")
    for name in ("a", "b"):
        make_session(store, name, title=name)
    root = store_root(store.root)
    sid, _ = transaction(conn, lambda c: upsert_store(c, root))
    indexer = Indexer()
    indexer.index_store(conn, load_stores(conn)[sid], deadline=None, full_stat=True, lease=True)
    before = rows(conn)
    assert log_path({sid: root}, before[0]) == os.path.join(root, before[0].folder, "session.jsonl")
    os.unlink(store.log_path("a"))
    set_title(store, "b", "b renamed")
    now = checked(conn, indexer, {sid: root}, before)
    assert [(r.session_id, r.log.title) for r in now] == [("b", "b renamed")]
    assert [r.session_id for r in rows(conn)] == ["b"]
