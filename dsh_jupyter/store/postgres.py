"""The server-backed backend: sessions and events in PostgreSQL (psycopg 3), for teams on JupyterHub.

Same contract as the JSONL and SQLite backends: nothing is stored until the first flush with events;
each flush is one transaction, so an event is durable when its turn's transaction commits and a failure
leaves nothing half-written; seqs stay contiguous. One writer per session is enforced by the database: the
session row carries a writer lease naming the server process of the writer's own connection
(``writer_pid`` and its ``backend_start``), set by the first flush's ``INSERT`` (new sessions) or by ``open``.
The lease is held for as long as that server process lives, so a killed kernel's connection closes, its
server process ends and the lease with it, leaving the same repairable state as a JSONL log (``open``
repairs an interrupted turn). Taking a lease is an ``UPDATE`` of the session row, which row-level security
allows the session's owner alone: no other role can hold, or block, a writer (an advisory lock could be
taken by any role that knows or guesses its key). Readers never block: each read is one repeatable-read
snapshot.

Who sees what is the database's business: the tables carry row-level security (see
:mod:`.postgres_schema`), so every read returns only the connecting role's own sessions and those shared
with it. ``locate`` and ``session_dir`` return ``None``: there is no honest per-session file.

The DSN is never shown with its password: every message uses :func:`mask_dsn`. The read side and the row
encoding are the shared SQL store's (:mod:`.sql`); this module holds PostgreSQL's connections, schema,
leases, SQL text and its writer (which keeps the catalog's columns current with the rules of
:mod:`dsh_jupyter.session.words`).

psycopg (the optional ``postgres`` extra) is imported when a connection is opened or an error is read,
not with the module: DSN masking and the error types work without it.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from .._json import dumpb
from ..session import Event, SessionError, SessionHeader, SessionLockedError, SessionLog, SessionNotFoundError
from ..session.events import SESSION_TITLE, ReplaceOp
from ..session.words import body_words, event_texts, match_fields
from .artifacts import ArtifactError, postgres_load, postgres_save
from .errors import SessionWriteError
from .jsonl import encode_event
from .postgres_schema import SCHEMA_VERSION, SPEND_VERSION, ensure_schema, installed_version
from .sql import Queries, Row, SqlStore, SqlWriter, batch_spend, event_row, exists_error, session_key

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[tuple[Any, ...]]

_IDLE_READERS = 4
#: Rows a streamed read (:meth:`PostgresStore.stream_events`) fetches from the server at a time.
_STREAM_ROWS = 200


class PostgresStoreError(SessionError, RuntimeError):
    """The database cannot be reached or used (bad DSN, server down, schema missing or too new)."""

    kind = "store"  # the message is complete in the user's terms (hosts show it as it is)


def mask_dsn(dsn: str) -> str:
    """The DSN as it may be shown: ``postgresql://user@host:port/db``, never with a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:
        return "postgresql://(unparsable connection string)"
    user = parts.get("user")
    host = parts.get("host") or "localhost"
    port = parts.get("port")
    db = parts.get("dbname") or user or ""
    where = f"{host}:{port}" if port else str(host)
    return f"postgresql://{str(user) + '@' if user else ''}{where}/{db}"


#: This connection's server process and its start time: what a writer lease names.
_MY_PID = "pg_catalog.pg_backend_pid()"
_MY_START = ("(SELECT a.backend_start FROM pg_catalog.pg_stat_activity a "
             "WHERE a.pid = pg_catalog.pg_backend_pid())")
#: A lease is held while the server process it names is alive (same pid and start: a reused pid is not it).
_LEASE_HELD = ("EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a "
               "WHERE a.pid = s.writer_pid AND a.backend_start = s.writer_start)")
#: Take the lease of an owned session unless a live connection holds it (one row: taken; none: held).
_TAKE_LEASE = (f"UPDATE dsh.sessions s SET writer_pid = {_MY_PID}, writer_start = {_MY_START} "
               f"WHERE s.key = %s AND s.owner = current_user AND NOT {_LEASE_HELD} RETURNING 1")
#: Give back the lease this connection holds.
_GIVE_LEASE = ("UPDATE dsh.sessions SET writer_pid = NULL, writer_start = NULL "
               f"WHERE key = %s AND writer_pid = {_MY_PID}")


def _insert_events(cur: psycopg.Cursor[tuple[Any, ...]], key: bytes, rows: list[Row]) -> None:
    cur.executemany(
        "INSERT INTO dsh.events (key, seq, type, op, cited, body) VALUES (%s, %s, %s, %s, %s, %s)",
        [(key, *row) for row in rows],
    )


