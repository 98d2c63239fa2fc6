"""The alternative backend: every session in one SQLite database file (stdlib ``sqlite3``, WAL mode).

Same contract as the JSONL backend: nothing is stored until the first flush with events, each flush is
one transaction (a failure leaves nothing half-written), one writer per session (a non-blocking ``flock``
on ``<db>.locks/<encoded id>.lock``, taken at the first flush or by ``open``), and readers never block
(WAL readers see the last committed state). ``locate`` and ``session_dir`` return ``None``: there is no
honest per-session file. Session artifacts (plots) live in the table ``dsh_artifacts`` of the same file
(:mod:`.artifacts`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._json import dumpb, dumps, js_string, loads
from ..session import (
    Event,
    SessionCorruptError,
    SessionError,
    SessionFormatError,
    SessionHeader,
    SessionLog,
    SessionNotFoundError,
    SurfaceFold,
    SurfaceSnapshot,
    event_from_json,
)
from ..session.events import KNOWN_TYPES, SESSION_TITLE, SYSTEM_MESSAGE, ReplaceOp
from .base import BufferedWriter, SessionLocation, SessionStore
from .errors import SessionExistsError, SessionWriteError, StoreReadOnlyError
from .jsonl import encode_event
from .locking import WriterLock
from .paths import session_folder_name
from .repair import resumed

log = logging.getLogger(__name__)

#: Schema generation stored in ``PRAGMA user_version``.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dsh_sessions (
    key BLOB PRIMARY KEY,
    header BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    types TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS dsh_events (
    key BLOB NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    op TEXT,
    cited TEXT,
    body BLOB NOT NULL,
    PRIMARY KEY (key, seq)
);
CREATE INDEX IF NOT EXISTS dsh_events_surface ON dsh_events (key, seq, op, cited) WHERE op IS NOT NULL;
CREATE INDEX IF NOT EXISTS dsh_events_titles ON dsh_events (key, seq) WHERE type = 'session/title';
"""

_IN_CHUNK = 500

Row = tuple[int, str, "str | None", "str | None", bytes]


def session_key(session_id: str) -> bytes:
    """The primary key of a session: its UTF-16 code units as (surrogate-passing) UTF-8 bytes.

    Bytes, not TEXT, so ids with NUL or lone surrogates are stored exactly."""
    return js_string(session_id).encode("utf-8", "surrogatepass")


def _row(event: Event, line: bytes) -> Row:
    op: str | None = None
    cited: str | None = None
    if event.surface_op is not None:
        if isinstance(event.surface_op, ReplaceOp):
            op = dumps(event.surface_op.to_json())
            cited = dumps(list(event.source_event_seqs or ()))
        else:
            op = "append"
    return (event.seq, event.type, op, cited, line[:-1])


def _insert_events(conn: sqlite3.Connection, key: bytes, rows: list[Row]) -> None:
    conn.executemany(
        "INSERT INTO dsh_events (key, seq, type, op, cited, body) VALUES (?, ?, ?, ?, ?, ?)",
        [(key, *row) for row in rows],
    )


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def events_in_order(rows: Iterable[tuple[int, bytes]], next_seq: int, decode: Callable[[int, bytes], Event],
                    corrupt: Callable[[int, str], Exception]) -> Iterator[Event]:
    """Stored ``(seq, body)`` rows in seq order, decoded one at a time: a gap, or fewer rows than the
    session's ``next_seq``, is ``corrupt(seq, why)`` (SQLite and PostgreSQL)."""
    expected = 0
    for seq, body in rows:
        if seq != expected:
            raise corrupt(expected, "is missing (seq gap)")
        yield decode(seq, body)
        expected += 1
    if expected != next_seq:
        raise corrupt(expected, f"is missing (the session records {next_seq} events)")


def _parse_op(op: str) -> Any:
    if op == "append":
        return "append"
    record = loads(op)
    return ReplaceOp(int(record["start"]), int(record["end"]))


