"""Reading one JSONL session log into the facts the catalog keeps about it.

One record type, :class:`LogRecord`, holds those facts wherever they appear: as the result of a read
(inside :class:`LogRead`, with the texts found for the body index), as the previous read an incremental
read continues, and as the log part of a catalog row (:class:`~.rows.Row`).

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

Memory stays bounded whatever the log's size: at most ``body_cap`` bytes of message text are collected (a
prefix of the conversation; the record says ``body_truncated`` when some was left out), and a log bigger
than the cap is never decoded whole: after the store's scanner has validated it (without decoding the
surface), its surface is folded one line at a time (:func:`_stream_surface`).

Only :class:`LogStat` and :func:`stat_log` are needed to answer a query; the reading machinery (JSON, the
store's scanner, projection) is imported when a log is actually read.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, BinaryIO

from .._json import loads
from ..conversation.spend import Spend, message_usage, spend_of_buffer, spend_of_events
from ..session import ReplaceOp, SessionError, SurfaceFold, SurfaceSnapshot
from ..session.events import (
    ASSISTANT_MESSAGE,
    KNOWN_TYPES,
    PACKED_ROW_TYPES,
    SESSION_TITLE,
    SYSTEM_MESSAGE,
    events_from_record,
)
from ..session.projection import PROJECTION_SKIPS, project_event, project_surface
from ..store.paths import session_folder_name
from ..store.safe_open import open_log
from ..store.scan import read_header, scan_surface
from .bodies import BODY_CAP, body_cost, clip_text

if TYPE_CHECKING:
    from .folds import FoldCache

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
    """The log's stat (of the link itself when it is a link: links are never followed), or ``None`` when it
    cannot be had: gone, its folder not a folder, a folder the user may not enter."""
    try:
        return LogStat.of(os.stat(path, follow_symlinks=False))
    except OSError:
        return None


@dataclass
class LogRecord:
    """What the catalog knows about one log as of one read; the one record behind a read, a row and the
    previous read an incremental read continues.

    ``title`` is the latest ``session/title`` title (``None`` when there is none or the log's title cannot
    be read, exactly when ``SessionQuery.title`` would give ``None`` or fail). Counts are of the current
    surface; ``user_messages`` and ``assistant_messages`` are the projected messages. ``committed`` is
    ``None`` when the log could not be read past its header; such a log is always read in full again.
    ``body_bytes`` is how much message text the body index holds for it (of ``body_messages`` messages),
    ``body_truncated`` whether text was left out because of the cap (:data:`~.bodies.BODY_CAP`).
    ``spend`` is what every model call of the log cost (:mod:`dsh_jupyter.conversation.spend`), compacted
    ones included.
    """

    session_id: str
    cwd: str | None
    created_at: int
    title: str | None
    readable: bool
    events: int
    surface: int
    user_messages: int
    assistant_messages: int
    stat: LogStat
    committed: int | None
    tail: bytes
    next_seq: int = 0
    body_bytes: int = 0
    body_truncated: bool = False
    #: Messages whose text (or, for the last one, its start) the body index holds: body search sees these.
    body_messages: int = 0
    spend: Spend = field(default_factory=Spend)


@dataclass
class LogRead:
    """One read of a log: the record it leaves, and the projected user/assistant texts it found for the body
    index (all of them, up to the cap, after a full read: ``full``; only the appended ones after an
    incremental read)."""

    record: LogRecord
    full: bool
    cap: int = BODY_CAP
    bodies: list[str] = field(default_factory=list)

    def add_body(self, text: str) -> None:
        """Index ``text`` next, as far as the cap allows (the record says when some had to be left out)."""
        record = self.record
        if record.body_truncated:
            return  # once text was left out, later text is too: the index holds a prefix of the conversation
        cost = body_cost(text)
        if record.body_bytes + cost > self.cap:
            text = clip_text(text, self.cap - record.body_bytes)
            record.body_truncated = True
            if not text:
                return
            cost = body_cost(text)
        self.bodies.append(text)
        record.body_bytes += cost
        record.body_messages += 1


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


def read_full(path: str, folder: str, stat: LogStat, *, body_cap: int = BODY_CAP,
              folds: FoldCache | None = None) -> LogRead | None:
    """Read a log in full. ``None`` when it is not a listable session log (the store would skip it too).

    At most ``body_cap`` bytes of message text are collected for the body index; a log bigger than that
    is never held in memory (its surface is folded one line at a time). With ``folds`` the scan goes
    through the fold cache (:mod:`.folds`): it leaves its fold result there for references to the log."""
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
        record = LogRecord(header.id, header.cwd, int(header.created_at), None, False, 0, 0, 0, 0, stat, None, b"")
        read = LogRead(record, True, body_cap)
        small = stat.size <= body_cap  # its text fits the cap whatever it holds: decode the surface at once
        try:
            if folds is not None:
                scan = folds.scan(fh, path, want_surface=small, skip_data=PROJECTION_SKIPS)
            else:
                scan = scan_surface(fh, path, want_surface=small, skip_data=PROJECTION_SKIPS)
        except (SessionError, ValueError, OSError, RecursionError, MemoryError) as exc:  # damage costs this log only
            log.debug("catalog: cannot read the conversation of %s: %r", path, exc)
            scan = None
        if scan is None:
            # The surface (or title) could not be decoded: the store's title read may still succeed.
            try:
                title_scan = scan_surface(fh, path, want_surface=False)
            except (SessionError, ValueError, OSError, RecursionError, MemoryError):
                return read  # label falls back to the id, like the scanning path
            record.title = _title_of(title_scan.title)
            return read
        record.title = _title_of(scan.title)
        record.readable = True
        record.events = scan.next_seq
        if small:
            projected = project_surface(SurfaceSnapshot(scan.header, scan.last_seq, scan.surface))
            record.surface = len(scan.surface)
            for message in projected.messages:
                _count(record, message.role)
                read.add_body(message.text)
            # Without a compaction every model call is still on the surface, decoded already; after one, the
            # calls it replaced were still paid for: the file is searched (in place) for every assistant message.
            if any(isinstance(event.surface_op, ReplaceOp) for event in scan.surface):
                record.spend = _spend_of_file(fh, scan.header_bytes, scan.committed_bytes)
            else:
                record.spend = spend_of_events(scan.surface)
        else:
            _stream_surface(fh, scan.header_bytes, scan.committed_bytes, read)
        record.committed = scan.committed_bytes
        record.tail = _tail_of(fh, scan.committed_bytes)
        record.next_seq = scan.next_seq
        return read


def _spend_of_file(fh: BinaryIO, start: int, stop: int) -> Spend:
    """What the model calls in the log's bytes ``start:stop`` cost (a map of the file, searched in place)."""
    if stop <= start:
        return Spend()
    try:
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return spend_of_buffer(mapped, start, min(stop, len(mapped)))
    except (OSError, ValueError):  # a file that cannot be mapped: read it
        fh.seek(start)
        return spend_of_buffer(fh.read(stop - start))