def _batch_title(events: Sequence[Event]) -> str | None:
    for event in reversed(events):
        if event.type == SESSION_TITLE and isinstance(event.data, dict) and isinstance(event.data.get("title"), str):
            return str(event.data["title"])
    return None


class PostgresWriter(SqlWriter[tuple[Row, Event]]):
    """The single writer of one session in a :class:`PostgresStore`; its connection holds the lease."""

    def __init__(self, store: PostgresStore, header: SessionHeader, *, conn: Connection | None = None,
                 materialized: bool = False, next_seq: int = 0) -> None:
        # the connection's lease is the lock
        super().__init__(header, lock=None, materialized=materialized, next_seq=next_seq)
        self._store = store
        self._conn = conn
        self._log: SessionLog | None = None

    @property
    def _events(self) -> list[Event]:
        """The buffered events (their rows are in the buffer beside them)."""
        return [event for _, event in self._buffer]

    def attach(self, log: SessionLog) -> None:
        self._log = log  # a compaction's new body words come from its surface, without a database read
        super().attach(log)

    def _encode(self, event: Event, seq: int) -> tuple[Row, Event]:
        return event_row(event, encode_event(event, seq, newline=False)), event

    def _release(self) -> None:
        """Give the lease back, then close the connection. Its server process ends and the lease with it in
        any case, but not at once: a writer taking the session right after this close must not find the
        lease still held by a process that is only exiting."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        import psycopg

        try:
            if self._materialized and not conn.closed:
                conn.execute(_GIVE_LEASE, (self._key,))
        except psycopg.Error:
            pass  # a broken connection: the lease ends with its server process
        finally:
            conn.close()

    def _batch_words(self, replaced: bool) -> tuple[list[str], list[str] | None]:
        """The body-search words this flush adds, and all of them when a compaction replaced part of the
        surface (``None``: recompute from the stored surface, when no log is attached)."""
        if not replaced:
            return body_words(event_texts(e for e in self._events if e.surface_op is not None)), None
        if self._log is not None and self._log.next_seq == self._next_seq:
            return [], body_words(event_texts(self._log.surface()))
        return [], None

    def _reindex_words(self, cur: psycopg.Cursor[tuple[Any, ...]]) -> None:
        """Recompute the body-search words from the stored surface (a compaction written without a log)."""
        surface = self._store._surface_events(cur.connection, self.header.id, self._key)
        cur.execute("UPDATE dsh.sessions SET words = array_to_tsvector(%s::text[]) WHERE key = %s",
                    (body_words(event_texts(surface)), self._key))

    def _flush_locked(self) -> None:
        if not self._buffer:
            return
        import psycopg

        store = self._store
        try:
            if self._conn is None:  # a new session's lease comes with its INSERT
                self._conn = store._lock(self.header.id) if self._materialized else store._writer_connection()
            conn = self._conn
            with conn.transaction(), conn.cursor() as cur:
                times = [e.time for e in self._events if isinstance(e.time, int)]
                updated = max(times) if times else int(self.header.created_at)
                title = _batch_title(self._events)
                types = sorted({row[1] for row, _ in self._buffer})
                match = match_fields(self.header, title) if title is not None or not self._materialized else None
                replaced = any(isinstance(e.surface_op, ReplaceOp) for e in self._events)
                added, whole = self._batch_words(replaced)
                spend = batch_spend(row for row, _ in self._buffer)
                if not self._materialized:
                    cur.execute(
                        "INSERT INTO dsh.sessions (key, header, created_at, updated_at, next_seq, types, title, cwd, "
                        "match_id, match_cwd, match_label, words, writer_pid, writer_start, spend_usd, priced_calls, "
                        "unpriced_calls) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, array_to_tsvector(%s::text[]), "
                        f"{_MY_PID}, {_MY_START}, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (self._key, dumpb(self.header.to_json()), int(self.header.created_at), updated,
                         self._next_seq, types, title, self.header.cwd, *(match or ("", "", "")),
                         whole if whole is not None else added, spend.usd, spend.priced, spend.unpriced),
                    )
                    if cur.rowcount != 1:
                        cur.execute(f"SELECT 1 FROM dsh.sessions s WHERE s.key = %s AND {_LEASE_HELD}", (self._key,))
                        if cur.fetchone() is not None:  # its creator still writes it
                            raise store.locked(self.header.id)
                        raise exists_error(self.header.id, store.where)
                else:
                    cur.execute(
                        "UPDATE dsh.sessions SET next_seq = %s, updated_at = GREATEST(updated_at, %s), "
                        "title = COALESCE(%s, title), match_label = COALESCE(%s, match_label), "
                        "types = ARRAY(SELECT DISTINCT t FROM unnest(types || %s::text[]) AS t ORDER BY t), "
                        "words = CASE WHEN %s::text[] IS NULL THEN words || array_to_tsvector(%s::text[]) "
                        "ELSE array_to_tsvector(%s::text[]) END, spend_usd = spend_usd + %s, "
                        "priced_calls = priced_calls + %s, unpriced_calls = unpriced_calls + %s "
                        "WHERE key = %s AND next_seq = %s",
                        (self._next_seq, updated, title, match[2] if match else None, types, whole, added, whole,
                         spend.usd, spend.priced, spend.unpriced, self._key, self._stored_seq),
                    )
                    if cur.rowcount != 1:
                        raise SessionWriteError(
                            f"session {self.header.id!r} changed in {store.where} behind this writer (expected "
                            f"{self._stored_seq} stored events); it was deleted or rewritten. Nothing was written; "
                            "open the session again."
                        )
                _insert_events(cur, self._key, [row for row, _ in self._buffer])
                if replaced and whole is None:
                    self._reindex_words(cur)
        except SessionError:
            raise
        except psycopg.Error as exc:
            if self._conn is not None and self._conn.closed:
                self._conn = None  # the lease went with it; the next flush takes it again
            raise SessionWriteError(
                f"could not write session {self.header.id!r} to {store.where} ({store.explain(exc)}); the "
                f"transaction was rolled back and the {self.pending} buffered event(s) are kept, so flush() can "
                "be retried"
            ) from None
        self._buffer.clear()
        self._stored_seq = self._next_seq
        self._materialized = True


def _close_idle(idle: list[Connection], lock: threading.Lock) -> None:
    """Close a store's idle read connections (``idle`` is emptied in place: the store keeps the same list)."""
    with lock:
        connections = idle[:]
        idle.clear()
    for conn in connections:
        conn.close()