class SqliteWriter(BufferedWriter[Row]):
    """The single writer of one session in a :class:`SqliteStore`."""

    def __init__(self, store: SqliteStore, header: SessionHeader, *, lock: WriterLock | None = None,
                 materialized: bool = False, next_seq: int = 0) -> None:
        super().__init__(header, lock=lock, next_seq=next_seq)
        self._store = store
        self._key = session_key(header.id)
        self._materialized = materialized
        self._conn: sqlite3.Connection | None = None

    @property
    def materialized(self) -> bool:
        return self._materialized

    def _encode(self, event: Event, seq: int) -> Row:
        return _row(event, encode_event(event, seq))

    def _release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _flush_locked(self) -> None:
        if not self._buffer:
            return
        if self._lock is None:
            self._lock = self._store._acquire(self.header.id)
        try:
            if self._conn is None:
                self._conn = self._store._connect(create=True)
            conn = self._conn
            with _immediate(conn):
                row = conn.execute("SELECT next_seq, types FROM dsh_sessions WHERE key = ?", (self._key,)).fetchone()
                if not self._materialized:
                    if row is not None:
                        raise SessionExistsError(
                            f"cannot create session {self.header.id!r}: it already exists in {self._store.path} "
                            "(another writer created it first). Nothing was written. Resume it with store.open(id), "
                            "or start a new session."
                        )
                    conn.execute(
                        "INSERT INTO dsh_sessions (key, header, created_at, next_seq) VALUES (?, ?, ?, 0)",
                        (self._key, dumpb(self.header.to_json()), int(self.header.created_at)),
                    )
                elif row is None or row[0] != self._stored_seq:
                    raise SessionWriteError(
                        f"session {self.header.id!r} changed in {self._store.path} behind this writer (expected "
                        f"{self._stored_seq} stored events, found {'none' if row is None else row[0]}); it was "
                        "deleted or rewritten. Nothing was written; open the session again."
                    )
                _insert_events(conn, self._key, self._buffer)
                known = set(loads(row[1])) if row is not None else set()
                types = known | {r[1] for r in self._buffer}
                conn.execute("UPDATE dsh_sessions SET next_seq = ?, types = ? WHERE key = ?",
                             (self._next_seq, dumps(sorted(types)), self._key))
        except SessionError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise SessionWriteError(
                f"could not write session {self.header.id!r} to {self._store.path} ({exc}); the transaction was "
                f"rolled back and the {self.pending} buffered event(s) are kept, so flush() can be retried"
            ) from exc
        self._buffer.clear()
        self._stored_seq = self._next_seq
        self._materialized = True