def _count(record: LogRecord, role: str) -> None:
    if role == "user":
        record.user_messages += 1
    else:
        record.assistant_messages += 1


def _committed_lines(fh: BinaryIO, start: int, stop: int) -> Iterator[bytes]:
    """The lines between byte offsets ``start`` and ``stop`` (a scan's committed prefix), read in blocks."""
    fh.seek(start)
    left = stop - start
    carry = b""
    while left > 0:
        block = fh.read(min(_READ_BLOCK, left))
        if not block:
            break
        left -= len(block)
        buf = carry + block if carry else block
        begin = 0
        newline = buf.find(b"\n")
        while newline >= 0:
            yield buf[begin:newline]
            begin = newline + 1
            newline = buf.find(b"\n", begin)
        carry = buf[begin:]


def _stream_surface(fh: BinaryIO, start: int, stop: int, read: LogRead) -> None:
    """The surface counts and capped body texts of a log too big to hold its surface in memory.

    The committed prefix was validated by the store's scanner; this pass decodes one line at a time, folds
    the surface ops, and keeps at most ``read.cap`` bytes of projected text, a prefix of the conversation
    (messages a later compaction shadows give their room back). ``read.record`` gets the counts,
    ``read.bodies`` the texts in surface order; the record is marked truncated when a message still on the
    surface was left out or cut.
    """
    fold = SurfaceFold()
    roles: dict[int, str] = {}  # surface seq -> role of its projected message
    kept: dict[int, str] = {}  # surface seq -> the text indexed for it
    cut: set[int] = set()  # surface seqs whose text was left out or cut
    used = 0
    spend = Spend()
    for line in _committed_lines(fh, start, stop):
        try:
            events = events_from_record(loads(line))
        except Exception:  # the scanner let this line through; a line it did not decode is skipped
            continue
        for event in events:
            if event.type == ASSISTANT_MESSAGE:
                spend = spend.add(message_usage(event.data)[1])
            if event.surface_op is None:
                continue
            try:
                shadowed = fold.apply(event.seq, event.surface_op, event.source_event_seqs)
            except Exception:  # as above
                continue
            for seq in shadowed:
                roles.pop(seq, None)
                cut.discard(seq)
                text = kept.pop(seq, None)
                if text is not None:
                    used -= body_cost(text)
            projected = project_event(event)
            if projected is None:
                continue
            roles[event.seq] = projected.role
            text = projected.text
            cost = body_cost(text)
            if cut or used + cost > read.cap:  # after a cut message, later ones are left out too
                text = "" if cut else clip_text(text, read.cap - used)
                cut.add(event.seq)
                cost = body_cost(text) if text else 0
            if text:
                kept[event.seq] = text
                used += cost
    record = read.record
    record.spend = spend
    seqs = fold.seqs
    record.surface = len(seqs)
    for seq in seqs:
        role = roles.get(seq)
        if role is None:
            continue
        _count(record, role)
        text = kept.get(seq)
        if text is not None:
            read.bodies.append(text)
            record.body_messages += 1
    record.body_bytes = used
    record.body_truncated = any(seq in cut for seq in roles)


