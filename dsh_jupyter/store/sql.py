"""What the two SQL backends (:mod:`.sqlite`, :mod:`.postgres`) share: one session store with dialect hooks.

Both keep a session as one row of a sessions table (``key, header, next_seq, types`` among others) and
its events as rows of an events table (``key, seq, type, op, cited, body``: the body is the event's JSONL
line, ``op``/``cited`` its surface op, so a surface read folds the op columns alone and decodes only the
surviving bodies). Everything that follows from that layout lives here, once: the row encoding, the
decoding of a stored body (with its corruption and unknown-type errors), the one in-order check, and the
read side (``load``, ``stream_events``, ``read_surface``, ``stream_surface``, ``read_title``,
``list_headers``, ``exists``, ``create``, ``open``).

A dialect supplies what differs: its connections and read snapshots, the SQL text (:class:`Queries`: table
names and placeholders), how the stored type list is kept, how bodies are fetched, and how a writer holds a
session (a file lock for SQLite, a lease on the session row for PostgreSQL).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

from .._json import dumps, js_string, loads
from ..conversation.spend import Spend, line_usage, spend_of_lines
from ..session import (
    Event,
    SessionCorruptError,
    SessionFormatError,
    SessionHeader,
    SessionLog,
    SessionNotFoundError,
    SurfaceFold,
    SurfaceSnapshot,
    event_from_json,
)
from ..session.events import ASSISTANT_MESSAGE, KNOWN_TYPES, SESSION_TITLE, SYSTEM_MESSAGE, ReplaceOp, SurfaceOp
from .base import BufferedWriter, SessionLocation, SessionStore, SessionWriter
from .errors import SessionExistsError
from .repair import resumed

log = logging.getLogger(__name__)

#: One stored event: ``(seq, type, op, cited, body)`` (``body`` is the JSONL line without its newline).
Row = tuple[int, str, "str | None", "str | None", bytes]

T = TypeVar("T")


class Connection(Protocol):
    """What both drivers' connections give the shared code: ``execute`` with one query and its parameters."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


C = TypeVar("C", bound=Connection)
H = TypeVar("H")
W = TypeVar("W", bound=SessionWriter)


def session_key(session_id: str) -> bytes:
    """The primary key of a session: its UTF-16 code units as (surrogate-passing) UTF-8 bytes.

    Bytes, not TEXT, so ids with NUL or lone surrogates are stored exactly."""
    return js_string(session_id).encode("utf-8", "surrogatepass")


def event_row(event: Event, body: bytes) -> Row:
    """The row of an event whose JSONL line (without its newline) is ``body``."""
    op: str | None = None
    cited: str | None = None
    if event.surface_op is not None:
        if isinstance(event.surface_op, ReplaceOp):
            op = dumps(event.surface_op.to_json())
            cited = dumps(list(event.source_event_seqs or ()))
        else:
            op = "append"
    return (event.seq, event.type, op, cited, body)


def batch_spend(rows: Iterable[Row]) -> Spend:
    """What the model calls among a flush's rows cost (added to the session row's cost columns)."""
    return spend_of_lines(row[4] for row in rows if row[1] == ASSISTANT_MESSAGE)


def backfill_spend(conn: Connection, queries: Queries) -> int:
    """Set every stored session's cost columns from its assistant messages, when the schema upgrade that
    added them finds sessions already stored (inside the upgrade's transaction). Returns the sessions set."""
    totals: dict[bytes, Spend] = {}
    for key, body in conn.execute(queries.assistant_bodies, (ASSISTANT_MESSAGE,)).fetchall():
        found = line_usage(bytes(body))
        if found is not None:
            totals[bytes(key)] = totals.get(bytes(key), Spend()).add(found[1])
    for key, spend in totals.items():
        conn.execute(queries.set_spend, (spend.usd, spend.priced, spend.unpriced, key))
    return len(totals)


def parse_op(op: str) -> SurfaceOp:
    """The surface op stored in an ``op`` column."""
    if op == "append":
        return "append"
    record = loads(op)
    return ReplaceOp(int(record["start"]), int(record["end"]))


