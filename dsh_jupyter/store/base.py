"""The persistence seam every backend implements (JSONL by default, SQLite as the alternative)."""

from __future__ import annotations

import abc
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..session import Event, SessionFormatError, SessionHeader, SessionLog, SessionNotFoundError, SurfaceSnapshot
from .artifacts import ArtifactError, load_file, save_file

if TYPE_CHECKING:
    from ..conversation.spend import Spend

T = TypeVar("T")


class HeldLock(Protocol):
    """The one-writer-per-session lock a backend holds while its writer is open."""

    def release(self) -> None: ...


@dataclass(frozen=True)
class SessionLocation:
    """Where a backend keeps one session's log: ``kind`` names the representation, ``path`` is absolute."""

    kind: str
    path: str

    def __fspath__(self) -> str:
        return self.path


class SessionWriter(abc.ABC):
    """The single writer of one session. Appends are buffered; :meth:`flush` makes them durable.

    Only one writer per session may exist at a time across processes; opening a second one raises
    :class:`~dsh_jupyter.session.SessionLockedError` and writes nothing.
    """

    header: SessionHeader

    @abc.abstractmethod
    def append(self, events: Iterable[Event]) -> None:
        """Buffer events; the first must continue the log's seq."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Write and fsync everything buffered. A failed write leaves the stored log as it was."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release the writer lock. Idempotent."""

    @abc.abstractmethod
    def discard(self) -> int:
        """Drop the buffered events that were never stored, then close; returns how many were dropped.
        The stored log stays exactly as it was at its last successful flush."""

    @property
    @abc.abstractmethod
    def materialized(self) -> bool:
        """True once the log exists in storage (after the first successful flush)."""

    def attach(self, log: SessionLog) -> None:
        """Persist every event later appended to ``log`` (buffered until :meth:`flush`)."""
        log.subscribe(self._append_one)

    def _append_one(self, event: Event) -> None:
        """:meth:`append` of one event (what :meth:`attach` calls for every event a log appends)."""
        self.append([event])

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BufferedWriter(SessionWriter, Generic[T]):
    """What every backend's writer shares: buffered, seq-checked appends under one mutex; flush, discard and
    close. A backend encodes an event into its own record (:meth:`_encode`), stores the buffer durably
    (:meth:`_flush_locked`, called with the mutex held) and frees what it holds (:meth:`_release`)."""

    def __init__(self, header: SessionHeader, *, lock: HeldLock | None, next_seq: int) -> None:
        self.header = header
        self._lock = lock
        self._stored_seq = next_seq
        self._next_seq = next_seq
        self._buffer: list[T] = []
        self._closed = False
        self._mutex = threading.Lock()

    @property
    def next_seq(self) -> int:
        """The seq the next appended event must carry."""
        return self._next_seq

    @property
    def pending(self) -> int:
        """Number of buffered events not yet flushed."""
        return self._next_seq - self._stored_seq

    @property
    def closed(self) -> bool:
        return self._closed

    @abc.abstractmethod
    def _encode(self, event: Event, seq: int) -> T:
        """Validate ``event`` (which must carry ``seq``) and encode it for the buffer."""

    @abc.abstractmethod
    def _flush_locked(self) -> None:
        """Store the buffer durably, then clear it and advance the stored seq (the mutex is held)."""

    def _release(self) -> None:
        """Free backend resources (file descriptors, connections) as the writer closes."""

    def append(self, events: Iterable[Event]) -> None:
        with self._mutex:
            self._check_open()
            encoded: list[T] = []
            seq = self._next_seq
            for event in events:
                encoded.append(self._encode(event, seq))
                seq += 1
            self._buffer.extend(encoded)
            self._next_seq = seq

    def _append_one(self, event: Event) -> None:
        with self._mutex:
            self._check_open()
            encoded = self._encode(event, self._next_seq)
            self._buffer.append(encoded)
            self._next_seq += 1

    def flush(self) -> None:
        with self._mutex:
            self._check_open()
            self._flush_locked()

    def discard(self) -> int:
        with self._mutex:
            dropped = self._next_seq - self._stored_seq
            self._buffer.clear()
            self._next_seq = self._stored_seq
        self.close()
        return dropped

    def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            try:
                self._flush_locked()
            finally:
                self._closed = True
                self._release()
                if self._lock is not None:
                    self._lock.release()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionFormatError(f"the writer of session {self.header.id!r} is closed; open the session again")


