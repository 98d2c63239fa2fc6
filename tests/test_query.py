"""SessionQuery over both backends: listing order, surface and title reads, live sessions, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_helpers import BACKENDS, Backend, append_turn, compact, new_header, write_session

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.session import SessionError, SessionLog, SessionNotFoundError
from dsh_jupyter.store.base import SessionStore


@pytest.fixture(params=BACKENDS, ids=str)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    backend: Backend = request.param
    return backend.make(tmp_path)


def test_list_sessions_newest_first_then_by_id(store: SessionStore) -> None:
    write_session(store, "b", turns=1, created_at=3_000)
    write_session(store, "a", turns=1, created_at=3_000)
    write_session(store, "c", turns=1, created_at=5_000)
    write_session(store, "old", turns=1, created_at=1)
    query = SessionQuery(store)
    records = query.list_sessions()
    assert [r.id for r in records] == ["c", "a", "b", "old"]
    assert not any(r.live for r in records)
    assert SessionQuery(store).list_sessions() == records


def test_list_is_empty_for_a_fresh_store(store: SessionStore) -> None:
    assert SessionQuery(store).list_sessions() == []


def test_read_surface_and_title(store: SessionStore) -> None:
    header = new_header("s")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1, title=True)
        compact(log, 2)
        append_turn(log, 2, title=True)
    query = SessionQuery(store)
    snapshot = query.read_surface("s")
    assert snapshot.header == header
    assert snapshot.captured_through_seq == log.last_seq
    assert snapshot.events == log.surface()
    assert snapshot.events[0].data["source"]["plugin"] == "compact"
    assert query.title("s") == "title 2"
    assert query.title_record("s") == log.title()
    assert query.header("s") == header


def test_untitled_session(store: SessionStore) -> None:
    write_session(store, "plain", turns=0)
    header = new_header("untitled")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1)
    query = SessionQuery(store)
    assert query.title("untitled") is None and query.title_record("untitled") is None


def test_live_sessions_are_preferred(store: SessionStore) -> None:
    stored = write_session(store, "s", turns=1, created_at=10)
    query = SessionQuery(store)
    live, writer = store.open("s")
    query.register_live(live)
    append_turn(live, 2, title=True)  # buffered, not flushed: only the live log knows it
    assert query.read_surface("s").events == live.surface()
    assert query.read_surface("s").captured_through_seq == live.last_seq > stored.last_seq
    assert query.title("s") == "title 2"
    assert [(r.id, r.live) for r in query.list_sessions()] == [("s", True)]
    assert store.read_surface("s").captured_through_seq == stored.last_seq

    fresh = SessionLog(new_header("new", created_at=20))
    query.register_live(fresh)
    assert [r.id for r in query.list_sessions()] == ["s"], "an empty live log is not a session yet"
    fresh.append("turn/start", {"turn": 1})
    assert [(r.id, r.live) for r in query.list_sessions()] == [("new", True), ("s", True)]
    assert query.read_surface("new").captured_through_seq == 0
    assert query.header("new") == fresh.header

    query.unregister_live("s")
    writer.close()
    assert query.read_surface("s").events == live.surface()  # flushed on close, now read from storage
    query.unregister_live("missing")  # no error


def test_missing_session_is_a_clear_error(store: SessionStore) -> None:
    write_session(store, "there", turns=1)
    query = SessionQuery(store)
    for call in (query.read_surface, query.title, query.title_record, query.header):
        with pytest.raises(SessionNotFoundError, match="'nowhere' not found"):
            call("nowhere")


def test_header_and_writability_checks(store: SessionStore) -> None:
    write_session(store, "there", turns=1, created_at=42)
    query = SessionQuery(store)
    assert query.header("there").created_at == 42
    store.check_writable()  # a store this user owns
    store.check_writable("there")
    assert query.title_or_none("nowhere") is None  # a lookup over many sessions never stops at one
    assert query.skipped == []


def test_one_bad_log_is_skipped_with_a_warning_naming_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import os

    from dsh_jupyter.store import JsonlStore

    store = JsonlStore(tmp_path / "s")
    write_session(store, "good", turns=1)
    write_session(store, "damaged", turns=2)
    damaged = store.log_path("damaged")
    lines = damaged.read_bytes().split(b"\n")
    lines[3] = b"[" * 5000  # inside the committed log: the log is corrupt, its header still lists it
    damaged.write_bytes(b"\n".join(lines))
    store.folder("pipe").mkdir()
    os.mkfifo(store.log_path("pipe"))
    query = SessionQuery(store)
    with caplog.at_level("WARNING"):
        assert [r.id for r in query.list_sessions()] == ["damaged", "good"]
    assert [m for m in query.skipped if str(store.log_path("pipe")) in m and "named pipe" in m]
    assert str(store.log_path("pipe")) in caplog.text
    assert query.title_or_none("damaged") is None and query.title_or_none("good") == "title 1"
    with pytest.raises(SessionError, match="event line 3"):
        query.title("damaged")
    caplog.clear()
    with caplog.at_level("WARNING"):
        query.list_sessions()
    assert caplog.text == ""  # warned once per store, not on every listing
