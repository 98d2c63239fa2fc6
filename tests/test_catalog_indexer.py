"""Indexing big and bad logs: the body index is capped per session and says so; one bad log costs only itself.

Every test writes real logs with the real writer (or damages them on disk) and indexes them with a real
catalog; the cap is set small so a log of a few MB shows what a gigabyte would.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from catalog_helpers import add_turn, chat_session, make_session, record_full_reads

from dsh_jupyter.catalog import Catalog, CatalogEntry
from dsh_jupyter.catalog.bodies import unpack
from dsh_jupyter.catalog.indexer import Indexer
from dsh_jupyter.catalog.schema import connect as connect_catalog
from dsh_jupyter.store import JsonlStore

CAP = 64 * 1024
GOOD = ["good-1", "good-2", "good-3"]


def good_store(root: Path) -> JsonlStore:
    store = JsonlStore(root)
    for n, sid in enumerate(GOOD):
        make_session(store, sid, created_at=1_787_000_000_000 + n, title=f"good title {n}", prompt="about parquet")
    return store


def catalog_at(tmp_path: Path, **kw: Any) -> Catalog:
    return Catalog(tmp_path / "home" / "catalog.sqlite", background=False, fallback_budget=30.0, **kw)


def ids(entries: list[CatalogEntry]) -> list[str]:
    return sorted(e.session_id for e in entries)


def body_text_of(catalog: Catalog, session_id: str) -> str:
    conn = sqlite3.connect(catalog.path)
    try:
        (rowid,) = conn.execute("SELECT id FROM sessions WHERE session_id = ?", (session_id.encode(),)).fetchone()
        rows = conn.execute("SELECT text_z FROM bodies WHERE id >> 20 = ? ORDER BY id", (rowid,)).fetchall()
    finally:
        conn.close()
    return "".join(unpack(bytes(r[0])) for r in rows)


@pytest.fixture
def read_counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each folder's log was read in full by the indexer (as of each look)."""
    reads = record_full_reads(monkeypatch)

    class Live(Counter[str]):
        def __missing__(self, folder: str) -> int:
            return sum(1 for f, _ in reads if f == folder)

    return Live()


# ----------------------------------------------------------------------------------------------- the cap
def test_a_chat_heavy_session_is_indexed_up_to_the_cap_and_says_so(tmp_path: Path) -> None:
    store = good_store(tmp_path / "s")
    chat_session(store, "big-chat", turns=40, size=40_000)  # ~3.2 MB of conversation
    assert os.path.getsize(store.log_path("big-chat")) > 3_000_000
    catalog = catalog_at(tmp_path, body_cap=CAP)
    report = catalog.ensure_store(store.root, budget=None)
    assert report.indexed == 4 and report.failed == 0 and not report.errors
    big = catalog.lookup("big-chat")[0]
    assert big.body_truncated and big.to_json()["bodyIndexTruncated"] is True
    assert big.user_messages == 40 and big.assistant_messages == 80  # counts are of the whole conversation
    assert not any(catalog.lookup(sid)[0].body_truncated for sid in GOOD)
    assert [e.session_id for e in catalog.candidates("t", None, "alphaword", body=True)] == ["big-chat"]
    assert catalog.candidates("t", None, "omegaword", body=True) == []  # past the cap: not searchable
    assert ids(catalog.candidates("t", None, "parquet", body=True)) == GOOD
    text = body_text_of(catalog, "big-chat")
    assert text.startswith("alphaword") and len(text.encode()) <= CAP
    stats = catalog.stats()
    assert stats["bodyIndexTruncated"] == 1 and stats["failedLogs"] == 0 and stats["bodyCap"] == CAP


