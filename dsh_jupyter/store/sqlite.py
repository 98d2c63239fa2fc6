"""The alternative backend: every session in one SQLite database file (stdlib ``sqlite3``, WAL mode).

Same contract as the JSONL backend: nothing is stored until the first flush with events, each flush is
one transaction (a failure leaves nothing half-written), one writer per session (a non-blocking ``flock``
on ``<db>.locks/<encoded id>.lock``, taken at the first flush or by ``open``), and readers never block
(WAL readers see the last committed state). ``locate`` and ``session_dir`` return ``None``: there is no
honest per-session file. Session artifacts (plots) live in the table ``dsh_artifacts`` of the same file
(:mod:`.artifacts`).

The read side and the row encoding are the shared SQL store's (:mod:`.sql`); this module holds SQLite's
connections, schema, SQL text, file locks and its writer.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._json import dumpb, dumps, loads
from ..session import Event, SessionError, SessionFormatError, SessionHeader, SessionLog, SessionNotFoundError
from .artifacts import sqlite_delete, sqlite_load, sqlite_save
from .errors import SessionWriteError, StoreReadOnlyError
from .jsonl import encode_event
from .locking import WriterLock
from .paths import session_folder_name
from .safe_open import nearest_existing, write_problem
from .sql import Queries, Row, SqlStore, SqlWriter, backfill_spend, batch_spend, event_row, exists_error, session_key

#: Schema generation stored in ``PRAGMA user_version`` (2: the per-session cost columns). A database of an
#: older generation is read as it is (its sessions show no cost) and upgraded by the first writer.
SCHEMA_VERSION = 2

#: Columns generation 2 added to ``dsh_sessions``: what the session's model calls cost
#: (:mod:`dsh_jupyter.conversation.spend`), kept by the writer in each flush's transaction.
_SPEND_COLUMNS = (
    ("spend_usd", "REAL NOT NULL DEFAULT 0"),
    ("priced_calls", "INTEGER NOT NULL DEFAULT 0"),
    ("unpriced_calls", "INTEGER NOT NULL DEFAULT 0"),
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dsh_sessions (
    key BLOB PRIMARY KEY,
    header BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    types TEXT NOT NULL DEFAULT '[]',
    spend_usd REAL NOT NULL DEFAULT 0,
    priced_calls INTEGER NOT NULL DEFAULT 0,
    unpriced_calls INTEGER NOT NULL DEFAULT 0
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

#: Seqs one ``IN (...)`` list names at most.
_IN_CHUNK = 500

#: Rows one ``INSERT`` statement writes at most (5 parameters a row and the key: 641 in all, below the 999 that
#: SQLite builds before 3.32 allow in one statement).
_INSERT_ROWS = 128


def _insert_sql(rows: int) -> str:
    values = ",".join(["(?,?,?,?,?)"] * rows)
    return ("INSERT INTO dsh_events (key, seq, type, op, cited, body) "
            f"SELECT ?, column1, column2, column3, column4, column5 FROM (VALUES {values})")


#: The statements of :func:`_insert_events`, by row count (powers of two up to :data:`_INSERT_ROWS`).
_INSERTS = {rows: _insert_sql(rows) for rows in (1 << bit for bit in range(_INSERT_ROWS.bit_length()))}


def _insert_events(conn: sqlite3.Connection, key: bytes, rows: list[Row]) -> None:
    """Insert a flush's rows with multi-row statements (the key bound once), not one statement a row.

    One statement of many rows costs about half the CPU a row of ``executemany`` (which binds the key again,
    steps and resets the statement once a row). The rows go in pieces of a power of two rows (128, then what
    is left split as its binary digits: 50 rows are 32 + 16 + 2), so the connection's statement cache holds
    at most 8 of these statements whatever the sizes of the flushes."""
    done, count = 0, len(rows)
    while done < count:
        size = min(_INSERT_ROWS, 1 << ((count - done).bit_length() - 1))
        values: list[object] = [key]
        for row in rows[done : done + size]:
            values.extend(row)
        conn.execute(_INSERTS[size], values)
        done += size


def _upgrade(conn: sqlite3.Connection) -> None:
    """Bring the database to :data:`SCHEMA_VERSION` in one transaction: create the tables, or add the cost
    columns to an older generation's sessions table and fill them from the events already stored."""
    with _immediate(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version >= SCHEMA_VERSION:
            return  # another process upgraded it meanwhile
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        present = {row[1] for row in conn.execute("PRAGMA table_info(dsh_sessions)")}
        added = [name for name, _ in _SPEND_COLUMNS if name not in present]
        for name, kind in _SPEND_COLUMNS:
            if name in added:
                conn.execute(f"ALTER TABLE dsh_sessions ADD COLUMN {name} {kind}")
        if added:
            backfill_spend(conn, SqliteStore.queries)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


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


class SqliteWriter(SqlWriter[Row]):
    """The single writer of one session in a :class:`SqliteStore`."""

    def __init__(self, store: SqliteStore, header: SessionHeader, *, lock: WriterLock | None = None,
                 materialized: bool = False, next_seq: int = 0) -> None:
        super().__init__(header, lock=lock, materialized=materialized, next_seq=next_seq)
        self._store = store
        self._conn: sqlite3.Connection | None = None
        #: The session row's event types as this writer last stored them (``None``: not read yet).
        self._types: set[str] | None = None

    def _encode(self, event: Event, seq: int) -> Row:
        return event_row(event, encode_event(event, seq, newline=False))

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
            if self._materialized and self._types is not None:
                with _immediate(conn):
                    types = self._append_rows(conn, self._types)
                self._types = types
                return self._flushed()
            with _immediate(conn):
                row = conn.execute("SELECT next_seq, types FROM dsh_sessions WHERE key = ?", (self._key,)).fetchone()
                if not self._materialized:
                    if row is not None:
                        raise exists_error(self.header.id, str(self._store.path))
                    conn.execute(
                        "INSERT INTO dsh_sessions (key, header, created_at, next_seq) VALUES (?, ?, ?, 0)",
                        (self._key, dumpb(self.header.to_json()), int(self.header.created_at)),
                    )
                elif row is None or row[0] != self._stored_seq:
                    raise self._changed(None if row is None else row[0])
                types = self._append_rows(conn, set(loads(row[1])) if row is not None else set(), checked=True)
        except SessionError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise SessionWriteError(
                f"could not write session {self.header.id!r} to {self._store.path} ({exc}); the transaction was "
                f"rolled back and the {self.pending} buffered event(s) are kept, so flush() can be retried"
            ) from exc
        self._types = types
        self._flushed()

    def _flushed(self) -> None:
        self._buffer.clear()
        self._stored_seq = self._next_seq
        self._materialized = True

    def _append_rows(self, conn: sqlite3.Connection, known: set[str], *, checked: bool = False) -> set[str]:
        """Store the buffer in the open transaction: advance the session row, then insert the events; returns the
        session's event types. ``checked``: the session row was read in this transaction and holds the stored seq;
        otherwise the row is advanced only if it still does (a writer that has flushed before knows its types and
        needs no read: one statement a flush fewer), and :meth:`_changed` is raised when it does not."""
        buffer = self._buffer
        added = {row[1] for row in buffer} - known
        types = known | added if added else known
        spend = batch_spend(buffer)
        sets = "next_seq = ?, types = ?, " if added else "next_seq = ?, "
        values: list[object] = [self._next_seq, dumps(sorted(types))] if added else [self._next_seq]
        values += [spend.usd, spend.priced, spend.unpriced, self._key]
        if not checked:
            values.append(self._stored_seq)
        where = "key = ?" if checked else "key = ? AND next_seq = ?"
        cursor = conn.execute(f"UPDATE dsh_sessions SET {sets}spend_usd = spend_usd + ?, "
                              f"priced_calls = priced_calls + ?, unpriced_calls = unpriced_calls + ? WHERE {where}",
                              values)
        if cursor.rowcount != 1:
            row = conn.execute("SELECT next_seq FROM dsh_sessions WHERE key = ?", (self._key,)).fetchone()
            raise self._changed(None if row is None else row[0])
        _insert_events(conn, self._key, buffer)
        return types

    def _changed(self, found: int | None) -> SessionWriteError:
        return SessionWriteError(
            f"session {self.header.id!r} changed in {self._store.path} behind this writer (expected "
            f"{self._stored_seq} stored events, found {'none' if found is None else found}); it was "
            "deleted or rewritten. Nothing was written; open the session again."
        )


class SqliteStore(SqlStore[sqlite3.Connection, WriterLock, SqliteWriter]):
    """Sessions in one SQLite database file at ``path`` (made absolute once, here)."""

    kind = "sqlite"
    queries = Queries.of("dsh_sessions", "dsh_events", "?")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
        self.lock_dir = self.path.with_name(self.path.name + ".locks")
        self._local = threading.local()
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    @property
    def _where(self) -> str:
        return str(self.path)

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
                    _upgrade(conn)
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
        if conn.execute("PRAGMA user_version").fetchone()[0] < 1:  # no tables yet; an older generation reads
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

    # -- artifacts ---------------------------------------------------------------------------------------
    def save_artifact(self, header: SessionHeader, name: str, data: bytes) -> None:
        conn = self._connect(create=True)
        try:
            with _immediate(conn):
                sqlite_save(conn, session_key(header.id), name, data)
        finally:
            conn.close()

    def load_artifact(self, header: SessionHeader, name: str) -> bytes | None:
        conn = self._reader()
        return sqlite_load(conn, session_key(header.id), name) if conn is not None else None

    # -- reading -----------------------------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection | None]:
        yield self._reader()

    @contextmanager
    def _read_snapshot(self) -> Iterator[sqlite3.Connection | None]:
        """A read transaction on this thread's read connection, or on a connection of its own when that one
        is inside another snapshot still (a stream being consumed): SQLite has one transaction per
        connection."""
        conn = self._reader()
        if conn is None:
            yield None
            return
        own = conn.in_transaction
        if own:
            conn = self._connect(create=False)
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        finally:
            if own:
                conn.close()

    def _keeps_spend(self, conn: sqlite3.Connection) -> bool:
        return bool(conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION)

    def _stored_types(self, raw: Any) -> Iterable[str]:
        types: list[str] = loads(raw)
        return types

    def _ordered_rows(self, conn: sqlite3.Connection, key: bytes) -> Iterable[tuple[int, bytes]]:
        rows: Iterable[tuple[int, bytes]] = conn.execute(self.queries.events_in_order, (key,))
        return rows

    def _bodies(self, conn: sqlite3.Connection, key: bytes, seqs: Sequence[int]) -> dict[int, bytes]:
        bodies: dict[int, bytes] = {}
        for i in range(0, len(seqs), _IN_CHUNK):
            chunk = seqs[i : i + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            bodies.update(conn.execute(f"SELECT seq, body FROM dsh_events WHERE key = ? AND seq IN ({marks})",
                                       (key, *chunk)))
        return bodies

    # -- writing -----------------------------------------------------------------------------------------
    def _new_writer(self, header: SessionHeader) -> SqliteWriter:
        return SqliteWriter(self, header)

    def _hold(self, session_id: str) -> WriterLock:
        return self._acquire(session_id)

    def _let_go(self, held: WriterLock) -> None:
        held.release()

    def _resumed_writer(self, session: SessionLog, held: WriterLock) -> SqliteWriter:
        return SqliteWriter(self, session.header, lock=held, materialized=True, next_seq=session.next_seq)

    def delete(self, session_id: str) -> None:
        if not self.exists(session_id):
            raise SessionNotFoundError(session_id, self._where)
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
