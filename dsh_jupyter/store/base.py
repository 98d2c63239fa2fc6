"""The persistence seam every backend implements (JSONL by default, SQLite as the alternative)."""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..session import Event, SessionHeader, SessionLog, SessionNotFoundError, SurfaceSnapshot


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
        log.subscribe(lambda event: self.append([event]))

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionStore(abc.ABC):
    """A place that holds sessions. Reads never block on a writer."""

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
