"""Every read-only foreign source together: listing (through the index), candidates, reading one transcript.

:class:`ForeignSessions` is what the services hand to the resolver, the CLI and the server. Ranking uses the
one rule of :mod:`dsh_jupyter.ranking` (same folder first, then no folder, then the rest; newest first).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..home import resolve_dsh_home
from ..ranking import workspace_rank
from ..session import SessionNotFoundError
from ..session.header import SessionHeader
from ..session.surface import SurfaceSnapshot
from ..store.safe_open import open_log
from .base import ForeignHeader, ForeignSource, ScanState, file_identity, snapshot
from .claude import ClaudeCodeSource
from .codex import CodexSource
from .index import INDEX_NAME, ForeignIndex

log = logging.getLogger(__name__)

#: The environment switch for hosts without traitlets (server, CLI): ``0``/``false``/``off``/``no`` turns off.
FOREIGN_ENV = "DSH_FOREIGN_SESSIONS"
_OFF = frozenset({"0", "false", "off", "no"})


#: How long one listing answers candidate queries (the keystrokes of one ``@`` query), in seconds.
LISTING_MAX_AGE = 2.0


def enabled_by_env(env: dict[str, str] | None = None) -> bool:
    """Whether ``$DSH_FOREIGN_SESSIONS`` leaves other tools' sessions on (they are on unless it says off)."""
    value = (os.environ if env is None else env).get(FOREIGN_ENV, "")
    return value.strip().lower() not in _OFF


def default_sources() -> list[ForeignSource]:
    return [ClaudeCodeSource(), CodexSource()]


def split_id(session_id: str, sources: Iterable[ForeignSource] | None = None) -> tuple[ForeignSource, str] | None:
    """The source whose namespace ``session_id`` carries, and the id inside it; ``None`` for our own ids."""
    if not isinstance(session_id, str) or ":" not in session_id:
        return None
    for source in sources if sources is not None else default_sources():
        if session_id.startswith(source.prefix) and len(session_id) > len(source.prefix):
            return source, session_id[len(source.prefix):]
    return None


def tool_of(session_id: str) -> str | None:
    """The other tool a session id belongs to ("Claude Code", "Codex"), or ``None`` for ours."""
    found = split_id(session_id)
    return found[0].tool if found is not None else None


