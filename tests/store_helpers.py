"""Shared helpers for the store tests: realistic turns, the two backends, damage tools, the crash child."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_jupyter._json import dumpb
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import (
    assistant_message,
    compaction_source,
    text_block,
    tool_result_message,
    user_message,
)
from dsh_jupyter.store import JsonlStore, SqliteStore
from dsh_jupyter.store.base import SessionStore
from dsh_jupyter.store.postgres import PostgresStore
from dsh_jupyter.store.sql import session_key

HERE = Path(__file__).resolve().parent
MODEL_SOURCE = {"kind": "model", "provider": "offline", "model": "tiny"}
BASE_TIME = 1_787_130_725_417


def new_header(session_id: str = "s-1", *, cwd: str = "/home/dev/project",
               created_at: int = BASE_TIME) -> SessionHeader:
    return SessionHeader.new(cwd, session_id=session_id, created_at=created_at)


@functools.lru_cache(maxsize=4096)
def payload(turn: int, size: int | None = None) -> str:
    """Deterministic tool output for ``turn`` (so a reader can check it without the writer's help)."""
    rng = random.Random(turn)
    size = rng.randrange(0, 16_384) if size is None else size
    words = ["alpha", "beta", "gamma", "δέλτα", "数据", "emoji😀", "quote\"", "back\\slash", "tab\t", "line\n"]
    return f"turn {turn} output: " + " ".join(rng.choices(words, k=size // 6))


def append_turn(log: SessionLog, turn: int, *, tool: bool = True, size: int | None = None,
                mid_turn: Callable[[], None] | None = None, title: bool = False) -> None:
    """Append one realistic turn: prompt, streamed answer with a tool call, tool result, final answer."""
    t = BASE_TIME + (log.next_seq * 3)

    def add(kind: str, data: Any, **kw: Any) -> int:
        return log.append(kind, data, time=t + log.next_seq, **kw).seq

    add("turn/start", {"turn": turn})
    add("step/start", {"turn": turn, "step": 1})
    prompt = add("user/message", user_message(f"prompt {turn}"))
    if title:
        add("session/title", {"title": f"title {turn}", "messageSeqs": [prompt], "source": {"kind": "fallback"}})
    chunks = [add("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": p}})
              for p in ("Let ", "me ", "look.")]
    blocks = [text_block("Let me look.")]
    call_id = f"call-{turn}"
    if tool:
        blocks.append({"type": "tool-call", "id": call_id, "name": "bash", "arguments": '{"command":"ls"}'})
    add("assistant/message", {"turn": turn, "step": 1, "message": assistant_message(blocks, MODEL_SOURCE)},
        source_event_seqs=chunks)
    if tool:
        call = add("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "bash",
                                 "arguments": '{"command":"ls"}'})
        if mid_turn is not None:
            mid_turn()
        add("tool/result", {"turn": turn, "step": 1,
                            "message": tool_result_message(call_id, [text_block(payload(turn, size))])},
            source_event_seqs=[call])
    add("step/end", {"turn": turn, "step": 1})
    add("step/start", {"turn": turn, "step": 2})
    add("assistant/message", {"turn": turn, "step": 2,
                              "message": assistant_message([text_block(f"answer {turn}")], MODEL_SOURCE)},
        source_event_seqs=[])
    add("step/end", {"turn": turn, "step": 2})
    add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def open_turn(log: SessionLog, turn: int) -> int:
    """Append the start of a turn up to a started tool call (what a crash mid-tool leaves); returns the
    ``tool/call`` seq."""
    log.append("turn/start", {"turn": turn})
    log.append("step/start", {"turn": turn, "step": 1})
    log.append("user/message", user_message(f"prompt {turn}"))
    call_id = f"call-{turn}"
    block = {"type": "tool-call", "id": call_id, "name": "bash", "arguments": "{}"}
    log.append("assistant/message", {"turn": turn, "step": 1, "message": assistant_message([block], MODEL_SOURCE)},
               source_event_seqs=[])
    return log.append("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "bash",
                                    "arguments": "{}"}).seq