class PostgresStore(SqlStore["Connection", "Connection", PostgresWriter]):
    """Sessions in the PostgreSQL database at ``dsn``, seen with the privileges of the DSN's role."""

    kind = "postgres"
    concurrent_reads = True  # each read waits on the server
    queries = Queries.of("dsh.sessions", "dsh.events", "%s")
    _mark = "%s"

    def __init__(self, dsn: str, *, create_schema: bool = True, statement_timeout: float | None = None) -> None:
        """``statement_timeout``: seconds a statement may run (and connecting may take) before the database
        cancels it, ``None`` for the defaults (no statement limit, 10 s to connect)."""
        self._dsn = dsn
        self._statement_timeout = statement_timeout
        self.where = mask_dsn(dsn)
        self._create_schema = create_schema
        self._schema_ready = False
        self._spend_columns = False  # the schema has the cost columns (checked until it does)
        self._idle: list[Connection] = []
        self._idle_lock = threading.Lock()
        # A store dropped without close() (a kernel's services replaced, a test's store) closes its idle readers
        # as it goes, rather than leaving open connections to the garbage collector.
        weakref.finalize(self, _close_idle, self._idle, self._idle_lock)

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    @property
    def _where(self) -> str:
        return self.where

    # -- connections -------------------------------------------------------------------------------------
    def explain(self, exc: BaseException) -> str:
        """A database error in one line, with the DSN's password (if it appears) masked."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        try:
            from psycopg.conninfo import conninfo_to_dict

            password = conninfo_to_dict(self._dsn).get("password")
        except Exception:
            password = None
        if password:
            text = text.replace(str(password), "****")
        return text

    def _connect(self) -> Connection:
        import psycopg

        limit = self._statement_timeout
        conn: Connection | None = None
        try:
            conn = psycopg.connect(self._dsn, autocommit=True,
                                   connect_timeout=10 if limit is None else max(2, math.ceil(limit)),
                                   application_name=f"dsh-jupyter pid {os.getpid()}")
            if limit is not None:
                conn.execute("SELECT pg_catalog.set_config('statement_timeout', %s, false)",
                             (f"{max(1, round(limit * 1000))}ms",))
        except psycopg.Error as exc:
            if conn is not None:
                conn.close()
            raise PostgresStoreError(
                f"cannot connect to the session database {self.where}: {self.explain(exc)}. Check "
                "DshMagics.postgres_dsn (or $DSH_POSTGRES_DSN) and that the server is running."
            ) from None
        return conn

    def _ready(self, conn: Connection, *, create: bool) -> bool:
        """True when the schema is installed (creating or upgrading it when allowed and ``create``; without
        ``create`` an older schema is read as it is)."""
        if self._schema_ready:
            return True
        version = installed_version(conn)
        if version is not None and version > SCHEMA_VERSION:
            raise PostgresStoreError(
                f"{self.where} holds session schema {version}, newer than this version of dsh-jupyter knows "
                f"({SCHEMA_VERSION}); upgrade dsh-jupyter to use it"
            )
        if version is None or version < SCHEMA_VERSION:
            if not (create and self._create_schema):
                return version is not None  # an older schema reads as it is; only writing needs this one
            import psycopg

            try:
                ensure_schema(conn)
            except psycopg.Error as exc:
                state = ("are missing" if version is None else
                         f"are from an older dsh-jupyter (schema {version}; this version needs {SCHEMA_VERSION})")
                raise PostgresStoreError(
                    f"the session tables in {self.where} {state} and this role cannot "
                    f"{'create' if version is None else 'upgrade'} them ({self.explain(exc)}); ask the database "
                    "administrator to run `dsh-jupyter postgres init`"
                ) from None
        self._schema_ready = True
        return True

    def _pooled(self) -> Connection | None:
        """An idle read connection that still works, or ``None``. Each is checked with an empty query (one
        round trip, no statement): the database may have ended it meanwhile (a restart, an administrator,
        an idle timeout), and a read on it would fail although the database is up."""
        import psycopg

        while True:
            with self._idle_lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if conn.closed:
                continue
            try:
                conn.execute("")
            except psycopg.Error:
                conn.close()
                continue
            return conn

    @contextmanager
    def _reader(self) -> Iterator[Connection | None]:
        """A pooled read connection (``None`` when the schema was never installed)."""
        conn = self._pooled() or self._connect()
        keep = False
        try:
            yield conn if self._ready(conn, create=False) else None
            keep = not conn.closed and conn.info.transaction_status == 0  # idle: reusable
        finally:
            with self._idle_lock:
                keep = keep and len(self._idle) < _IDLE_READERS
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    @contextmanager
    def connection(self, *, create: bool = True) -> Iterator[Connection]:
        """A connection of this store's role with the schema in place (for sharing and the catalog)."""
        conn = self._connect()
        try:
            self._ready(conn, create=create)
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Close the idle read connections (writers close their own)."""
        _close_idle(self._idle, self._idle_lock)

    def _writer_connection(self) -> Connection:
        """A new connection for a writer, with the schema in place."""
        conn = self._connect()
        try:
            self._ready(conn, create=True)
        except BaseException:
            conn.close()
            raise
        return conn

    def _lock(self, session_id: str, doing: str = "write to") -> Connection:
        """A new connection holding the writer lease of a session this role owns, or
        :class:`SessionLockedError` (another live connection holds it); ``doing`` names the action in the
        error for a session of another role."""
        conn = self._writer_connection()
        try:
            key = self._own(conn, session_id, doing)
            if conn.execute(_TAKE_LEASE, (key,)).fetchone() is None:
                raise self.locked(session_id)
        except BaseException:
            conn.close()
            raise
        return conn

    def locked(self, session_id: str) -> SessionLockedError:
        """The error of a session another live connection writes."""
        return SessionLockedError(
            f"session {session_id!r} ({self.where}) is already open for writing by another connection. "
            "Only one writer per session is allowed: close the other writer (shut down the kernel or "
            "notebook that has it open, or call close() on its writer), or start a new session instead."
        )

    # -- artifacts ---------------------------------------------------------------------------------------
    def save_artifact(self, header: SessionHeader, name: str, data: bytes) -> None:
        """Keep an artifact in ``dsh.artifacts`` (the session must have been flushed: its row holds the owner)."""
        import psycopg

        with self.connection() as conn:
            try:
                postgres_save(conn, session_key(header.id), name, data)
            except psycopg.errors.UndefinedTable:
                raise ArtifactError(f"{self.where} has no artifacts table yet; ask the database administrator to "
                                    "run `dsh-jupyter postgres init` again") from None

    def load_artifact(self, header: SessionHeader, name: str) -> bytes | None:
        import psycopg

        with self._reader() as conn:
            try:
                return postgres_load(conn, session_key(header.id), name) if conn is not None else None
            except psycopg.errors.UndefinedTable:
                return None

    # -- reading -----------------------------------------------------------------------------------------
    def _read(self) -> AbstractContextManager[Connection | None]:
        return self._reader()

    @contextmanager
    def _read_snapshot(self) -> Iterator[Connection | None]:
        """One read-only repeatable-read transaction on a pooled connection (each read has its own)."""
        with self._reader() as conn:
            if conn is None:
                yield None
                return
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield conn

    def _stored_types(self, raw: Any) -> Iterable[str]:
        types: list[str] = raw
        return types

    def _ordered_rows(self, conn: Connection, key: bytes) -> Iterator[tuple[int, bytes]]:
        """Through a server-side cursor, :data:`_STREAM_ROWS` rows at a time."""
        with conn.cursor(name="dsh_events_in_order") as cursor:
            cursor.itersize = _STREAM_ROWS
            cursor.execute(self.queries.events_in_order, (key,))
            yield from cursor

    def _bodies(self, conn: Connection, key: bytes, seqs: Sequence[int]) -> dict[int, bytes]:
        return dict(conn.execute("SELECT seq, body FROM dsh.events WHERE key = %s AND seq = ANY(%s)",
                                 (key, list(seqs))).fetchall())

    def _keeps_spend(self, conn: Connection) -> bool:
        if not self._spend_columns:
            version = installed_version(conn)
            self._spend_columns = version is not None and version >= SPEND_VERSION
        return self._spend_columns

    def _stream_rows(self) -> int:
        return _STREAM_ROWS

    def owner(self, session_id: str) -> str:
        """The database role that owns a visible session."""
        with self._reader() as conn:
            row = None if conn is None else conn.execute(
                "SELECT owner FROM dsh.sessions WHERE key = %s", (session_key(session_id),)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id, self.where)
        return str(row[0])

    # -- writing -----------------------------------------------------------------------------------------
    def _new_writer(self, header: SessionHeader) -> PostgresWriter:
        return PostgresWriter(self, header)

    def _hold(self, session_id: str) -> Connection:
        return self._lock(session_id)

    def _let_go(self, held: Connection) -> None:
        held.close()

    def _resumed_writer(self, session: SessionLog, held: Connection) -> PostgresWriter:
        return PostgresWriter(self, session.header, conn=held, materialized=True, next_seq=session.next_seq)

    def _own(self, conn: Connection, session_id: str, doing: str) -> bytes:
        """The key of a session this role owns, or a clear error (missing, or someone else's)."""
        key = session_key(session_id)
        row = conn.execute("SELECT owner, owner = current_user FROM dsh.sessions WHERE key = %s", (key,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id, self.where)
        if not row[1]:
            raise PermissionError(
                f"session {session_id!r} belongs to the database role {row[0]!r}; only its owner can {doing} it. "
                "Reference it with @ instead, or ask its owner."
            )
        return key

    def delete(self, session_id: str) -> None:
        if not self.exists(session_id):
            raise SessionNotFoundError(session_id, self.where)
        conn = self._lock(session_id, "delete")
        try:
            conn.execute("DELETE FROM dsh.sessions WHERE key = %s", (session_key(session_id),))
        finally:
            conn.close()

    # -- sharing -------------------------------------------------------------------------------------------
    def share(self, session_id: str, role: str) -> bool:
        """Let the database role ``role`` (or the members of a group role) read a session this role owns.
        Returns False when it was already shared with that role."""
        with self.connection() as conn:
            key = self._own(conn, session_id, "share")
            if conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                raise LookupError(f"there is no database role named {role!r} in {self.where}; check the name "
                                  "(roles are case-sensitive) or ask the database administrator to create it")
            cur = conn.execute("INSERT INTO dsh.shares (key, grantee) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                               (key, role))
            return cur.rowcount == 1

    def unshare(self, session_id: str, role: str) -> bool:
        """Stop sharing a session with ``role``; returns False when it was not shared with it."""
        with self.connection() as conn:
            key = self._own(conn, session_id, "unshare")
            cur = conn.execute("DELETE FROM dsh.shares WHERE key = %s AND grantee = %s", (key, role))
            return cur.rowcount == 1

    def shared_with(self, session_id: str) -> list[str]:
        """The roles a visible session is shared with (all of them for its owner; the visible ones otherwise)."""
        with self.connection(create=False) as conn:
            rows = conn.execute("SELECT grantee FROM dsh.shares WHERE key = %s ORDER BY grantee",
                                (session_key(session_id),)).fetchall()
        return [str(r[0]) for r in rows]


__all__ = ["PostgresStore", "PostgresStoreError", "PostgresWriter", "mask_dsn"]