class _GiveUp(Exception):
    """The appended part cannot be followed incrementally (internal)."""


def read_appended(path: str, previous: LogRecord, stat: LogStat, *, body_cap: int = BODY_CAP) -> LogRead | None:
    """Continue ``previous`` over the lines appended since; ``None`` when a full read is needed.

    Appended message text joins the body index while the session's text stays within ``body_cap`` bytes."""
    committed = previous.committed
    if (committed is None or not previous.readable or stat.ino != previous.stat.ino or stat.size < committed
            or stat.size <= previous.stat.size):
        return None  # not a log that only grew: an append always makes the file longer
    try:
        fh = open_log(path)
    except OSError:
        return None
    with fh:
        try:
            if _tail_of(fh, committed) != previous.tail:
                return None
            fh.seek(committed)
            facts = LogRead(replace(previous, stat=stat), False, body_cap)
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
                facts.record.committed = offset
                facts.record.tail = _tail_of(fh, offset)
        except (_GiveUp, OSError):
            return None
    facts.record.events = next_seq
    facts.record.next_seq = next_seq
    return facts


def _admit_line(line: bytes, next_seq: int, facts: LogRead, project_event: Any) -> int:
    """Check one appended line like the store's full decoder; returns the next expected seq."""
    readable = KNOWN_TYPES | {SYSTEM_MESSAGE} | set(PACKED_ROW_TYPES)
    try:
        record = loads(line)
    except (ValueError, RecursionError, MemoryError):
        raise _GiveUp from None
    if isinstance(record, dict):
        kind = record.get("type")
        if isinstance(kind, str) and kind not in readable and record.get("ignorable") is not True:
            raise _GiveUp
    try:
        events = events_from_record(record)
    except (SessionError, ValueError, TypeError, RecursionError):
        raise _GiveUp from None
    for event in events:
        if event.seq != next_seq:
            raise _GiveUp
        if event.source_event_seqs is not None and any(s >= event.seq for s in event.source_event_seqs):
            raise _GiveUp
        if event.type == ASSISTANT_MESSAGE:
            facts.record.spend = facts.record.spend.add(message_usage(event.data)[1])
        if event.surface_op is not None:
            if event.surface_op != "append":
                raise _GiveUp  # a replace op reshapes the surface: read the whole log again
            facts.record.surface += 1
            projected = project_event(event)
            if projected is not None:
                _count(facts.record, projected.role)
                facts.add_body(projected.text)
        elif event.type == SESSION_TITLE:
            facts.record.title = _title_of(event.data)
        next_seq += 1
    return next_seq
