"""Session query: list sessions, read a session's current surface and its latest title."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .session import SessionError, SessionHeader, SurfaceSnapshot
from .store.base import SessionStore

if TYPE_CHECKING:
    from .conversation.spend import Spend


class LiveLog(Protocol):
    """What a live session must offer (:class:`~dsh_jupyter.session.SessionLog` does)."""

    header: SessionHeader

    def __len__(self) -> int: ...

    def snapshot(self) -> SurfaceSnapshot: ...

    def title(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class SessionRecord:
    """One listed session: its header (``live`` is true when an in-process agent owns it)."""

    header: SessionHeader
    live: bool = False

    @property
    def id(self) -> str:
        return self.header.id


def _order_key(header: SessionHeader) -> tuple[int, str]:
    return (-int(header.created_at), header.id)


class SessionQuery:
    """Read-side view over one store, with optional live sessions that take precedence.

    Live sessions are registered by agents in this process (``register_live``); a live session is read
    from memory and never from storage, exactly like the reference's live-preferred corpus.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._live: dict[str, LiveLog] = {}

    # -- live sessions -------------------------------------------------------------------------------
    def register_live(self, log: LiveLog) -> None:
        """Register an in-memory :class:`~dsh_jupyter.session.SessionLog` (must have ``header`` and
        ``snapshot()``/``title()``) so reads see its unflushed events."""
        self._live[log.header.id] = log

    def unregister_live(self, session_id: str) -> None:
        self._live.pop(session_id, None)

    # -- queries -------------------------------------------------------------------------------------
    def list_sessions(self) -> list[SessionRecord]:
        """Every session, newest first: ``createdAt`` descending, then id ascending.

        A stored log that cannot be read (not a regular file, a link, damaged, no permission) is left out
        with a warning naming it (:attr:`skipped`); it never hides the others."""
        records: dict[str, SessionRecord] = {h.id: SessionRecord(h) for h in self.store.list_headers()}
        for session_id, log in self._live.items():
            if len(log):
                records[session_id] = SessionRecord(log.header, live=True)
        return sorted(records.values(), key=lambda r: _order_key(r.header))

    @property
    def skipped(self) -> list[str]:
        """Warnings for the stored entries the latest :meth:`list_sessions` left out, each naming its entry."""
        return self.store.skipped

    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        """Header copy, ``captured_through_seq`` (last raw seq, ``None`` for an empty log) and the current
        surface events. Raises :class:`SessionNotFoundError` for an unknown id.

        ``skip_data`` names event types the caller will not look into: a store may return them with
        ``data=None`` instead of decoding them (live sessions return everything)."""
        log = self._live.get(session_id)
        if log is not None and len(log):
            return log.snapshot()
        if skip_data:
            return self.store.read_surface(session_id, skip_data=skip_data)
        return self.store.read_surface(session_id)

    def spends(self, session_ids: Sequence[str]) -> dict[str, Spend]:
        """What the model calls of these sessions cost, where known: a live session's from its events in
        memory, the others' from the store (:meth:`SessionStore.spends`; nothing for a store that keeps none)."""
        from .conversation.spend import spend_of_log

        found: dict[str, Spend] = {}
        stored = []
        for session_id in session_ids:
            log = self._live.get(session_id)
            if log is not None and len(log):
                spend = spend_of_log(log)
                if spend.known:
                    found[session_id] = spend
            else:
                stored.append(session_id)
        if stored:
            found.update(self.store.spends(stored))
        return found

    def title(self, session_id: str) -> str | None:
        """The latest ``session/title`` title, or ``None`` when the session has none."""
        data = self.title_record(session_id)
        title = data.get("title") if data else None
        return title if isinstance(title, str) else None

    def title_or_none(self, session_id: str) -> str | None:
        """:meth:`title`, or ``None`` when the session's log cannot be read: for labels and lookups that
        go over many sessions, where one damaged log must not stop the rest."""
        try:
            return self.title(session_id)
        except (SessionError, OSError):
            return None

    def title_record(self, session_id: str) -> dict[str, Any] | None:
        """The latest ``session/title`` event data (``title``, ``messageSeqs``, ``source``)."""
        log = self._live.get(session_id)
        if log is not None and len(log):
            return log.title()
        return self.store.read_title(session_id)

    def header(self, session_id: str) -> SessionHeader:
        log = self._live.get(session_id)
        if log is not None:
            return log.header
        return self.store.header(session_id)