def test_appending_to_a_capped_session_keeps_it_capped(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    chat_session(store, "big-chat", turns=10, size=10_000)
    catalog = catalog_at(tmp_path, body_cap=CAP)
    catalog.ensure_store(store.root, budget=None)
    log, writer = store.open("big-chat")
    with writer:
        add_turn(log, 11, prompt="lateword appended after the cap")
    catalog.session_changed(store.root, "big-chat")
    entry = catalog.lookup("big-chat")[0]
    assert entry.body_truncated and entry.user_messages == 11
    assert catalog.candidates("t", None, "lateword", body=True) == []
    assert len(body_text_of(catalog, "big-chat").encode()) <= CAP


def test_a_session_under_the_cap_is_indexed_whole_even_when_its_log_is_bigger(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    chat_session(store, "tools", turns=6, size=200, tool_output="x" * 30_000)  # big tool output, little text
    assert os.path.getsize(store.log_path("tools")) > CAP
    catalog = catalog_at(tmp_path, body_cap=CAP)
    catalog.ensure_store(store.root, budget=None)
    entry = catalog.lookup("tools")[0]
    assert not entry.body_truncated
    assert [e.session_id for e in catalog.candidates("t", None, "omegaword", body=True)] == ["tools"]


def test_a_negative_cap_is_refused_in_plain_words() -> None:
    with pytest.raises(ValueError, match="body index cap must be 0 or more bytes"):
        Indexer(-1)


# ----------------------------------------------------------------------------------------------- bad logs
def nest(path: Path) -> None:
    with open(path, "ab") as fh:
        fh.write(b"[" * 100_000 + b"\n")


def damage(store: JsonlStore, kind: str) -> str:
    """Make a session of ``store`` bad in the way ``kind`` says; returns its folder name."""
    make_session(store, "bad", created_at=1_787_000_000_100, title="bad title", prompt="about parquet")
    path = store.log_path("bad")
    folder = path.parent.name
    if kind == "nested-line":  # a line nested deep enough for a RecursionError in a JSON decoder
        nest(path)
    elif kind == "nested-header":
        path.write_bytes(b"[" * 100_000 + b"\n" + path.read_bytes().split(b"\n", 1)[1])
    elif kind == "damaged-json":  # a bad line before a completed turn: the log is corrupt
        data = path.read_bytes()
        path.write_bytes(data + b'{"type":"turn/start","seq":\x00garbage\n'
                         + b'{"type":"turn/end","seq":99,"time":1,"data":{"turn":9,"reason":{"kind":"completed"}}}\n')
    elif kind == "unreadable":  # a log that cannot be opened as a file
        path.unlink()
        path.mkdir()
    elif kind == "headerless":
        path.write_bytes(b'{"type":"session","id":"bad"')
    else:  # pragma: no cover
        raise AssertionError(kind)
    return folder


KINDS = ["nested-line", "nested-header", "damaged-json", "unreadable", "headerless"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_bad_log_never_hides_the_others(tmp_path: Path, kind: str) -> None:
    store = good_store(tmp_path / "s")
    damage(store, kind)
    catalog = catalog_at(tmp_path, body_cap=CAP)
    report = catalog.ensure_store(store.root, budget=None)
    assert not report.errors and not report.pending
    listed = catalog.candidates("t", None, "")
    assert set(GOOD) <= set(ids(listed))
    found = ids(catalog.candidates("t", None, "parquet", body=True))
    assert found == (sorted([*GOOD, "bad"]) if "bad" in found and kind == "nested-line" else GOOD)
    assert ids(catalog.candidates("t", None, "good title")) == GOOD
    assert ids(catalog.sessions()) == ids(listed)
    if kind == "nested-line":  # still listed: the nested line is a tolerated crash tail, or the text is unreadable
        assert [e.session_id for e in catalog.lookup("bad")] == ["bad"] and report.failed == 0
    elif kind == "damaged-json":  # the header is fine: listed by id, its conversation unreadable
        (bad,) = catalog.lookup("bad")
        assert not bad.readable and bad.label == "bad"
        assert report.failed == 0
    else:
        assert catalog.lookup("bad") == [] and report.failed == 1
        assert catalog.stats()["failedLogs"] == 1


def test_a_failing_log_is_read_once_until_it_changes(tmp_path: Path, read_counts: Counter[str]) -> None:
    store = good_store(tmp_path / "s")
    folder = damage(store, "nested-header")
    catalog = catalog_at(tmp_path, body_cap=CAP, sweep_interval=0.0)
    catalog.ensure_store(store.root, budget=None)
    for _ in range(3):
        catalog.sync()
        assert set(GOOD) <= set(ids(catalog.candidates("t", None, "")))
    assert read_counts[folder] == 1
    nest(store.log_path("bad"))  # it changed (still bad): read again, once
    for _ in range(3):
        catalog.sync()
    assert read_counts[folder] == 2
    catalog.reindex()  # a reindex forgets every failure
    assert read_counts[folder] == 3


def test_a_log_that_becomes_readable_is_indexed_and_forgotten_as_failed(tmp_path: Path) -> None:
    store = good_store(tmp_path / "s")
    damage(store, "headerless")
    catalog = catalog_at(tmp_path, body_cap=CAP)
    catalog.ensure_store(store.root, budget=None)
    assert catalog.stats()["failedLogs"] == 1
    store.log_path("bad").unlink()
    make_session(store, "bad", title="fixed now")
    catalog.sync()
    assert catalog.lookup("bad")[0].title == "fixed now"
    assert catalog.stats()["failedLogs"] == 0


def limited_connect(limit: int) -> Callable[..., sqlite3.Connection]:

    def connect(path: Path, *, busy_ms: int) -> sqlite3.Connection:
        conn = connect_catalog(path, busy_ms=busy_ms)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
        return conn

    return connect


def test_a_value_sqlite_refuses_costs_only_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   read_counts: Counter[str]) -> None:
    """A row SQLite will not store ("string or blob too big") never makes the catalog unavailable."""
    monkeypatch.setattr("dsh_jupyter.catalog.connection.connect", limited_connect(50_000))
    store = good_store(tmp_path / "s")
    make_session(store, "huge-title", title="t" * 80_000)
    catalog = catalog_at(tmp_path, body_cap=CAP)
    report = catalog.ensure_store(store.root, budget=None)
    assert report.indexed == 3 and report.failed == 1 and not report.errors
    assert ids(catalog.candidates("t", None, "")) == GOOD
    assert ids(catalog.candidates("t", None, "parquet", body=True)) == GOOD
    for _ in range(3):
        catalog.sync()
    assert read_counts["huge-title"] == 1
    assert catalog.stats()["failedLogs"] == 1


def test_a_refused_value_met_while_refreshing_a_row_drops_only_that_row(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store = good_store(tmp_path / "s")
    catalog = catalog_at(tmp_path, body_cap=CAP)
    catalog.ensure_store(store.root, budget=None)
    catalog.close()
    monkeypatch.setattr("dsh_jupyter.catalog.connection.connect", limited_connect(50_000))
    catalog = catalog_at(tmp_path, body_cap=CAP)
    log, writer = store.open("good-2")
    with writer:
        log.append("session/title", {"title": "u" * 80_000, "messageSeqs": [], "source": {"kind": "user"}})
    assert ids(catalog.candidates("t", None, "")) == ["good-1", "good-3"]  # the hot row is re-read, refused
    assert ids(catalog.candidates("t", None, "good title")) == ["good-1", "good-3"]
    assert catalog.stats()["failedLogs"] == 1


def test_a_log_that_is_a_link_loop_leaves_the_others_listed(tmp_path: Path) -> None:
    store = good_store(tmp_path / "s")
    loop = store.folder("loop")
    loop.mkdir()
    (loop / "session.jsonl").symlink_to(loop / "session.jsonl")
    catalog = catalog_at(tmp_path, body_cap=CAP)
    report = catalog.ensure_store(store.root, budget=None)
    assert not report.errors
    assert ids(catalog.candidates("t", None, "")) == GOOD
    assert ids(catalog.sessions()) == GOOD
