"""The persistence contract, run against every backend (JSONL, SQLite and PostgreSQL)."""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from store_helpers import (
    ALL_BACKENDS,
    Backend,
    add_raw_event,
    append_turn,
    compact,
    damage_event,
    drop_event,
    new_header,
    open_backend_store,
    open_turn,
    raw_lines,
    replace_header,
    tear_tail,
    write_session,
)

from dsh_jupyter._json import dumpb
from dsh_jupyter.session import (
    Event,
    SessionCorruptError,
    SessionFormatError,
    SessionHeader,
    SessionLockedError,
    SessionLog,
    SessionNotFoundError,
)
from dsh_jupyter.store import JsonlStore, SessionExistsError, SessionWriteError, SqliteStore
from dsh_jupyter.store import postgres as postgres_backend
from dsh_jupyter.store import sqlite as sqlite_backend
from dsh_jupyter.store.base import SessionStore
from dsh_jupyter.store.postgres import PostgresStore
from dsh_jupyter.store.repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN


@pytest.fixture(params=ALL_BACKENDS, ids=str)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture
def store(backend: Backend, tmp_path: Path, request: pytest.FixtureRequest) -> SessionStore:
    return open_backend_store(backend, tmp_path, request)


def surface_seqs(store: SessionStore, session_id: str) -> list[int]:
    return [e.seq for e in store.read_surface(session_id).events]


# -- round trip ------------------------------------------------------------------------------------------
def test_round_trip(store: SessionStore) -> None:
    written = write_session(store, "s-1", turns=3)
    loaded = store.load("s-1")
    assert loaded.header == written.header
    assert loaded.events == written.events
    snapshot = store.read_surface("s-1")
    assert snapshot.header == written.header
    assert snapshot.captured_through_seq == written.last_seq
    assert snapshot.events == written.surface()
    assert store.read_title("s-1") == {"title": "title 1", "messageSeqs": [2], "source": {"kind": "fallback"}}
    assert [h.id for h in store.list_headers()] == ["s-1"]
    assert store.exists("s-1") and not store.exists("s-2")


def test_surface_read_can_skip_decoding_chosen_types(store: SessionStore) -> None:
    written = write_session(store, "s-1", turns=2)
    full = store.read_surface("s-1")
    lean = store.read_surface("s-1", skip_data={"tool/result"})
    assert [(e.type, e.seq, e.surface_op) for e in lean.events] == [(e.type, e.seq, e.surface_op) for e in full.events]
    assert any(e.type == "tool/result" for e in lean.events)
    for before, after in zip(full.events, lean.events, strict=True):
        if after.type == "tool/result":
            assert after.data is None and after.surface_op == before.surface_op
        else:
            assert after == before
    assert lean.captured_through_seq == written.last_seq


def test_compacted_session_round_trip(store: SessionStore) -> None:
    header = new_header("compacted")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1)
        turn1_nodes = len(log.surface())
        append_turn(log, 2)
        writer.flush()
        first = compact(log, 3, "first", last=turn1_nodes - 1)  # replaces turn 1 only
        append_turn(log, 3)
        surface = [e.seq for e in log.surface()]
        assert surface[0] == first and surface[1] < first
        # The second range starts at the first checkpoint and ends at an older seq (positional).
        second = compact(log, 4, "second", last=surface.index(max(s for s in surface[1:] if s < first)))
        append_turn(log, 4, title=True)
    snapshot = store.read_surface("compacted")
    assert snapshot.events == log.surface()
    assert snapshot.events[0].seq == second
    assert first not in [e.seq for e in snapshot.events]
    assert store.load("compacted").surface() == log.surface()
    assert store.read_title("compacted")["title"] == "title 4"