def events_in_order(rows: Iterable[tuple[int, bytes]], next_seq: int, decode: Any, corrupt: Any) -> Iterator[Event]:
    """Stored ``(seq, body)`` rows in seq order, decoded one at a time (``decode(seq, body)``): a gap, or
    fewer rows than the session's ``next_seq``, is ``corrupt(seq, why)``."""
    expected = 0
    for seq, body in rows:
        if seq != expected:
            raise corrupt(expected, "is missing (seq gap)")
        yield decode(seq, body)
        expected += 1
    if expected != next_seq:
        raise corrupt(expected, f"is missing (the session records {next_seq} events)")


def exists_error(session_id: str, where: str) -> SessionExistsError:
    """A new session's first flush found the session already stored (another writer created it first)."""
    return SessionExistsError(
        f"cannot create session {session_id!r}: it already exists in {where} (another writer created it "
        "first). Nothing was written. Resume it with store.open(id), or start a new session."
    )


@dataclass(frozen=True)
class Queries:
    """The read-side SQL of one dialect, written once with ``{sessions}``, ``{events}`` and ``?``."""

    session_row: str
    events_in_order: str
    events_of_type: str
    surface_ops: str
    latest_title: str
    headers: str
    exists: str
    assistant_bodies: str
    set_spend: str
    spends: str  # with ``{keys}``: one placeholder per key

    @classmethod
    def of(cls, sessions: str, events: str, mark: str) -> Queries:
        def sql(text: str) -> str:
            return text.format(sessions=sessions, events=events).replace("?", mark)

        return cls(
            session_row=sql("SELECT header, next_seq, types FROM {sessions} WHERE key = ?"),
            events_in_order=sql("SELECT seq, body FROM {events} WHERE key = ? ORDER BY seq"),
            events_of_type=sql("SELECT seq, body FROM {events} WHERE key = ? AND type = ?"),
            surface_ops=sql("SELECT seq, op, cited, type FROM {events} WHERE key = ? AND op IS NOT NULL ORDER BY seq"),
            latest_title=sql("SELECT seq, body FROM {events} WHERE key = ? AND type = ? ORDER BY seq DESC LIMIT 1"),
            headers=sql("SELECT header FROM {sessions}"),
            exists=sql("SELECT 1 FROM {sessions} WHERE key = ?"),
            assistant_bodies=sql("SELECT key, body FROM {events} WHERE type = ?"),
            set_spend=sql("UPDATE {sessions} SET spend_usd = ?, priced_calls = ?, unpriced_calls = ? WHERE key = ?"),
            spends=sql("SELECT key, spend_usd, priced_calls, unpriced_calls FROM {sessions} WHERE key IN (")
            + "{keys})",
        )


class SqlWriter(BufferedWriter[T]):
    """What both SQL writers share: the session key and whether the session row exists yet."""

    def __init__(self, header: SessionHeader, *, lock: Any = None, materialized: bool, next_seq: int) -> None:
        super().__init__(header, lock=lock, next_seq=next_seq)
        self._key = session_key(header.id)
        self._materialized = materialized

    @property
    def materialized(self) -> bool:
        return self._materialized


