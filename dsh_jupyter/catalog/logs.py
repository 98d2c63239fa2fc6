"""Reading one JSONL session log into the facts the catalog keeps about it.

A full read uses the store's own scanner (:func:`~dsh_jupyter.store.scan.scan_surface`), so the title the
catalog records is exactly the title ``JsonlStore.read_title`` returns, and a log the store would not list
(no valid header, or a header whose id does not belong to its folder) is not indexed either.

An incremental read continues an earlier read of a log that only grew: it decodes the lines appended after
the committed prefix it saw last time and checks them as strictly as the store's full decoder does (valid
JSON, known or ignorable type, contiguous seqs, citations of earlier seqs only). Anything it cannot follow
with certainty (a replace op, a bad line, a file that was replaced, cut or rewritten at the same length, the
last committed bytes changed) makes it give up, and the caller reads the log in full instead.

Logs are append-only; the one change an incremental read cannot see is an edit in place of bytes before the
last committed line that also makes the file longer (same inode). ``Catalog.reindex`` reads everything again.

Only :class:`LogStat` and :func:`stat_log` are needed to answer a query; the reading machinery (JSON, the
store's scanner, projection) is imported when a log is actually read.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

#: Bytes at the end of the committed prefix kept to recognise the same file on the next read.
TAIL_BYTES = 64
_READ_BLOCK = 1 << 20


@dataclass(frozen=True)
class LogStat:
    """What a ``stat`` of a log tells the catalog: a change in any of these means "read it again"."""

    size: int
    mtime_ns: int
    ino: int

    @classmethod
    def of(cls, result: os.stat_result) -> LogStat:
        return cls(int(result.st_size), int(result.st_mtime_ns), int(result.st_ino))


def stat_log(path: str | os.PathLike[str]) -> LogStat | None:
    """The log's stat, or ``None`` when it is gone (or its folder is not a folder)."""
    try:
        return LogStat.of(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return None


@dataclass
class LogFacts:
    """Everything the catalog records about one log, as of one read.

    ``title`` is the latest ``session/title`` title (``None`` when there is none or the log's title cannot
    be read, exactly when ``SessionQuery.title`` would give ``None`` or fail). ``bodies`` holds the
    projected user/assistant texts this read found: all of them after a full read (``full``), only the
    appended ones after an incremental read. ``committed`` is ``None`` when the log could not be read past
    its header; such a log is always read in full again.
    """

    session_id: str
    cwd: str | None
    created_at: int
    title: str | None
    readable: bool
    events: int
    surface: int
    user: int
    assistant: int
    stat: LogStat
    committed: int | None
    tail: bytes
    full: bool
    next_seq: int = 0
    bodies: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PreviousRead:
    """What an earlier read left behind, enough to continue it."""

    stat: LogStat
    committed: int | None
    tail: bytes
    next_seq: int
    title: str | None
    readable: bool
    events: int
    surface: int
    user: int
    assistant: int


def _title_of(data: Any) -> str | None:
    """``SessionQuery.title`` of a title event's data."""
    if isinstance(data, dict):
        title = data.get("title")
        return title if isinstance(title, str) else None
    return None


def _tail_of(fh: BinaryIO, committed: int) -> bytes:
    start = max(0, committed - TAIL_BYTES)
    fh.seek(start)
    return fh.read(committed - start)


def read_full(path: str, folder: str, stat: LogStat) -> LogFacts | None:
    """Read a log in full. ``None`` when it is not a listable session log (the store would skip it too)."""
    from ..references.projection import PROJECTION_SKIPS, project_surface
    from ..session import SessionError, SurfaceSnapshot
    from ..store.paths import session_folder_name
    from ..store.safe_open import open_log
    from ..store.scan import read_header, scan_surface

    try:
        fh = open_log(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        log.warning("catalog: cannot open session log %s: %s", path, exc)
        return None
    with fh:
        try:
            header, _ = read_header(fh, path)
        except (OSError, ValueError) as exc:
            log.debug("catalog: skipping %s (no readable header): %s", path, exc)
            return None
        if session_folder_name(header.id) != folder:
            log.debug("catalog: skipping %s: it holds session %r, whose folder would be %r",
                      path, header.id, session_folder_name(header.id))
            return None
        facts = LogFacts(header.id, header.cwd, int(header.created_at), None, False, 0, 0, 0, 0, stat, None, b"",
                         True)
        try:
            scan = scan_surface(fh, path, skip_data=PROJECTION_SKIPS)
        except (SessionError, ValueError, OSError):
            scan = None
        if scan is None:
            # The surface (or title) could not be decoded: the store's title read may still succeed.
            try:
                title_scan = scan_surface(fh, path, want_surface=False)
            except (SessionError, ValueError, OSError):
                return facts  # label falls back to the id, like the scanning path
            facts.title = _title_of(title_scan.title)
            return facts
        projected = project_surface(SurfaceSnapshot(scan.header, scan.last_seq, scan.surface))
        facts.title = _title_of(scan.title)
        facts.readable = True
        facts.events = scan.next_seq
        facts.surface = len(scan.surface)
        facts.user = sum(1 for m in projected.messages if m.role == "user")
        facts.assistant = len(projected.messages) - facts.user
        facts.bodies = [m.text for m in projected.messages]
        facts.committed = scan.committed_bytes
        facts.tail = _tail_of(fh, scan.committed_bytes)
        facts.next_seq = scan.next_seq
        return facts


class _GiveUp(Exception):
    """The appended part cannot be followed incrementally (internal)."""


def read_appended(path: str, previous: PreviousRead, stat: LogStat, *, session_id: str, cwd: str | None,
                  created_at: int) -> LogFacts | None:
    """Continue ``previous`` over the lines appended since; ``None`` when a full read is needed."""
    from ..references.projection import project_event

    committed = previous.committed
    if (committed is None or not previous.readable or stat.ino != previous.stat.ino or stat.size < committed
            or stat.size <= previous.stat.size):
        return None  # not a log that only grew: an append always makes the file longer
    from ..store.safe_open import open_log

    try:
        fh = open_log(path)
    except OSError:
        return None
    with fh:
        try:
            if _tail_of(fh, committed) != previous.tail:
                return None
            fh.seek(committed)
            facts = LogFacts(session_id, cwd, created_at, previous.title, True, previous.events, previous.surface,
                             previous.user, previous.assistant, stat, committed, previous.tail, False)
            next_seq = previous.next_seq
            carry = b""
            offset = committed
            while True:
                block = fh.read(_READ_BLOCK)
                if not block:
                    break
                buf = carry + block if carry else block
                start = 0
                newline = buf.find(b"\n")
                while newline >= 0:
                    next_seq = _admit_line(buf[start:newline], next_seq, facts, project_event)
                    offset += newline + 1 - start
                    start = newline + 1
                    newline = buf.find(b"\n", start)
                carry = buf[start:]
            if offset != committed:
                facts.committed = offset
                facts.tail = _tail_of(fh, offset)
        except (_GiveUp, OSError):
            return None
    facts.events = next_seq
    facts.next_seq = next_seq
    return facts


def _admit_line(line: bytes, next_seq: int, facts: LogFacts, project_event: Any) -> int:
    """Check one appended line like the store's full decoder; returns the next expected seq."""
    from .._json import loads
    from ..session import SessionError
    from ..session.events import KNOWN_TYPES, PACKED_ROW_TYPES, SESSION_TITLE, SYSTEM_MESSAGE, events_from_record

    readable = KNOWN_TYPES | {SYSTEM_MESSAGE} | set(PACKED_ROW_TYPES)
    try:
        record = loads(line)
    except ValueError:
        raise _GiveUp from None
    if isinstance(record, dict):
        kind = record.get("type")
        if isinstance(kind, str) and kind not in readable and record.get("ignorable") is not True:
            raise _GiveUp
    try:
        events = events_from_record(record)
    except (SessionError, ValueError, TypeError):
        raise _GiveUp from None
    for event in events:
        if event.seq != next_seq:
            raise _GiveUp
        if event.source_event_seqs is not None and any(s >= event.seq for s in event.source_event_seqs):
            raise _GiveUp
        if event.surface_op is not None:
            if event.surface_op != "append":
                raise _GiveUp  # a replace op reshapes the surface: read the whole log again
            facts.surface += 1
            projected = project_event(event)
            if projected is not None:
                if projected.role == "user":
                    facts.user += 1
                else:
                    facts.assistant += 1
                facts.bodies.append(projected.text)
        elif event.type == SESSION_TITLE:
            facts.title = _title_of(event.data)
        next_seq += 1
    return next_seq