def compact(log: SessionLog, turn: int | None, summary: str = "summary", *, first: int = 0,
            last: int = -1) -> int:
    """Append a compaction whose checkpoint replaces the surface nodes from position ``first`` through
    ``last`` (default: the whole current surface); returns the checkpoint's seq."""
    from dsh_jupyter.session import ReplaceOp

    surface = [e.seq for e in log.surface()]
    nodes = surface[first : (last % len(surface)) + 1]
    cid = f"compaction-{log.next_seq}"
    start = log.append("compaction/start", {"compactionId": cid, "turn": turn}).seq
    summ = log.append("compaction/summary", {"compactionId": cid, "summary": summary}).seq
    checkpoint = log.append(
        "user/message",
        user_message([text_block("<compacted-summary>"), text_block(summary), text_block("</compacted-summary>")],
                     compaction_source(cid)),
        surface_op=ReplaceOp(nodes[0], nodes[-1]),
        source_event_seqs=[start, summ, *nodes],
    ).seq
    log.append("compaction/end", {"compactionId": cid, "turn": turn})
    return checkpoint


# -- backends --------------------------------------------------------------------------------------------
@dataclass
class Backend:
    """One storage backend under test, with representation-specific ways to damage a stored session."""

    kind: str
    make: Callable[[Path], SessionStore]
    notes: dict[str, Any] = field(default_factory=dict)
    #: Fixtures its store is built from as the test runs (the tiers in conftest.py read them too).
    fixtures: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.kind


def _jsonl(tmp: Path) -> SessionStore:
    return JsonlStore(tmp / "sessions")


def _sqlite(tmp: Path) -> SessionStore:
    return SqliteStore(tmp / "sessions.db")


def _postgres(tmp: Path) -> SessionStore:
    raise RuntimeError("the PostgreSQL backend needs a server: build its store with open_backend_store()")


BACKENDS = [Backend("jsonl", _jsonl), Backend("sqlite", _sqlite)]
#: The file backends plus PostgreSQL (on the test suite's own server, a fresh database per test).
ALL_BACKENDS = [*BACKENDS, Backend("postgres", _postgres, fixtures=("pg_database",))]


def open_backend_store(backend: Backend, tmp: Path, request: Any) -> SessionStore:
    """``backend``'s store for one test (``request`` is the pytest request, for the PostgreSQL fixture)."""
    if backend.kind != "postgres":
        return backend.make(tmp)
    (dsn,) = (request.getfixturevalue(name) for name in backend.fixtures)
    store = PostgresStore(dsn)
    request.addfinalizer(store.close)
    return store