class SessionStore(abc.ABC):
    """A place that holds sessions. Reads never block on a writer."""

    #: Whether reading several sessions side by side (one thread each) is faster than one after another: true
    #: when a read waits on another process (a database server). A local store's reads are CPU work under the
    #: interpreter lock, so threads only contend for it (three 100 MB logs read in three threads took a quarter
    #: more CPU and a fifth more time than read in turn: ``benchmarks/bench_foldcache.py``).
    concurrent_reads: bool = False

    @abc.abstractmethod
    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Absolute location of the session's own log, computed without I/O; ``None`` when the backend
        has no honest per-session file (SQLite)."""

    @abc.abstractmethod
    def session_dir(self, header: SessionHeader) -> Path | None:
        """The folder for the session's own artifacts (spilled snapshots, large tool output), or ``None``."""

    @abc.abstractmethod
    def create(self, header: SessionHeader) -> SessionWriter:
        """A writer for a new session. Lazy: nothing is stored until the first flush with events."""

    @abc.abstractmethod
    def open(self, session_id: str) -> tuple[SessionLog, SessionWriter]:
        """Resume an existing session for writing: its log (repaired if a turn was left open) and a writer."""

    @abc.abstractmethod
    def load(self, session_id: str) -> SessionLog:
        """Read the whole log (every raw event)."""

    @contextmanager
    def stream_events(self, session_id: str) -> Iterator[tuple[SessionHeader, Iterable[Event]]]:
        """Every raw event in order, like :meth:`load`, for a reader that looks at one event at a time
        (exports): ``with store.stream_events(id) as (header, events): ...``. Backends override it to hold
        one event at a time; this default loads the log. A damaged log may raise during the iteration."""
        log = self.load(session_id)
        yield log.header, log.events

    @abc.abstractmethod
    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        """Header copy, last raw seq and current surface events, decoding no more than needed.

        Surface events whose type is in ``skip_data`` may come back as placeholders with ``data=None``
        (type, seq and surface op intact; time and cited seqs only where the backend has them cheaply):
        callers that ignore, say, tool results never pay for decoding them.
        """

    @abc.abstractmethod
    def read_title(self, session_id: str) -> dict[str, Any] | None:
        """The latest ``session/title`` event data, or ``None``."""

    @abc.abstractmethod
    def list_headers(self) -> list[SessionHeader]:
        """Headers of every stored session (order unspecified)."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> None:
        """Remove a stored session and its artifacts."""

    def exists(self, session_id: str) -> bool:
        return any(h.id == session_id for h in self.list_headers())

    def spends(self, session_ids: Sequence[str]) -> Mapping[str, Spend]:
        """What the model calls of these sessions cost, for the stores that keep it per session (the SQL
        stores); a session left out has no known cost here (the JSONL store's costs are in the catalog)."""
        return {}

    # -- artifacts (:mod:`dsh_jupyter.store.artifacts`) ----------------------------------------------------
    def save_artifact(self, header: SessionHeader, name: str, data: bytes) -> None:
        """Keep ``data`` as the session's artifact ``name`` (``artifacts/<sha256>.png``); saving the same
        name again keeps the first. The default writes a file in :meth:`session_dir`; a backend without
        one overrides this or raises :class:`~dsh_jupyter.store.artifacts.ArtifactError` saying why."""
        folder = self.session_dir(header)
        if folder is None:
            raise ArtifactError("this session store has no place for artifacts")
        save_file(folder, name, data)

    def load_artifact(self, header: SessionHeader, name: str) -> bytes | None:
        """The bytes of the session's artifact ``name``, or ``None`` when it is not there."""
        folder = self.session_dir(header)
        return load_file(folder, name) if folder is not None else None

    def header(self, session_id: str) -> SessionHeader:
        """One session's header; :class:`~dsh_jupyter.session.SessionNotFoundError` when it is not stored.
        Backends with a per-session file override this with a direct lookup."""
        for header in self.list_headers():
            if header.id == session_id:
                return header
        raise SessionNotFoundError(session_id)

    @property
    def skipped(self) -> list[str]:
        """Warnings naming the entries the latest :meth:`list_headers` skipped (unreadable, unsafe, damaged)."""
        return []

    def check_writable(self, session_id: str | None = None) -> None:
        """Raise :class:`~dsh_jupyter.store.errors.StoreReadOnlyError` (a ``SessionError``) when a turn of a
        new session (or of ``session_id``) could not be saved. Call it before a turn starts; reading,
        listing and referencing never need it. The default accepts everything."""
        return None