def test_jsonl_round_trip_is_byte_identical(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    write_session(store, "s-1", turns=2)
    original = store.log_path("s-1").read_bytes()
    loaded = store.load("s-1")
    rewritten = b"".join([dumpb(loaded.header.to_json()) + b"\n"] + [dumpb(e.to_json()) + b"\n" for e in loaded.events])
    assert rewritten == original
    # ...and a copy written from the loaded log is the same file again.
    copy = JsonlStore(tmp_path / "copy")
    with copy.create(loaded.header) as writer:
        writer.append(loaded.events)
    assert copy.log_path("s-1").read_bytes() == original


def test_jsonl_log_is_plain_json_lines(tmp_path: Path) -> None:
    import json

    store = JsonlStore(tmp_path / "sessions")
    write_session(store, "s-1")
    lines = store.log_path("s-1").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["type"] == "session" and records[0]["delegationDepth"] == 0
    assert [r["seq"] for r in records[1:]] == list(range(len(records) - 1))


# -- lazy materialisation ----------------------------------------------------------------------------------
def test_lazy_materialisation(store: SessionStore, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    header = new_header("lazy")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    writer.flush()  # nothing buffered: still nothing stored
    assert not writer.materialized
    append_turn(log, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "appends must stay in memory until flush"
    assert store.list_headers() == [] and not store.exists("lazy")
    with pytest.raises(SessionNotFoundError):
        store.read_surface("lazy")
    writer.flush()
    assert writer.materialized
    assert [h.id for h in store.list_headers()] == ["lazy"]
    assert store.load("lazy").events == log.events
    writer.close()


def test_never_appended_session_leaves_nothing(store: SessionStore, tmp_path: Path) -> None:
    header = new_header("empty")
    store.create(header).close()
    assert list(tmp_path.iterdir()) == []
    assert store.list_headers() == []


# -- locate ------------------------------------------------------------------------------------------------
def test_locate_before_and_after_first_write(store: SessionStore, tmp_path: Path) -> None:
    header = new_header("loc/ated")
    before = store.locate(header)
    if isinstance(store, (SqliteStore, PostgresStore)):
        assert before is None and store.session_dir(header) is None
        write_session(store, "loc/ated")
        assert store.locate(header) is None
        return
    assert before is not None and before.kind == "jsonl"
    assert os.path.isabs(before.path) and not os.path.exists(before.path)
    assert before.path == str(tmp_path / "sessions" / "loc~002Fated" / "session.jsonl")
    assert os.fspath(before) == before.path
    assert store.session_dir(header) == Path(before.path).parent
    write_session(store, "loc/ated")
    after = store.locate(header)
    assert after == before and os.path.isfile(after.path)


def test_relative_root_is_resolved_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = JsonlStore("rel/sessions")
    monkeypatch.chdir("/")
    location = store.locate(new_header("x"))
    assert location.path == str(tmp_path / "rel" / "sessions" / "x" / "session.jsonl")
    monkeypatch.chdir(tmp_path)
    relative_db = SqliteStore("db/sessions.db")
    monkeypatch.chdir("/")
    assert relative_db.path == tmp_path / "db" / "sessions.db"


# -- torn tail -------------------------------------------------------------------------------------------
def test_torn_tail_is_ignored_and_dropped_on_open(store: SessionStore) -> None:
    written = write_session(store, "torn", turns=2)
    tear_tail(store, "torn", {"type": "turn/start", "seq": written.next_seq, "time": 1, "data": {"turn": 3}})
    assert store.load("torn").events == written.events
    assert store.read_surface("torn").captured_through_seq == written.last_seq
    log, writer = store.open("torn")
    with writer:
        assert log.events == written.events  # a closed last turn needs no repair
        append_turn(log, 3)
    again = store.load("torn")
    assert again.events == log.events
    if isinstance(store, JsonlStore):
        assert all(line.endswith(b"}") for line in raw_lines(store, "torn")[:-1])


def test_header_only_and_headerless_logs(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    header = new_header("h")
    path = store.log_path("h")
    path.parent.mkdir(parents=True)
    path.write_bytes(dumpb(header.to_json()) + b"\n")
    assert store.load("h").events == []
    snapshot = store.read_surface("h")
    assert snapshot.captured_through_seq is None and snapshot.events == []
    log, writer = store.open("h")
    with writer:
        append_turn(log, 1)
    assert len(store.load("h")) == len(log)
    for content in (b"", dumpb(header.to_json())):
        path.write_bytes(content)
        with pytest.raises(SessionCorruptError, match="header-less"):
            store.load("h")
        with pytest.raises(SessionCorruptError, match="header-less"):
            store.read_surface("h")


# -- corruption ------------------------------------------------------------------------------------------
def test_corruption_before_last_turn_end_is_rejected_with_its_line(store: SessionStore) -> None:
    written = write_session(store, "bad", turns=2)
    tool_call = next(e.seq for e in written.events if e.type == "tool/call")
    line = damage_event(store, "bad", tool_call)
    # SQLite's surface and title reads decode only the rows they return (see the next test).
    reads = (store.load, store.read_surface, store.read_title, store.open) if isinstance(store, JsonlStore) else (
        store.load, store.open)
    for read in reads:
        with pytest.raises(SessionCorruptError) as info:
            read("bad")
        message = str(info.value)
        assert "corrupt" in message and "backup" in message
        if isinstance(store, JsonlStore):
            assert info.value.line == line == tool_call + 1
            assert f"line {line}" in message and str(store.log_path("bad")) in message
        else:
            where = store.where if isinstance(store, PostgresStore) else str(store.path)
            assert f"seq {tool_call}" in message and where in message


def test_damaged_surface_event_fails_a_surface_read(store: SessionStore) -> None:
    written = write_session(store, "bad", turns=2)
    message = written.surface()[-1].seq
    damage_event(store, "bad", message)
    with pytest.raises(SessionCorruptError, match="corrupt"):
        store.read_surface("bad")


def test_damage_after_last_turn_end_is_a_tolerated_crash_tail(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    header = new_header("tail")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1)
        writer.flush()
        kept = log.next_seq
        log.append("turn/start", {"turn": 2})
        log.append("step/start", {"turn": 2, "step": 1})
        log.append("user/message", {"content": [{"type": "text", "text": "x"}], "source": {"kind": "user"},
                                    "role": "user", "id": "m"}, surface_op="append")
    lines = raw_lines(store, "tail")
    # (lines[-1] is the empty text after the last newline) the turn/start of the unfinished turn 2 is damaged
    lines[-4] = lines[-4][:10]
    store.log_path("tail").write_bytes(b"\n".join(lines))
    assert len(store.load("tail")) == kept
    assert store.read_surface("tail").captured_through_seq == kept - 1
    reopened, writer = store.open("tail")
    with writer:
        assert len(reopened) == kept  # closed turn 1: no repair; the damaged tail was cut away
        append_turn(reopened, 2)
    assert store.load("tail").events == reopened.events


def test_damaged_line_that_is_itself_a_turn_end_is_corrupt(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    written = write_session(store, "te", turns=1)
    lines = raw_lines(store, "te")
    lines[-2] = lines[-2].replace(b'"seq":%d' % written.last_seq, b'"seq":%d' % (written.last_seq + 5))
    store.log_path("te").write_bytes(b"\n".join(lines))
    for read in (store.load, store.read_surface):
        with pytest.raises(SessionCorruptError, match="itself a turn/end") as info:
            read("te")
        assert info.value.line == written.last_seq + 1


# -- seq gaps --------------------------------------------------------------------------------------------
def test_batch_that_does_not_continue_the_log_is_rejected(store: SessionStore) -> None:
    header = new_header("gap")
    with store.create(header) as writer:
        first = Event("turn/start", 0, 1, {"turn": 1})
        with pytest.raises(SessionFormatError, match="continues at seq 0"):
            writer.append([Event("turn/start", 1, 1, {"turn": 1})])
        with pytest.raises(SessionFormatError, match="continues at seq 1"):
            writer.append([first, Event("step/start", 2, 1, {"turn": 1, "step": 1})])
        assert writer.pending == 0, "a rejected batch buffers nothing"
        writer.append([first])
        with pytest.raises(SessionFormatError, match="not JSON"):
            writer.append([Event("step/start", 1, 1, {"turn": 1, "step": object()})])
        with pytest.raises(SessionFormatError, match=r"unknown|ignorable"):
            writer.append([Event("made/up", 1, 1, {})])
        with pytest.raises(TypeError):
            writer.append([{"type": "step/start"}])  # type: ignore[list-item]
        assert writer.pending == 1
    assert [e.seq for e in store.load("gap").events] == [0]


def test_seq_gap_in_committed_region_is_rejected(store: SessionStore) -> None:
    written = write_session(store, "gap", turns=2)
    missing = written.events[5].seq
    line = drop_event(store, "gap", missing)
    with pytest.raises(SessionCorruptError) as info:
        store.load("gap")
    if isinstance(store, JsonlStore):
        assert info.value.line == line and f"expected {missing}, got {missing + 1}" in str(info.value)
        with pytest.raises(SessionCorruptError):
            store.read_surface("gap")
    else:
        assert f"seq {missing}" in str(info.value)


def test_seq_gap_after_last_turn_end_is_a_crash_tail(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    written = write_session(store, "gap", turns=1)
    add_raw_event(store, "gap", {"type": "turn/start", "seq": written.next_seq + 3, "time": 9, "data": {"turn": 2}})
    assert store.load("gap").events == written.events
    assert store.read_surface("gap").captured_through_seq == written.last_seq


# -- unknown event types ---------------------------------------------------------------------------------
def test_unknown_event_type_refuses_the_log(store: SessionStore) -> None:
    written = write_session(store, "u", turns=1)
    add_raw_event(store, "u", {"type": "future/thing", "seq": written.next_seq, "time": 5, "data": {}})
    for read in (store.load, store.read_surface, store.open):
        with pytest.raises(SessionFormatError, match="future/thing") as info:
            read("u")
        assert "ignorable" in str(info.value)
        if isinstance(store, JsonlStore):
            assert f"line {written.next_seq + 1}" in str(info.value)


def test_ignorable_unknown_event_type_is_kept(store: SessionStore) -> None:
    written = write_session(store, "u", turns=1)
    add_raw_event(store, "u", {"type": "future/thing", "seq": written.next_seq, "time": 5, "data": {"x": 1},
                               "ignorable": True})
    loaded = store.load("u")
    assert loaded.events[-1].type == "future/thing" and loaded.events[-1].ignorable
    assert store.read_surface("u").captured_through_seq == written.next_seq


# -- header validation -----------------------------------------------------------------------------------
BAD_HEADERS: list[tuple[str, bytes, str]] = [
    ("fractional createdAt", b'"createdAt":1.5', "createdAt"),
    ("negative createdAt", b'"createdAt":-1', "createdAt"),
    ("unsafe createdAt", b'"createdAt":9007199254740992', "createdAt"),
    ("-0 createdAt", b'"createdAt":-0', "createdAt"),
    ("missing delegationDepth", b"", "delegationDepth"),
    ("string delegationDepth", b'"delegationDepth":"0"', "delegationDepth"),
    ("agentPreset not a string", b'"agentPreset":5', "agentPreset"),
    ("foreign version", b'"version":1', "unsupported"),
    ("retired field", b'"sandboxMode":"x"', "retired"),
]


def _header_with(field: bytes) -> bytes:
    fields = {b'"createdAt"': b'"createdAt":1787130725417', b'"delegationDepth"': b'"delegationDepth":0',
              b'"version"': b'"version":0'}
    parts = [b'"type":"session"', fields[b'"version"'], b'"id":"h"', fields[b'"createdAt"'], b'"cwd":"/w"',
             fields[b'"delegationDepth"']]
    if field == b"":
        parts = [p for p in parts if not p.startswith(b'"delegationDepth"')]
    else:
        name = field.split(b":")[0]
        replaced = False
        for i, part in enumerate(parts):
            if part.startswith(name):
                parts[i] = field
                replaced = True
        if not replaced:
            parts.append(field)
    return b"{" + b",".join(parts) + b"}"


@pytest.mark.parametrize(("case", "field", "needle"), BAD_HEADERS, ids=[c[0] for c in BAD_HEADERS])
def test_header_validation(store: SessionStore, case: str, field: bytes, needle: str,
                           caplog: pytest.LogCaptureFixture) -> None:
    write_session(store, "h", turns=1)
    replace_header(store, "h", _header_with(field))
    for read in (store.load, store.read_surface, store.open):
        with pytest.raises(SessionFormatError, match=needle):
            read("h")
    with caplog.at_level(logging.WARNING):
        assert store.list_headers() == []
    assert needle in caplog.text


def test_valid_header_fields_round_trip(store: SessionStore) -> None:
    header = SessionHeader(id="child", created_at=5, cwd="/w", parent_session="p", seed_length=3,
                           origin="subagent", delegation_depth=2, agent_preset="reviewer")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1)
    assert store.load("child").header == header
    assert store.list_headers() == [header]


def test_create_rejects_invalid_header(store: SessionStore) -> None:
    with pytest.raises(SessionFormatError, match="createdAt"):
        store.create(SessionHeader(id="x", created_at=-1))


# -- traversal and unusual ids -----------------------------------------------------------------------------
ODD_IDS = ["../../etc/pwn", "/etc/passwd", ".", "..", "a~b", "~002E", "nul\x00id", "lone\ud800", "\udc00",
           "x" * 300, "~" * 300, "引号\"/slash\\/line\n", "😀"]


def test_odd_ids_stay_under_the_root_and_round_trip(store: SessionStore, tmp_path: Path,
                                                    backend: Backend) -> None:
    for index, session_id in enumerate(ODD_IDS):
        written = write_session(store, session_id, turns=1, created_at=1000 + index)
        assert store.load(session_id).header.id == session_id
        assert store.read_surface(session_id).events == written.surface()
        if isinstance(store, JsonlStore):
            folder = store.session_dir(written.header)
            assert folder.parent == store.root
            assert folder.name not in (".", "..") and len(folder.name) <= 255
            assert Path(store.locate(written.header).path).resolve().is_relative_to(store.root.resolve())
    assert sorted(h.id for h in store.list_headers()) == sorted(ODD_IDS)
    # Nothing escaped the temporary folder.
    everything = {p.resolve() for p in tmp_path.rglob("*")}
    assert all(p.is_relative_to(tmp_path.resolve()) for p in everything)
    assert not Path("/etc/pwn").exists()


def test_ids_that_differ_only_in_escaping_do_not_collide(store: SessionStore) -> None:
    write_session(store, "a/b", turns=1)
    write_session(store, "a~002Fb", turns=1)
    assert store.load("a/b").header.id == "a/b"
    assert store.load("a~002Fb").header.id == "a~002Fb"


# -- missing sessions ------------------------------------------------------------------------------------
def test_missing_session_is_a_clear_error(store: SessionStore) -> None:
    for call in (store.load, store.read_surface, store.read_title, store.open, store.delete):
        with pytest.raises(SessionNotFoundError, match="'nope' not found"):
            call("nope")
    write_session(store, "other", turns=1)
    for call in (store.load, store.read_surface, store.read_title, store.open, store.delete):
        with pytest.raises(SessionNotFoundError):
            call("nope")


def test_create_refuses_an_existing_session(store: SessionStore) -> None:
    written = write_session(store, "dup", turns=1)
    with pytest.raises(SessionExistsError, match="open"):
        store.create(written.header)


def test_first_flush_never_overwrites_a_log_created_meanwhile(store: SessionStore) -> None:
    header = new_header("race")
    late = store.create(header)  # created before the session exists
    written = write_session(store, "race", turns=1)
    snapshot = store.load("race").events
    log = SessionLog(header)
    late.attach(log)
    append_turn(log, 1)
    with pytest.raises(SessionExistsError, match="Nothing was written"):
        late.flush()
    assert store.load("race").events == snapshot == written.events
    with pytest.raises(SessionExistsError):
        late.close()


# -- failed writes -----------------------------------------------------------------------------------------
class _Fault:
    """Make the next storage write fail part-way (after some bytes or rows went in)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: SessionStore) -> None:
        self.monkeypatch = monkeypatch
        self.store = store

    def arm(self, where: str = "sync") -> None:
        if isinstance(self.store, JsonlStore):
            if where == "sync":
                def failing_fsync(fd: int) -> None:
                    raise OSError(errno.ENOSPC, "No space left on device (injected)")

                self.monkeypatch.setattr(os, "fsync", failing_fsync)
            else:
                real_write = os.write

                def half_write(fd: int, data: Any) -> int:
                    real_write(fd, bytes(data)[: max(1, len(data) // 2)])
                    raise OSError(errno.EIO, "I/O error (injected)")

                self.monkeypatch.setattr(os, "write", half_write)
        elif isinstance(self.store, PostgresStore):
            import psycopg

            real_pg_insert = postgres_backend._insert_events

            def failing_pg_insert(cur: Any, key: bytes, rows: list[Any]) -> None:
                real_pg_insert(cur, key, rows)
                raise psycopg.OperationalError("could not extend file (injected)")

            self.monkeypatch.setattr(postgres_backend, "_insert_events", failing_pg_insert)
        else:
            real_insert = sqlite_backend._insert_events

            def failing_insert(conn: sqlite3.Connection, key: bytes, rows: list[Any]) -> None:
                real_insert(conn, key, rows)
                raise sqlite3.OperationalError("disk I/O error (injected)")

            self.monkeypatch.setattr(sqlite_backend, "_insert_events", failing_insert)

    def disarm(self) -> None:
        self.monkeypatch.undo()


@pytest.mark.parametrize("where", ["sync", "write"])
def test_failed_append_is_rolled_back(store: SessionStore, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    header = new_header("fail")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    append_turn(log, 1)
    writer.flush()
    stored = store.load("fail").events
    raw = store.log_path("fail").read_bytes() if isinstance(store, JsonlStore) else None
    append_turn(log, 2)
    fault = _Fault(monkeypatch, store)
    fault.arm(where)
    with pytest.raises(SessionWriteError, match="kept") as info:
        writer.flush()
    fault.disarm()
    assert "injected" in str(info.value)
    assert store.load("fail").events == stored, "the stored log is exactly as before the failed flush"
    if raw is not None:
        assert store.log_path("fail").read_bytes() == raw
    assert writer.pending == len(log) - len(stored)
    writer.flush()  # the buffered events are retried
    writer.close()
    assert store.load("fail").events == log.events


@pytest.mark.parametrize("where", ["sync", "write"])
def test_failed_first_flush_publishes_nothing(store: SessionStore, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path, where: str) -> None:
    header = new_header("first")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    append_turn(log, 1)
    fault = _Fault(monkeypatch, store)
    fault.arm(where)
    with pytest.raises(SessionWriteError):
        writer.flush()
    fault.disarm()
    assert store.list_headers() == [] and not store.exists("first")
    if isinstance(store, JsonlStore):
        assert sorted(p.name for p in store.folder("first").iterdir()) == ["session.lock"]  # no temp left
    writer.close()
    assert store.load("first").events == log.events


# -- resume and repair -------------------------------------------------------------------------------------
def test_open_repairs_an_interrupted_turn(store: SessionStore) -> None:
    header = new_header("crash")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1)
        open_turn(log, 2)  # the process dies while turn 2's tool runs; a checkpoint flush stored this much
    stored = store.load("crash")
    last = stored.events[-1]
    assert last.type == "tool/call"
    reopened, writer = store.open("crash")
    with writer:
        closers = reopened.events[len(stored):]
        assert [e.type for e in closers] == ["tool/result", "step/end", "turn/end"]
        assert all(e.time == last.time for e in closers)
        result = closers[0]
        assert result.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
        assert result.source_event_seqs == (last.seq,)
        block = result.data["message"]["content"][0]
        assert block["isError"] is True and block["toolCallId"] == "call-2"
        assert closers[2].data == {"turn": 2, "reason": {"kind": "interrupted"}}
        assert reopened.surface()[-1].seq == result.seq
    assert store.load("crash").events == reopened.events  # the closers were flushed


def test_open_repairs_a_tool_call_that_never_started(store: SessionStore) -> None:
    header = new_header("ns")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    log.append("turn/start", {"turn": 1})
    log.append("step/start", {"turn": 1, "step": 1})
    log.append("assistant/message", {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": [{"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a"}}, source_event_seqs=[])
    writer.close()
    reopened, writer = store.open("ns")
    with writer:
        closers = reopened.events[3:]
        assert [e.type for e in closers] == ["tool/result", "step/end", "turn/end"]
        assert closers[0].data["error"]["code"] == TOOL_NOT_STARTED
        assert closers[0].source_event_seqs is None


def test_open_keeps_appending_after_the_log(store: SessionStore) -> None:
    written = write_session(store, "resume", turns=1)
    log, writer = store.open("resume")
    assert log.events == written.events and writer.materialized
    with writer:
        append_turn(log, 2)
    assert store.load("resume").events == log.events
    if isinstance(store, JsonlStore):
        assert store.locate(log.header) == store.locate(written.header)


# -- single writer ------------------------------------------------------------------------------------------
def test_second_writer_in_the_same_process_is_refused(store: SessionStore) -> None:
    written = write_session(store, "one", turns=1)
    _log, writer = store.open("one")
    with pytest.raises(SessionLockedError, match="already open for writing") as info:
        store.open("one")
    assert "'one'" in str(info.value) and "new session" in str(info.value)
    with pytest.raises(SessionLockedError):
        store.delete("one")
    # Readers never block on the writer.
    assert store.load("one").events == written.events
    assert store.read_surface("one").captured_through_seq == written.last_seq
    writer.close()
    writer.close()  # idempotent
    _log2, writer2 = store.open("one")
    writer2.close()


def test_two_new_writers_for_one_id(store: SessionStore) -> None:
    header = new_header("twin")
    first, second = store.create(header), store.create(header)
    log1, log2 = SessionLog(header), SessionLog(header)
    first.attach(log1)
    second.attach(log2)
    append_turn(log1, 1)
    append_turn(log2, 1, size=10)
    first.flush()
    with pytest.raises(SessionLockedError):
        second.flush()
    first.close()
    with pytest.raises(SessionExistsError):
        second.flush()
    assert store.load("twin").events == log1.events
    with pytest.raises(SessionExistsError):
        second.close()


def test_closed_writer_refuses_appends(store: SessionStore) -> None:
    header = new_header("c")
    writer = store.create(header)
    writer.close()
    with pytest.raises(SessionFormatError, match="closed"):
        writer.append([Event("turn/start", 0, 1, {"turn": 1})])


# -- delete, list ----------------------------------------------------------------------------------------
def test_delete(store: SessionStore) -> None:
    write_session(store, "gone", turns=1)
    write_session(store, "kept", turns=1)
    store.delete("gone")
    assert [h.id for h in store.list_headers()] == ["kept"]
    with pytest.raises(SessionNotFoundError):
        store.load("gone")
    write_session(store, "gone", turns=1)  # the id can be used again
    assert store.exists("gone")


def test_list_headers_skips_what_is_not_a_session(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = JsonlStore(tmp_path / "sessions")
    write_session(store, "good", turns=1)
    (store.root / "no-log").mkdir()
    (store.root / "stray.txt").write_text("x")
    broken = store.root / "broken"
    broken.mkdir()
    (broken / "session.jsonl").write_bytes(b"not json\n")
    misplaced = store.root / "misplaced"
    misplaced.mkdir()
    (misplaced / "session.jsonl").write_bytes(store.log_path("good").read_bytes())
    with caplog.at_level(logging.WARNING):
        assert [h.id for h in store.list_headers()] == ["good"]
    assert "broken" in caplog.text and "misplaced" in caplog.text


def test_long_header_lines_are_read(store: SessionStore) -> None:
    cwd = "/" + "长" * 20_000
    write_session(store, "long", turns=1, cwd=cwd)
    assert [h.cwd for h in store.list_headers()] == [cwd]
    assert store.read_surface("long").header.cwd == cwd


def test_latest_title_wins(store: SessionStore) -> None:
    header = new_header("t")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1, title=True)
        append_turn(log, 2, title=True)
    assert store.read_title("t")["title"] == "title 2"
    write_session(store, "untitled", turns=0)
    # a session with no events is never stored: it is missing, not untitled
    with pytest.raises(SessionNotFoundError):
        store.read_title("untitled")


def test_append_that_cannot_be_undone_stops_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonlStore(tmp_path / "sessions")
    header = new_header("stuck")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    append_turn(log, 1)
    writer.flush()
    append_turn(log, 2)
    real_write = os.write

    def half_write(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.EIO, "I/O error (injected)")

    def no_truncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "truncate failed (injected)")

    monkeypatch.setattr(os, "write", half_write)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(SessionWriteError, match=r"store\.open"):
        writer.flush()
    monkeypatch.undo()
    with pytest.raises(SessionWriteError, match="stopped"):
        writer.flush()  # retrying would write seqs the file may already hold
    with pytest.raises(SessionWriteError):
        writer.close()
    reopened, writer = store.open("stuck")  # the lock was released; the partial batch is cut or kept whole
    with writer:
        assert [e.seq for e in reopened.events] == list(range(len(reopened)))
        assert reopened.events[-1].type == "turn/end"


# -- streamed reads (exports) ----------------------------------------------------------------------------
def test_stream_events_yields_what_load_reads_one_event_at_a_time(store: SessionStore) -> None:
    written = write_session(store, "s-1", turns=3)
    with store.stream_events("s-1") as (header, events):
        assert header == written.header
        assert not isinstance(events, list)  # every backend streams (the default would load the log)
        assert list(events) == written.events


def test_an_export_of_a_damaged_session_writes_nothing(store: SessionStore, tmp_path: Path) -> None:
    from dsh_jupyter.ui.export import export_stored

    write_session(store, "s-1", turns=3)
    target = tmp_path / "out" / "s-1.md"
    target.parent.mkdir()
    path, tally = export_stored(store, "s-1", "md", target)
    exported = target.read_text()
    assert path == target and exported.startswith("# title 1\n") and (tally.prompts, tally.tools) == (3, 3)
    damage_event(store, "s-1", 5)
    with pytest.raises((SessionCorruptError, SessionFormatError)):
        export_stored(store, "s-1", "md", target, overwrite=True)
    assert target.read_text() == exported and sorted(p.name for p in target.parent.iterdir()) == ["s-1.md"]


@pytest.mark.usefixtures("pg_database")
def test_a_postgres_surface_streams_in_chunks(tmp_path: Path, request: pytest.FixtureRequest,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``stream_surface`` fetches the surviving bodies a few at a time and yields what ``read_surface`` reads,
    tool-result placeholders included, across a compaction."""
    store = open_backend_store(next(b for b in ALL_BACKENDS if str(b) == "postgres"), tmp_path, request)
    assert isinstance(store, PostgresStore)
    log = SessionLog(new_header("s-1"))
    with store.create(log.header) as writer:
        writer.attach(log)
        for turn in (1, 2, 3):
            append_turn(log, turn)
        compact(log, 4, last=3)  # the first turn's nodes
        append_turn(log, 4)
    monkeypatch.setattr(postgres_backend, "_STREAM_ROWS", 2)
    skip = {"tool/result"}
    with store.stream_surface("s-1", skip_data=skip) as snapshot:
        streamed = list(snapshot.events)
    assert streamed == store.read_surface("s-1", skip_data=skip).events and len(streamed) > 4


def test_a_read_inside_an_open_stream_sees_the_same_store(store: SessionStore) -> None:
    """A reader that streams one session may read others (or the same one) before it finishes: every backend
    answers, as JSONL and PostgreSQL always did (SQLite once refused with "cannot start a transaction within
    a transaction", its one per-thread read connection being busy with the stream)."""
    first = write_session(store, "s-1", turns=2)
    second = write_session(store, "s-2", turns=1)
    with store.stream_events("s-1") as (header, events):
        iterator = iter(events)
        assert next(iterator) == first.events[0]
        assert store.read_title("s-2") == {"title": "title 1", "messageSeqs": [2], "source": {"kind": "fallback"}}
        assert store.read_surface("s-1").events == first.surface()
        assert store.load("s-2").events == second.events
        assert [e.seq for e in iterator] == [e.seq for e in first.events[1:]]
    assert header == first.header
    assert store.read_title("s-1") is not None  # the stream's transaction ended with it