def pg_exec(store: PostgresStore, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run SQL on the store's database with its (test superuser) role, bypassing the writer."""
    import psycopg

    with psycopg.connect(store._dsn, autocommit=True) as conn:
        conn.execute(sql, params)  # type: ignore[arg-type]


def write_session(store: SessionStore, session_id: str = "s-1", turns: int = 2, **kw: Any) -> SessionLog:
    """A closed session with ``turns`` complete turns."""
    header = new_header(session_id, **kw)
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        for turn in range(1, turns + 1):
            append_turn(log, turn, title=turn == 1)
            writer.flush()
    return log


def raw_lines(store: JsonlStore, session_id: str) -> list[bytes]:
    return store.log_path(session_id).read_bytes().split(b"\n")


def set_raw_lines(store: JsonlStore, session_id: str, lines: list[bytes]) -> None:
    store.log_path(session_id).write_bytes(b"\n".join(lines))


def line_of_seq(lines: list[bytes], seq: int) -> int:
    """Index (in ``lines``, header = 0) of the physical line that holds ``seq`` (unpacked logs only)."""
    for index, line in enumerate(lines[1:], start=1):
        if line and json.loads(line).get("seq") == seq:
            return index
    raise LookupError(seq)


def sqlite_exec(store: SqliteStore, sql: str, params: tuple[Any, ...] = ()) -> None:
    conn = sqlite3.connect(store.path)
    try:
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def damage_event(store: SessionStore, session_id: str, seq: int) -> int | None:
    """Make one stored event unreadable; returns the JSONL event line number (``None`` for SQLite)."""
    if isinstance(store, JsonlStore):
        lines = raw_lines(store, session_id)
        index = line_of_seq(lines, seq)
        lines[index] = lines[index][: len(lines[index]) // 2]
        set_raw_lines(store, session_id, lines)
        return index
    if isinstance(store, PostgresStore):
        pg_exec(store, "UPDATE dsh.events SET body = %s WHERE key = %s AND seq = %s",
                (b'{"type":"tool/call","seq":', session_key(session_id), seq))
        return None
    assert isinstance(store, SqliteStore)
    sqlite_exec(store, "UPDATE dsh_events SET body = ? WHERE key = ? AND seq = ?",
                (b'{"type":"tool/call","seq":', session_key(session_id), seq))
    return None


def drop_event(store: SessionStore, session_id: str, seq: int) -> int | None:
    """Remove one stored event (a seq gap); returns the JSONL event line number of the gap."""
    if isinstance(store, JsonlStore):
        lines = raw_lines(store, session_id)
        index = line_of_seq(lines, seq)
        del lines[index]
        set_raw_lines(store, session_id, lines)
        return index
    if isinstance(store, PostgresStore):
        pg_exec(store, "DELETE FROM dsh.events WHERE key = %s AND seq = %s", (session_key(session_id), seq))
        return None
    assert isinstance(store, SqliteStore)
    sqlite_exec(store, "DELETE FROM dsh_events WHERE key = ? AND seq = ?", (session_key(session_id), seq))
    return None


def add_raw_event(store: SessionStore, session_id: str, record: dict[str, Any]) -> None:
    """Store one event record exactly as given (bypassing the writer's checks)."""
    if isinstance(store, JsonlStore):
        with open(store.log_path(session_id), "ab") as fh:
            fh.write(dumpb(record) + b"\n")
        return
    key = session_key(session_id)
    if isinstance(store, PostgresStore):
        pg_exec(store, "INSERT INTO dsh.events (key, seq, type, body) VALUES (%s, %s, %s, %s)",
                (key, record["seq"], record["type"], dumpb(record)))
        pg_exec(store, "UPDATE dsh.sessions SET next_seq = next_seq + 1, types = array_append(types, %s) "
                "WHERE key = %s", (record["type"], key))
        return
    assert isinstance(store, SqliteStore)
    sqlite_exec(store, "INSERT INTO dsh_events (key, seq, type, op, cited, body) VALUES (?, ?, ?, NULL, NULL, ?)",
                (key, record["seq"], record["type"], dumpb(record)))
    # Like a (newer) writer would: the session row lists the event types it holds.
    sqlite_exec(store, "UPDATE dsh_sessions SET next_seq = next_seq + 1, "
                "types = json_insert(types, '$[#]', ?) WHERE key = ?", (record["type"], key))


def replace_header(store: SessionStore, session_id: str, raw: bytes) -> None:
    """Overwrite the stored header record with ``raw`` JSON bytes."""
    if isinstance(store, JsonlStore):
        lines = raw_lines(store, session_id)
        lines[0] = raw
        set_raw_lines(store, session_id, lines)
        return
    if isinstance(store, PostgresStore):
        pg_exec(store, "UPDATE dsh.sessions SET header = %s WHERE key = %s", (raw, session_key(session_id)))
        return
    assert isinstance(store, SqliteStore)
    sqlite_exec(store, "UPDATE dsh_sessions SET header = ? WHERE key = ?", (raw, session_key(session_id)))


def tear_tail(store: SessionStore, session_id: str, record: dict[str, Any]) -> None:
    """What a crash in the middle of a write leaves behind."""
    if isinstance(store, JsonlStore):
        line = dumpb(record)
        with open(store.log_path(session_id), "ab") as fh:
            fh.write(line[: len(line) // 2])
        return
    if isinstance(store, PostgresStore):
        import psycopg

        pg = psycopg.connect(store._dsn)  # an uncommitted transaction, then the "process" dies
        pg.execute("INSERT INTO dsh.events (key, seq, type, body) VALUES (%s, %s, %s, %s)",
                   (session_key(session_id), record["seq"], record["type"], dumpb(record)))
        pg.pgconn.finish()  # drop the connection without committing
        return
    assert isinstance(store, SqliteStore)
    conn = sqlite3.connect(store.path)  # an uncommitted transaction, then the "process" dies
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO dsh_events (key, seq, type, op, cited, body) VALUES (?, ?, ?, NULL, NULL, ?)",
                 (session_key(session_id), record["seq"], record["type"], dumpb(record)))
    conn.close()


# -- crash child -----------------------------------------------------------------------------------------
def report(*words: object) -> None:
    """One whole line on stdout in a single write (atomic on a pipe, so processes never interleave)."""
    os.write(1, (" ".join(str(w) for w in words) + "\n").encode())


def crash_writer(kind: str, root: str, session_id: str, pace: str = "0") -> None:
    """The writer that gets killed: (re)open the session, then append turns forever, flushing at each turn
    end and reporting ``flushed <turn> <last seq>`` on stdout only after the flush returned. ``pace``
    (seconds) is a pause in the middle of each turn, as a model's answer would make: the log grows slower
    (each writer and check reads it whole) and more kills land inside a turn."""
    pause = float(pace)

    def mid_turn(turn: int) -> Callable[[], None] | None:
        """A checkpoint flush in the middle of every third turn (so a kill can leave a turn open, repaired by
        ``open()``), then the pause."""
        checkpoint = turn % 3 == 0

        def middle() -> None:
            if checkpoint:
                writer.flush()
            if pause:
                time.sleep(pause)

        return middle if checkpoint or pause else None

    store = make_backend_store(kind, root)
    if kind == "postgres":  # what a kernel has imported by its second turn
        import dsh_jupyter.catalog.postgres
        import dsh_jupyter.references.projection  # noqa: F401
    log, writer = _open_or_create(store, session_id)
    turn = sum(1 for e in log.events if e.type == "turn/start")
    report("ready", turn)
    while True:
        turn += 1
        append_turn(log, turn, mid_turn=mid_turn(turn))
        writer.flush()
        report("flushed", turn, log.last_seq)


#: A fresh interpreter that runs one writer (``mode="spawn"``).
CRASH_CHILD = r"""
import sys
sys.path.insert(0, {helpers!r})
from store_helpers import crash_writer
crash_writer(*sys.argv[1:5])
"""

#: A small script that imports once, then forks one writer per line read from stdin
#: (``mode="fork"``): each writer is its own process, killed with SIGKILL like a spawned one, but starting
#: one costs a fork instead of an interpreter start-up.
CRASH_SERVER = r"""
import os, sys
sys.path.insert(0, {helpers!r})
from store_helpers import crash_writer, report
if sys.argv[1] == "postgres":  # imported once here, not in every forked writer
    import dsh_jupyter.catalog.postgres, dsh_jupyter.references.projection
for _ in iter(sys.stdin.buffer.readline, b""):
    pid = os.fork()
    if pid == 0:
        try:
            crash_writer(*sys.argv[1:5])
        except BaseException as exc:
            report("error", repr(exc).replace("\n", " "))
        finally:
            os._exit(3)
    report("child", pid)
    _, status = os.waitpid(pid, 0)
    report("reaped", status)
"""


def _open_when_free(store: SessionStore, session_id: str) -> tuple[SessionLog, Any]:
    """``store.open``, waiting a little for a killed writer's lock to go: PostgreSQL drops a dead
    connection's advisory lock when its server process notices the closed socket (milliseconds later)."""
    from dsh_jupyter.session import SessionLockedError

    deadline = time.monotonic() + (10.0 if isinstance(store, PostgresStore) else 0.0)
    while True:
        try:
            return store.open(session_id)
        except SessionLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _open_or_create(store: SessionStore, session_id: str) -> tuple[SessionLog, Any]:
    """The session reopened (:func:`_open_when_free`), or created when no writer stored it yet: a writer killed
    before its first flush leaves nothing behind (sessions are stored lazily)."""
    if store.exists(session_id):
        return _open_when_free(store, session_id)
    log = SessionLog(new_header(session_id))
    writer = store.create(log.header)
    writer.attach(log)
    return log, writer


def make_backend_store(kind: str, root: str) -> SessionStore:
    """The store of ``kind``: under the folder ``root`` (JSONL, SQLite), or at the DSN ``root`` (PostgreSQL)."""
    if kind == "postgres":
        return PostgresStore(root)
    return JsonlStore(Path(root) / "sessions") if kind == "jsonl" else SqliteStore(Path(root) / "sessions.db")


@dataclass
class CrashReport:
    kills: int
    flushed_turns: int
    seconds: float
    interrupted_turns: int
    torn_tails: int = 0  # kills that left a partial last line (JSONL), cut away by the next open()


def check_turns(log: SessionLog, flushed: set[int]) -> int:
    """Every turn reported flushed is complete and intact; returns how many turns were repaired."""
    turns: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for event in log.events:
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == "turn/start":
            if data["turn"] in turns:
                raise AssertionError(f"turn {data['turn']} started twice")
            current = turns[data["turn"]] = {"texts": [], "results": []}
        elif event.type == "turn/end":
            assert current is not None
            current["reason"] = data["reason"]["kind"]
        elif event.type == "user/message":
            assert current is not None
            current["texts"].append(event.data["content"][0]["text"])
        elif event.type == "tool/result":
            assert current is not None
            current["results"].append(event.data["message"]["content"][0]["content"][0]["text"])
    for turn in flushed:
        got = turns.get(turn)
        if got is None:
            raise AssertionError(f"turn {turn} was reported flushed but is missing")
        if got.get("reason") != "completed" or got["texts"] != [f"prompt {turn}"] or got["results"] != [payload(turn)]:
            raise AssertionError(f"turn {turn} was reported flushed but reads back damaged: {got}")
    # At most the last turn is open (a kill after a checkpoint flush); a later open() closes it.
    open_turns = [t for t, v in turns.items() if "reason" not in v]
    assert open_turns in ([], [max(turns)]), open_turns
    return sum(1 for v in turns.values() if v.get("reason") == "interrupted")


class _Spawner:
    """Runs one writer per :meth:`start`, as a fresh interpreter or forked from a small server script."""

    def __init__(self, mode: str, kind: str, root: Path | str, session_id: str, pace: float = 0.0) -> None:
        self.mode = mode
        self.args = [kind, str(root), session_id, repr(pace)]
        self.env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.server: subprocess.Popen[bytes] | None = None
        if mode == "fork":
            script = CRASH_SERVER.format(helpers=str(HERE))
            self.server = subprocess.Popen([sys.executable, "-c", script, *self.args], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, env=self.env)
        elif mode != "spawn":
            raise ValueError(f"unknown crash mode {mode!r}")

    def run(self, delay: float) -> list[str]:
        """Start a writer, SIGKILL it ``delay`` seconds after it is ready; returns its stdout lines."""
        if self.server is None:
            script = CRASH_CHILD.format(helpers=str(HERE))
            child = subprocess.Popen([sys.executable, "-c", script, *self.args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env)
            assert child.stdout is not None
            first = child.stdout.readline().decode()
            if not first.startswith("ready"):
                child.kill()
                _, err = child.communicate()
                raise AssertionError(f"the writer could not (re)open the session: {first!r}\n{err.decode()[-3000:]}")
            time.sleep(delay)
            child.kill()
            out, err = child.communicate()
            if child.returncode != -signal.SIGKILL:
                raise AssertionError(f"writer ended by itself ({child.returncode}): {err.decode()[-3000:]}")
            return [first.strip(), *out.decode().splitlines()]
        assert self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.write(b"go\n")
        self.server.stdin.flush()
        lines: list[str] = []
        pid: int | None = None
        ready = False
        while pid is None or not ready:
            line = self.server.stdout.readline().decode().strip()
            if not line or line.startswith(("error", "reaped")):
                raise AssertionError(f"the writer could not (re)open the session: {line!r} after {lines}")
            if line.startswith("child"):
                pid = int(line.split()[1])
            else:
                ready = ready or line.startswith("ready")
                lines.append(line)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        while True:
            line = self.server.stdout.readline().decode().strip()
            if line.startswith("reaped"):
                status = int(line.split()[1])
                if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
                    raise AssertionError(f"writer ended by itself (status {status}): {lines[-3:]}")
                return lines
            if not line:
                raise AssertionError("the crash server died")
            lines.append(line)

    def close(self) -> None:
        if self.server is not None:
            assert self.server.stdin is not None
            self.server.stdin.close()
            self.server.wait(timeout=30)


def run_crash_loop(kind: str, root: Path | str, *, kills: int, seed: int = 0, max_delay: float = 0.1,
                   session_id: str = "crash-session", mode: str = "fork", pace: float = 0.0) -> CrashReport:
    """Start a writer that appends turns, SIGKILL it at a random moment, check the log; ``kills`` times.

    Each writer is its own process that reopens the session with ``store.open`` (which cuts a torn tail
    and repairs an interrupted turn). After every kill a reader checks that each turn the writers reported
    flushed is there, complete and intact. Finally this process reopens the log and appends once more."""
    rng = random.Random(seed)
    store = make_backend_store(kind, str(root))
    flushed: set[int] = set()
    torn = 0
    started = time.monotonic()
    spawner = _Spawner(mode, kind, root, session_id, pace)
    try:
        for _ in range(kills):
            for line in spawner.run(rng.uniform(0, max_delay)):
                if line.startswith("flushed"):
                    flushed.add(int(line.split()[1]))
            if store.exists(session_id):
                if isinstance(store, JsonlStore) and not store.log_path(session_id).read_bytes().endswith(b"\n"):
                    torn += 1
                check_turns(store.load(session_id), flushed)
            else:  # killed before its first flush: lazily, nothing was ever stored
                assert not flushed, "turns were reported flushed but the session does not exist"
    finally:
        spawner.close()
    # Every writer may have been killed before its first flush (likelier for fresh interpreters on a busy
    # machine): then this process creates the session.
    log, writer = _open_or_create(store, session_id)
    with writer:
        next_turn = sum(1 for e in log.events if e.type == "turn/start") + 1
        append_turn(log, next_turn)
    flushed.add(next_turn)
    interrupted = check_turns(store.load(session_id), flushed)
    return CrashReport(kills, len(flushed), time.monotonic() - started, interrupted, torn)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- hostile stores ------------------------------------------------------------------------------------------
GOOD_IDS = ("good-1", "good-2")
BIG_LINE = 50 * 1000 * 1000  # "a 50 MB single line"


@dataclass
class HostileCase:
    """One hostile entry planted in a store beside two good sessions.

    ``session_id`` is the id a user would type for it; ``entry`` is the path a warning must name;
    ``listed`` says whether the entry is still a readable session (a tolerated tail) or must be skipped."""

    name: str
    session_id: str
    entry: Path
    listed: bool
    keep: list[Any] = field(default_factory=list)  # objects that must stay alive (a bound socket)


def _valid_log(store: JsonlStore, session_id: str) -> Path:
    write_session(store, session_id, turns=1)
    return store.log_path(session_id)


def plant_hostile(store: JsonlStore, name: str, outside: Path) -> HostileCase:
    """Plant the hostile case ``name`` in ``store`` (``outside`` is a folder outside the store for link targets)."""
    import socket
    import stat as stat_

    sid = f"hostile-{name}"
    folder = store.folder(sid)
    log = folder / "session.jsonl"
    if name in ("fifo", "socket", "dev-zero", "char-device", "symlink-loop", "link-out", "headerless-50mb",
                "torn-header", "header-bomb", "unreadable"):
        folder.mkdir(parents=True)
    if name == "fifo":
        os.mkfifo(log)
    elif name == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(log))
        sock.listen(1)
        return HostileCase(name, sid, log, False, [sock])
    elif name == "dev-zero":
        os.symlink("/dev/zero", log)
    elif name == "char-device":
        os.mknod(log, stat_.S_IFCHR | 0o644, os.makedev(1, 5))  # a /dev/zero node, inside the store
    elif name == "symlink-loop":
        os.symlink("other.jsonl", log)
        os.symlink("session.jsonl", folder / "other.jsonl")
    elif name == "link-out":  # the log is a link to a real session log outside the store
        other = JsonlStore(outside / "store-a")
        os.symlink(_valid_log(other, sid), log)
    elif name == "folder-out":  # the session folder is a link to a real session folder outside the store
        other = JsonlStore(outside / "store-b")
        _valid_log(other, sid)
        store.root.mkdir(parents=True, exist_ok=True)
        os.symlink(other.folder(sid), folder)
        return HostileCase(name, sid, folder, False)
    elif name == "nested":  # 100,000 nested [ appended to a valid log: a torn tail
        with open(_valid_log(store, sid), "ab") as fh:
            fh.write(b"[" * 100_000 + b"\n")
        return HostileCase(name, sid, log, True)
    elif name == "line-50mb":  # a 50 MB line appended to a valid log: a damaged tail
        with open(_valid_log(store, sid), "ab") as fh:
            fh.write(b'{"type":"user/message","seq":12,"time":0,"data":"' + b"x" * BIG_LINE + b'"}\n')
        return HostileCase(name, sid, log, True)
    elif name == "headerless-50mb":  # one 50 MB line without a newline: no header at all
        with open(log, "wb") as fh:
            fh.write(b"{" * BIG_LINE)
    elif name == "header-only":  # a header line and nothing else: a valid, empty session
        store.root.mkdir(parents=True, exist_ok=True)
        folder.mkdir()
        log.write_bytes(dumpb(new_header(sid).to_json()) + b"\n")
        return HostileCase(name, sid, log, True)
    elif name == "torn-header":  # the header line was cut before its newline
        log.write_bytes(dumpb(new_header(sid).to_json())[:40])
    elif name == "header-bomb":  # the header line itself is 100,000 nested [
        log.write_bytes(b"[" * 100_000 + b"\n")
    elif name == "unreadable":
        write_session(store, sid, turns=1)
        os.chmod(log, 0)
    else:  # pragma: no cover
        raise ValueError(name)
    return HostileCase(name, sid, log, False)


HOSTILE_CASES = ("fifo", "socket", "dev-zero", "char-device", "symlink-loop", "link-out", "folder-out", "nested",
                 "line-50mb", "headerless-50mb", "header-only", "torn-header", "header-bomb")


def hostile_store(base: Path, names: tuple[str, ...]) -> tuple[JsonlStore, list[HostileCase]]:
    """A store at ``base/s`` with the good sessions and every case in ``names``."""
    store = JsonlStore(base / "s")
    for session_id in GOOD_IDS:
        write_session(store, session_id, turns=2)
    outside = base / "outside"
    cases = [plant_hostile(store, name, outside) for name in names]
    return store, cases


def digest_tree(root: Path) -> dict[str, str]:
    """SHA-256 of every regular file under ``root`` (no links followed): to show nothing changed."""
    found: dict[str, str] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            try:
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
            except PermissionError:
                found[str(path.relative_to(root))] = "unreadable"
    return found