class ForeignSessions:
    """Listing and reading other tools' transcripts (read-only)."""

    def __init__(self, sources: Sequence[ForeignSource] | None = None, *, index_path: Path | None = None) -> None:
        self.sources = list(sources) if sources is not None else default_sources()
        self.index = ForeignIndex(index_path)
        self._lock = threading.Lock()
        self._last: tuple[float, list[ForeignHeader]] | None = None

    def _header(self, source: ForeignSource, path: str) -> ForeignHeader | None:
        """The facts of one transcript, from the index when its file is unchanged."""
        name = path
        identity = file_identity(path)
        if identity is None:
            return None
        entry = self.index.get(name)
        state: ScanState
        if entry is not None and entry.identity == identity:
            if entry.header is not None:
                return entry.header
            state = entry.state
        else:
            grew = (entry is not None and entry.identity[2] == identity[2] and entry.identity[0] <= identity[0]
                    and entry.state.offset <= identity[0])
            resumed = ScanState.from_json(entry.state.to_json()) if grew and entry is not None else None
            state = resumed if resumed is not None else ScanState()
            try:
                with open_log(path) as fh:
                    state = source.scan_header(fh, state)
                    identity = (os.fstat(fh.fileno()).st_size, identity[1], identity[2])
            except OSError as exc:
                log.debug("skipping %s: %s", path, exc)
                return None
            state = self.index.put(name, identity, state)
        return self._row(source, name, state)

    def _row(self, source: ForeignSource, path: str, state: ScanState) -> ForeignHeader | None:
        """The listing row of a transcript from its scanned facts (kept in the index until the file changes)."""
        native = source.native_id(path, state)
        if native is None:
            return None
        header = ForeignHeader(source.prefix + native, source.tool, path, state.cwd, state.created_at,
                               state.best_title())
        self.index.remember(path, header)
        return header

    def headers(self, max_age: float = 0.0) -> list[ForeignHeader]:
        """Every transcript of every source, newest first (created, then id).

        ``max_age`` (seconds) lets a listing made that recently answer again (keystrokes of one ``@`` query)."""
        last = self._last
        if last is not None and max_age > 0 and time.monotonic() - last[0] <= max_age:
            return list(last[1])
        found: list[ForeignHeader] = []
        seen: set[str] = set()
        with self._lock:
            known = self.index.entries()
            lstat, is_regular = os.lstat, stat.S_ISREG
            for source in self.sources:
                for path in source.discover():
                    seen.add(path)
                    entry = known.get(path)
                    if entry is not None:  # the fast path: unchanged since it was scanned (one lstat, no open)
                        try:
                            info = lstat(path)
                        except OSError:
                            continue
                        if (is_regular(info.st_mode)
                                and entry.identity == (info.st_size, info.st_mtime_ns, info.st_ino)):
                            # Its row, kept since the last listing, or made from the facts the index holds.
                            row = entry.header if entry.header is not None else self._row(source, path, entry.state)
                            if row is not None:
                                found.append(row)
                            continue
                    header = self._header(source, path)
                    if header is not None:
                        found.append(header)
            self.index.keep_only(seen)
            self.index.save()
        found.sort(key=lambda h: (-h.created_at, h.session_id))
        self._last = (time.monotonic(), found)
        return list(found)

    def matching(self, needle: str, target_cwd: str | None, exclude: str | None = None) -> list[ForeignHeader]:
        """Transcripts whose id, folder or title contain ``needle`` (lowercased), ranked like ours."""
        kept = [h for h in self.headers(LISTING_MAX_AGE) if h.session_id != exclude and _matches(h, needle)]
        kept.sort(key=lambda h: (workspace_rank(h.cwd, target_cwd), -h.created_at, h.session_id))
        return kept

    def only(self, sources: Sequence[ForeignSource]) -> ForeignSessions:
        """These sessions restricted to ``sources`` (the same index)."""
        if list(sources) == self.sources:
            return self
        view = ForeignSessions(sources)
        view.index, view._lock = self.index, self._lock
        return view

    def owns(self, session_id: str) -> bool:
        """Whether ``session_id`` carries the namespace of one of these sources (ours never do)."""
        return split_id(session_id, self.sources) is not None

    def header(self, session_id: str) -> ForeignHeader | None:
        found = split_id(session_id, self.sources)
        if found is None:
            return None
        source, native = found
        path = source.locate(native)
        return None if path is None else self._header(source, path)

    def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """The projected current surface of one transcript (raises ``SessionNotFoundError``)."""
        found = split_id(session_id, self.sources)
        path = None if found is None else found[0].locate(found[1])
        if found is None or path is None:
            where = "the transcripts of other tools" if found is None else f"{found[0].tool}'s transcripts"
            raise SessionNotFoundError(session_id, where)
        source = found[0]
        header = self._header(source, path)
        with open_log(path) as fh:
            items, lines = source.read_items(fh)
        cwd = header.cwd if header is not None else None
        created = header.created_at if header is not None else 0
        return snapshot(SessionHeader(id=session_id, created_at=created, cwd=cwd), items, lines)


def _matches(header: ForeignHeader, needle: str) -> bool:
    if not needle:
        return True
    return (needle in header.session_id.lower() or (header.cwd is not None and needle in header.cwd.lower())
            or (header.title is not None and needle in header.title.lower()) or needle in header.tool.lower())


_SHARED: dict[str, ForeignSessions] = {}
_SHARED_LOCK = threading.Lock()


def foreign_sessions(dsh_home: str | None = None) -> ForeignSessions:
    """The process-wide :class:`ForeignSessions` whose index sits in ``dsh_home`` (default ``$DSH_HOME``/~/.dsh)."""
    path = resolve_dsh_home(dsh_home or None) / INDEX_NAME
    with _SHARED_LOCK:
        shared = _SHARED.get(str(path))
        if shared is None:
            shared = _SHARED[str(path)] = ForeignSessions(index_path=path)
        return shared