class SqliteStore(SessionStore):
    """Sessions in one SQLite database file at ``path`` (made absolute once, here)."""

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
        self.lock_dir = self.path.with_name(self.path.name + ".locks")
        self._local = threading.local()
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- connections -------------------------------------------------------------------------------------
    def _connect(self, *, create: bool) -> sqlite3.Connection:
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SessionFormatError(
                    f"{self.path} uses session database schema {version}, newer than this version of dsh-jupyter "
                    f"knows ({SCHEMA_VERSION}); upgrade dsh-jupyter to read it"
                )
            if create:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                if version < SCHEMA_VERSION:
                    conn.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        except BaseException:
            conn.close()
            raise
        return conn

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read connection, or ``None`` when the database holds no sessions yet."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if not self.path.is_file():
            return None
        conn = self._connect(create=False)
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            conn.close()
            return None
        self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's read connection (writers close their own)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _lock_path(self, session_id: str) -> Path:
        return self.lock_dir / f"{session_folder_name(session_id)}.lock"

    def _acquire(self, session_id: str) -> WriterLock:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        return WriterLock.acquire(self._lock_path(session_id), session_id=session_id, log=f"in {self.path}")

    def check_writable(self, session_id: str | None = None) -> None:
        """:class:`StoreReadOnlyError` when the database (or the folder it would be created in, or its lock
        folder) cannot be written by this user."""
        from .safe_open import nearest_existing, write_problem

        targets = [self.path] if self.path.exists() else [nearest_existing(self.path.parent)]
        if self.lock_dir.exists():
            targets.append(self.lock_dir)
        for target in targets:
            problem = write_problem(target)
            if problem is not None:
                raise StoreReadOnlyError(
                    f"the session database {self.path} is read-only here ({target} {problem}), so sessions can be "
                    "listed and referenced but a new turn could not be saved. Nothing was sent or written. Set "
                    "%config DshMagics.sqlite_path to a file you can write to, or ask the owner for write access."
                )

    # -- layout ------------------------------------------------------------------------------------------
    def locate(self, header: SessionHeader) -> SessionLocation | None:
        return None

    def session_dir(self, header: SessionHeader) -> Path | None:
        return None

    def save_artifact(self, header: SessionHeader, name: str, data: bytes) -> None:
        from .artifacts import sqlite_save

        conn = self._connect(create=True)
        try:
            with _immediate(conn):
                sqlite_save(conn, session_key(header.id), name, data)
        finally:
            conn.close()

    def load_artifact(self, header: SessionHeader, name: str) -> bytes | None:
        from .artifacts import sqlite_load

        conn = self._reader()
        return sqlite_load(conn, session_key(header.id), name) if conn is not None else None

    # -- reading -----------------------------------------------------------------------------------------
    @contextmanager
    def _snapshot(self, session_id: str) -> Iterator[tuple[sqlite3.Connection, bytes, SessionHeader, int]]:
        """One read transaction over a session: ``(connection, key, header, next_seq)``."""
        conn = self._reader()
        if conn is None:
            raise SessionNotFoundError(session_id, str(self.path))
        key = session_key(session_id)
        conn.execute("BEGIN")
        try:
            row = conn.execute("SELECT header, next_seq, types FROM dsh_sessions WHERE key = ?", (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, str(self.path))
            try:
                header = SessionHeader.from_line(bytes(row[0]))
            except SessionFormatError as exc:
                raise SessionFormatError(f"{self.path}: session {session_id!r}: {exc}") from None
            self._check_types(conn, key, session_id, row[2])
            yield conn, key, header, int(row[1])
        finally:
            conn.execute("COMMIT")

    def _check_types(self, conn: sqlite3.Connection, key: bytes, session_id: str, types: str) -> None:
        """Refuse a session holding an unknown, non-ignorable event type, without reading every row: the
        session row lists the event types its writer stored."""
        unknown = [t for t in loads(types) if t not in KNOWN_TYPES and t != SYSTEM_MESSAGE]
        for kind in unknown:
            for seq, body in conn.execute("SELECT seq, body FROM dsh_events WHERE key = ? AND type = ?", (key, kind)):
                self._decode(session_id, seq, body)

    def _corrupt(self, session_id: str, seq: int, why: str) -> SessionCorruptError:
        return SessionCorruptError(
            f"corrupt session {session_id!r}: the stored event seq {seq} {why}. Restore the database from a "
            "backup, or start a new session.",
            path=str(self.path),
        )

    def _decode(self, session_id: str, seq: int, body: bytes) -> Event:
        try:
            record = loads(bytes(body))
        except ValueError as exc:
            raise self._corrupt(session_id, seq, f"cannot be parsed ({exc})") from None
        kind = record.get("type") if isinstance(record, dict) else None
        if (isinstance(kind, str) and kind not in KNOWN_TYPES and kind != SYSTEM_MESSAGE
                and record.get("ignorable") is not True):
            raise SessionFormatError(
                f"{self.path}: session {session_id!r} event seq {seq} has unknown type {kind!r} that is not marked "
                "ignorable; read it with a dsh-jupyter version that knows this event type"
            )
        try:
            event = event_from_json(record)
        except SessionFormatError as exc:
            raise self._corrupt(session_id, seq, f"is not a valid event ({exc})") from None
        if event.seq != seq:
            raise self._corrupt(session_id, seq, f"says it is seq {event.seq}")
        return event

    def _events(self, conn: sqlite3.Connection, session_id: str, key: bytes, next_seq: int) -> Iterator[Event]:
        """The session's events in order, decoded one row at a time (inside the caller's transaction)."""
        rows = conn.execute("SELECT seq, body FROM dsh_events WHERE key = ? ORDER BY seq", (key,))
        return events_in_order(rows, next_seq, lambda seq, body: self._decode(session_id, seq, body),
                               lambda seq, why: self._corrupt(session_id, seq, why))

    @contextmanager
    def stream_events(self, session_id: str) -> Iterator[tuple[SessionHeader, Iterable[Event]]]:
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            yield header, self._events(conn, session_id, key, next_seq)

    def _load(self, session_id: str) -> SessionLog:
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            events = list(self._events(conn, session_id, key, next_seq))
            try:
                return SessionLog(header, events)
            except SessionFormatError as exc:
                raise SessionCorruptError(f"corrupt session {session_id!r}: {exc}", path=str(self.path)) from None

    def load(self, session_id: str) -> SessionLog:
        return self._load(session_id)

    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            fold = SurfaceFold()
            rows = conn.execute(
                "SELECT seq, op, cited, type FROM dsh_events WHERE key = ? AND op IS NOT NULL ORDER BY seq", (key,)
            )
            kinds: dict[int, tuple[str, Any, Any]] = {}
            for seq, op, cited, kind in rows:
                try:
                    parsed_op = _parse_op(op)
                    cited_seqs = loads(cited) if cited else None
                    fold.apply(seq, parsed_op, cited_seqs)
                except (ValueError, KeyError, TypeError) as exc:
                    raise self._corrupt(session_id, seq, f"has a surface op that cannot be applied ({exc})") from None
                if kind in skip_data:
                    kinds[seq] = (kind, parsed_op, cited_seqs)
            survivors = fold.seqs
            wanted = [seq for seq in survivors if seq not in kinds]
            bodies: dict[int, bytes] = {}
            for i in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[i : i + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT seq, body FROM dsh_events WHERE key = ? AND seq IN ({marks})"
                bodies.update(conn.execute(query, (key, *chunk)))
            events = []
            for seq in survivors:
                if seq in kinds:
                    kind, parsed_op, cited_seqs = kinds[seq]
                    events.append(Event(kind, seq, 0, None, parsed_op,
                                        tuple(cited_seqs) if cited_seqs is not None else None))
                else:
                    events.append(self._decode(session_id, seq, bodies[seq]))
            return SurfaceSnapshot(header, next_seq - 1 if next_seq else None, events)

    def read_title(self, session_id: str) -> dict[str, Any] | None:
        with self._snapshot(session_id) as (conn, key, _header, _next):
            row = conn.execute(
                "SELECT seq, body FROM dsh_events WHERE key = ? AND type = ? ORDER BY seq DESC LIMIT 1",
                (key, SESSION_TITLE),
            ).fetchone()
            if row is None:
                return None
            event = self._decode(session_id, row[0], row[1])
            return event.data if isinstance(event.data, dict) else None

    def list_headers(self) -> list[SessionHeader]:
        conn = self._reader()
        if conn is None:
            return []
        headers: list[SessionHeader] = []
        for (raw,) in conn.execute("SELECT header FROM dsh_sessions"):
            try:
                headers.append(SessionHeader.from_line(bytes(raw)))
            except SessionFormatError as exc:
                log.warning("skipping an unreadable session header in %s: %s", self.path, exc)
        return headers

    def exists(self, session_id: str) -> bool:
        conn = self._reader()
        if conn is None:
            return False
        row = conn.execute("SELECT 1 FROM dsh_sessions WHERE key = ?", (session_key(session_id),)).fetchone()
        return row is not None

    # -- writing -----------------------------------------------------------------------------------------
    def create(self, header: SessionHeader) -> SqliteWriter:
        header.validate()
        if self.exists(header.id):
            raise SessionExistsError(
                f"session {header.id!r} already exists in {self.path}; resume it with store.open(id) or start a new "
                "session"
            )
        return SqliteWriter(self, header)

    def open(self, session_id: str) -> tuple[SessionLog, SqliteWriter]:
        if not self.exists(session_id):
            raise SessionNotFoundError(session_id, str(self.path))
        lock = self._acquire(session_id)
        try:
            session = self._load(session_id)
            writer = SqliteWriter(self, session.header, lock=lock, materialized=True, next_seq=session.next_seq)
        except BaseException:
            lock.release()
            raise
        return resumed(session, writer)

    def delete(self, session_id: str) -> None:
        from .artifacts import sqlite_delete

        if not self.exists(session_id):
            raise SessionNotFoundError(session_id, str(self.path))
        lock = self._acquire(session_id)
        try:
            conn = self._connect(create=True)
            try:
                key = session_key(session_id)
                with _immediate(conn):
                    conn.execute("DELETE FROM dsh_events WHERE key = ?", (key,))
                    conn.execute("DELETE FROM dsh_sessions WHERE key = ?", (key,))
                    sqlite_delete(conn, key)
            finally:
                conn.close()
            self._lock_path(session_id).unlink(missing_ok=True)
        finally:
            lock.release()


__all__ = ["SqliteStore", "SqliteWriter", "session_key"]