class SqlStore(SessionStore, Generic[C, H, W]):
    """A session store in a SQL database: the shared read side, with the dialect's hooks.

    ``C`` is the dialect's connection type, ``H`` what a resumed writer holds (its lock or lease) and ``W`` its
    writer type."""

    #: The dialect's SQL text.
    queries: Queries

    # -- dialect hooks -----------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def _where(self) -> str:
        """The store as messages name it (a path, or a DSN without its password)."""

    @abc.abstractmethod
    def _read(self) -> AbstractContextManager[C | None]:
        """A connection for one read outside a snapshot (``None`` when no session was ever stored)."""

    @abc.abstractmethod
    def _read_snapshot(self) -> AbstractContextManager[C | None]:
        """A connection inside one consistent read-only transaction (``None``: nothing stored yet). Reads
        may nest: a read while another's snapshot is open (a stream being consumed) gets its own."""

    @abc.abstractmethod
    def _stored_types(self, raw: Any) -> Iterable[str]:
        """The event types a session row lists (as the dialect stores the list)."""

    @abc.abstractmethod
    def _ordered_rows(self, conn: C, key: bytes) -> Iterable[tuple[int, bytes]]:
        """Every ``(seq, body)`` of a session in seq order, fetched as the dialect streams best."""

    @abc.abstractmethod
    def _bodies(self, conn: C, key: bytes, seqs: Sequence[int]) -> dict[int, bytes]:
        """The bodies of some events of a session."""

    def _stream_rows(self) -> int:
        """Bodies a :meth:`stream_surface` fetches at a time."""
        return 200

    @abc.abstractmethod
    def _keeps_spend(self, conn: C) -> bool:
        """Whether the database's schema has the per-session cost columns (an older one is read as it is)."""

    #: The placeholder of the dialect's SQL (``?`` or ``%s``).
    _mark = "?"

    @abc.abstractmethod
    def _new_writer(self, header: SessionHeader) -> W:
        """A writer for a new session (nothing stored until its first flush)."""

    @abc.abstractmethod
    def _hold(self, session_id: str) -> H:
        """Take the one-writer hold of a stored session (raising ``SessionLockedError`` when it is taken)."""

    @abc.abstractmethod
    def _let_go(self, held: H) -> None:
        """Give back a hold no writer took over."""

    @abc.abstractmethod
    def _resumed_writer(self, session: SessionLog, held: H) -> W:
        """The writer of a stored session, owning ``held``."""

    # -- layout ------------------------------------------------------------------------------------------
    def locate(self, header: SessionHeader) -> SessionLocation | None:
        return None

    def session_dir(self, header: SessionHeader) -> Path | None:
        return None

    # -- decoding ----------------------------------------------------------------------------------------
    def _corrupt(self, session_id: str, seq: int, why: str) -> SessionCorruptError:
        return SessionCorruptError(
            f"corrupt session {session_id!r}: the stored event seq {seq} {why}. Restore the database from a "
            "backup, or start a new session.",
            path=self._where,
        )

    def _decode(self, session_id: str, seq: int, body: bytes) -> Event:
        try:
            record = loads(bytes(body))
        except ValueError as exc:
            raise self._corrupt(session_id, seq, f"cannot be parsed ({exc})") from None
        kind = record.get("type") if isinstance(record, dict) else None
        unknown = isinstance(kind, str) and kind not in KNOWN_TYPES and kind != SYSTEM_MESSAGE
        if unknown and record.get("ignorable") is not True:
            raise SessionFormatError(
                f"{self._where}: session {session_id!r} event seq {seq} has unknown type {kind!r} that is not "
                "marked ignorable; read it with a dsh-jupyter version that knows this event type"
            )
        try:
            event = event_from_json(record)
        except SessionFormatError as exc:
            raise self._corrupt(session_id, seq, f"is not a valid event ({exc})") from None
        if event.seq != seq:
            raise self._corrupt(session_id, seq, f"says it is seq {event.seq}")
        return event

    # -- reading -----------------------------------------------------------------------------------------
    @contextmanager
    def _snapshot(self, session_id: str) -> Iterator[tuple[C, bytes, SessionHeader, int]]:
        """One read-only transaction over a visible session: ``(conn, key, header, next_seq)``. A session
        holding an unknown event type that is not ignorable is refused here, without reading every row:
        the session row lists the event types its writer stored."""
        with self._read_snapshot() as conn:
            if conn is None:
                raise SessionNotFoundError(session_id, self._where)
            key = session_key(session_id)
            row = conn.execute(self.queries.session_row, (key,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self._where)
            try:
                header = SessionHeader.from_line(bytes(row[0]))
            except SessionFormatError as exc:
                raise SessionFormatError(f"{self._where}: session {session_id!r}: {exc}") from None
            for kind in self._stored_types(row[2]):
                if kind not in KNOWN_TYPES and kind != SYSTEM_MESSAGE:
                    for seq, body in conn.execute(self.queries.events_of_type, (key, kind)):
                        self._decode(session_id, seq, body)
            yield conn, key, header, int(row[1])

    def _events(self, conn: C, session_id: str, key: bytes, next_seq: int) -> Iterator[Event]:
        """The session's events in order, decoded one row at a time (inside the caller's snapshot)."""
        return events_in_order(self._ordered_rows(conn, key), next_seq,
                               lambda seq, body: self._decode(session_id, seq, body),
                               lambda seq, why: self._corrupt(session_id, seq, why))

    @contextmanager
    def stream_events(self, session_id: str) -> Iterator[tuple[SessionHeader, Iterable[Event]]]:
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            yield header, self._events(conn, session_id, key, next_seq)

    def load(self, session_id: str) -> SessionLog:
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            events = list(self._events(conn, session_id, key, next_seq))
        try:
            return SessionLog(header, events)
        except SessionFormatError as exc:
            raise SessionCorruptError(f"corrupt session {session_id!r}: {exc}", path=self._where) from None

    def _surface_ops(self, conn: C, session_id: str, key: bytes,
                     skip_data: Collection[str]) -> tuple[list[int], dict[int, Event]]:
        """The fold over the op columns alone: the surviving seqs in surface order, and placeholders
        (``data=None``) for those whose type is in ``skip_data`` (their bodies are never read)."""
        fold = SurfaceFold()
        kinds: dict[int, tuple[str, SurfaceOp, Any]] = {}
        for seq, op, cited, kind in conn.execute(self.queries.surface_ops, (key,)).fetchall():
            try:
                parsed_op = parse_op(op)
                cited_seqs = loads(cited) if cited else None
                fold.apply(seq, parsed_op, cited_seqs)
            except (ValueError, KeyError, TypeError) as exc:
                raise self._corrupt(session_id, seq, f"has a surface op that cannot be applied ({exc})") from None
            if kind in skip_data:
                kinds[seq] = (kind, parsed_op, cited_seqs)
        survivors = fold.seqs
        placeholders: dict[int, Event] = {}
        for seq in survivors:
            if seq in kinds:
                kind, op, cited = kinds[seq]
                placeholders[seq] = Event(kind, seq, 0, None, op, tuple(cited) if cited is not None else None)
        return survivors, placeholders

    def _surface_events(self, conn: C, session_id: str, key: bytes, skip_data: Collection[str] = ()) -> list[Event]:
        """The current surface events of a session, read on ``conn`` (inside its transaction): every surviving
        body fetched at once."""
        survivors, placeholders = self._surface_ops(conn, session_id, key, skip_data)
        bodies = self._bodies(conn, key, [seq for seq in survivors if seq not in placeholders])
        return [placeholders[seq] if seq in placeholders else self._body_event(session_id, seq, bodies)
                for seq in survivors]

    def _body_event(self, session_id: str, seq: int, bodies: dict[int, bytes]) -> Event:
        body = bodies.pop(seq, None)
        if body is None:
            raise self._corrupt(session_id, seq, "is missing")
        return self._decode(session_id, seq, body)

    def _surface_stream(self, conn: C, session_id: str, key: bytes, skip_data: Collection[str],
                        chunk: int) -> Iterator[Event]:
        """The current surface events in order, the surviving bodies fetched ``chunk`` rows at a time and
        decoded one at a time."""
        survivors, placeholders = self._surface_ops(conn, session_id, key, skip_data)
        wanted = [seq for seq in survivors if seq not in placeholders]  # in surface order
        fetched = 0  # wanted[:fetched] were fetched
        bodies: dict[int, bytes] = {}
        for seq in survivors:
            if seq in placeholders:
                yield placeholders[seq]
                continue
            if seq not in bodies and fetched < len(wanted) and wanted[fetched] == seq:
                bodies = self._bodies(conn, key, wanted[fetched : fetched + chunk])
                fetched += chunk
            yield self._body_event(session_id, seq, bodies)

    @contextmanager
    def stream_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> Iterator[SurfaceSnapshot]:
        """:meth:`read_surface` for a reader that looks at one event at a time: the snapshot's ``events`` is an
        iterator over the surface, fetched a chunk of bodies at a time inside one transaction."""
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            events = self._surface_stream(conn, session_id, key, skip_data, chunk=self._stream_rows())
            yield SurfaceSnapshot(header, next_seq - 1 if next_seq else None, cast("list[Event]", events))

    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        with self._snapshot(session_id) as (conn, key, header, next_seq):
            events = self._surface_events(conn, session_id, key, skip_data)
        return SurfaceSnapshot(header, next_seq - 1 if next_seq else None, events)

    def read_title(self, session_id: str) -> dict[str, Any] | None:
        with self._snapshot(session_id) as (conn, key, _header, _next):
            row = conn.execute(self.queries.latest_title, (key, SESSION_TITLE)).fetchone()
            if row is None:
                return None
            event = self._decode(session_id, row[0], row[1])
        return event.data if isinstance(event.data, dict) else None

    def list_headers(self) -> list[SessionHeader]:
        with self._read() as conn:
            if conn is None:
                return []
            raws = conn.execute(self.queries.headers).fetchall()
        headers: list[SessionHeader] = []
        for (raw,) in raws:
            try:
                headers.append(SessionHeader.from_line(bytes(raw)))
            except SessionFormatError as exc:
                log.warning("skipping an unreadable session header in %s: %s", self._where, exc)
        return headers

    def spends(self, session_ids: Sequence[str]) -> dict[str, Spend]:
        """The cost columns of the visible sessions among ``session_ids`` (those with a known cost only)."""
        wanted = {session_key(sid): sid for sid in session_ids}
        found: dict[str, Spend] = {}
        with self._read() as conn:
            if conn is None or not wanted or not self._keeps_spend(conn):
                return found
            keys = list(wanted)
            for at in range(0, len(keys), 500):
                chunk = keys[at : at + 500]
                sql = self.queries.spends.replace("{keys}", ", ".join([self._mark] * len(chunk)))
                for key, usd, priced, unpriced in conn.execute(sql, chunk).fetchall():
                    spend = Spend(float(usd), int(priced), int(unpriced))
                    if spend.known:
                        found[wanted[bytes(key)]] = spend
        return found

    def model_calls(self, session_id: str) -> list[tuple[int | None, object]]:
        """``(turn, usage)`` of each of the session's model calls in order (its assistant messages' bodies only
        are read), for a cost per turn (:func:`~dsh_jupyter.conversation.spend.spend_by_turn`)."""
        with self._snapshot(session_id) as (conn, key, _header, _next):
            rows = conn.execute(self.queries.events_of_type, (key, ASSISTANT_MESSAGE)).fetchall()
        calls = []
        for _seq, body in sorted(rows, key=lambda row: int(row[0])):
            found = line_usage(bytes(body))
            if found is not None:
                calls.append(found)
        return calls

    def exists(self, session_id: str) -> bool:
        with self._read() as conn:
            if conn is None:
                return False
            row = conn.execute(self.queries.exists, (session_key(session_id),)).fetchone()
        return row is not None

    # -- writing -----------------------------------------------------------------------------------------
    def create(self, header: SessionHeader) -> W:
        header.validate()
        if self.exists(header.id):
            raise SessionExistsError(
                f"session {header.id!r} already exists in {self._where}; resume it with store.open(id) or start a "
                "new session"
            )
        return self._new_writer(header)

    def open(self, session_id: str) -> tuple[SessionLog, W]:
        if not self.exists(session_id):
            raise SessionNotFoundError(session_id, self._where)
        held = self._hold(session_id)
        try:
            session = self.load(session_id)
            writer = self._resumed_writer(session, held)
        except BaseException:
            self._let_go(held)
            raise
        return resumed(session, writer)


__all__ = ["Queries", "Row", "SqlStore", "SqlWriter", "backfill_spend", "batch_spend", "event_row",
           "events_in_order", "exists_error", "parse_op", "session_key"]
