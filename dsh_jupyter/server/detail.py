"""One session's details for the REST API: metadata, its newest messages, how many more there are, and what
is damaged. Read in bounded memory and time, whatever the log's size or state.

How a JSONL log is read (the store's own scanner, :mod:`dsh_jupyter.store.scan`, does every read):

- the surface is folded without decoding it (through the catalog's fold cache when the server has a
  catalog, so a log the catalog indexed is not scanned again), then decoded one event at a time from the
  newest end until the preview has its :data:`PREVIEW_MESSAGES` messages, each cut to
  :data:`PREVIEW_MESSAGE_BYTES`; a message is never held whole beyond its one event line;
- a log bigger than :data:`FULL_READ_BYTES` whose fold is not kept is *cut*: only its last
  :data:`WINDOW_BYTES` are folded (continuing the fold from the first whole line there). That answers with
  exactly the messages a full read would show last, unless something in the window reaches before it
  (a compaction of older messages, a damaged line): then the log is read in full after all;
- the messages before the preview are counted for at most :data:`COUNT_SECONDS`; the answer says how
  many more there are (``preview.omittedMessages``, and in words ``preview.more``), exactly when they
  were counted (or the catalog's index of the unchanged log knows), else as an estimate it marks as one.

A damaged log is never an error: a header that is missing, cut or not a session header, a line that
cannot be read, an unknown event type, an unfinished last write: each becomes an entry of ``damage``
(``line``, counted from 1 with the header as line 1, ``kind`` and a message without any path), and
everything before the damage is shown. Other tools' transcripts and PostgreSQL sessions arrive as read
surfaces and go through the same preview.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from ..references import encode_session_reference_uri, format_session_reference_mention
from ..references.projection import PROJECTION_SKIPS, USER, format_version, project_event
from ..session import SessionCorruptError, SessionFormatError, SessionHeader
from ..store import window as _window
from ..store.scan import MAX_HEADER_BYTES, STREAM_SURFACE, FoldState, fold_lines, read_header, scan_surface, surface_of
from ..store.window import fold_window
from .wire import DamageJson, PreviewMessage, SessionDetail

if TYPE_CHECKING:
    from ..catalog import Catalog
    from ..session import Event, SurfaceSnapshot
    from ..store import JsonlStore

log = logging.getLogger(__name__)

#: The preview keeps the newest messages, each cut to a byte budget.
PREVIEW_MESSAGES = 20
PREVIEW_MESSAGE_BYTES = 4096
#: A log bigger than this is read from its end only, unless the catalog keeps its fold; how much of its end.
FULL_READ_BYTES = _window.FULL_READ_BYTES
WINDOW_BYTES = _window.WINDOW_BYTES
#: Seconds spent counting the messages before the preview; beyond that their number is estimated.
COUNT_SECONDS = 0.5
#: Damaged lines named one by one (the count of the others is given).
MAX_DAMAGE = 20

#: ``damage[].kind`` values.
HEADER = "header"
LINE = "line"
UNFINISHED = "unfinished"


@dataclass(frozen=True)
class Damage:
    """Something of the log that could not be read: ``line`` (1 = the header; ``None``: not known), ``kind``
    (:data:`HEADER`, :data:`LINE`, :data:`UNFINISHED`) and what it means for the reader."""

    line: int | None
    kind: str
    message: str

    def to_json(self) -> DamageJson:
        return {"line": self.line, "kind": self.kind, "message": self.message}


@dataclass
class Reading:
    """What was read of one session: its (possibly stand-in) header, title, surface and damage.

    ``unread_bytes`` is the part of the log before a cut window that was not read (0: read whole)."""

    header: SessionHeader
    title: str | None
    captured_through_seq: int | None
    surface: Sequence[Event]
    damage: list[Damage] = field(default_factory=list)
    created_known: bool = True
    unread_bytes: int = 0
    log_bytes: int = 0
    #: Exact projected counts ``(user, assistant)`` from an index of this very log, when one has them.
    indexed_counts: tuple[int, int] | None = None


# -- reading a JSONL log ------------------------------------------------------------------------------------
def read_jsonl(store: JsonlStore, session_id: str, catalog: Catalog | None) -> Reading:
    """Read ``session_id`` of ``store`` for its details (see the module notes). Raises what opening the log
    raises (``SessionNotFoundError``, the store's refusal of a link, pipe or device, ``PermissionError``)."""
    fh, path = store._open_log(session_id)
    with fh:
        return _read_open(fh, str(path), session_id, store, catalog)


def _read_open(fh: BinaryIO, path: str, session_id: str, store: JsonlStore, catalog: Catalog | None) -> Reading:
    skip = frozenset(PROJECTION_SKIPS | {STREAM_SURFACE})
    size = os.fstat(fh.fileno()).st_size
    try:
        header, header_bytes = read_header(fh, path)
    except (SessionCorruptError, SessionFormatError):
        return _without_header(fh, path, session_id, skip, size)
    damage: list[Damage] = []
    if header.id != session_id:
        damage.append(Damage(1, HEADER, f"the header names the session {header.id!r}, not {session_id!r}: the log "
                                        "was copied or renamed into another session's folder"))
        header = dataclasses.replace(header, id=session_id)
    left = catalog.folds.scan_left(fh, path, skip_data=skip) if catalog is not None else None
    if size > FULL_READ_BYTES and (left is None or left > FULL_READ_BYTES):
        window = _read_window(fh, path, header, header_bytes, size, skip)
        if window is not None:
            window.damage[:0] = damage
            window.indexed_counts, indexed_title = _indexed(catalog, store, session_id, fh)
            window.title = window.title if window.title is not None else indexed_title
            return window
    reading = _read_whole(fh, path, header, skip, catalog)
    reading.damage[:0] = damage
    reading.log_bytes = size
    if size > FULL_READ_BYTES:  # counting every message may take longer than the answer may wait
        reading.indexed_counts, _ = _indexed(catalog, store, session_id, fh)
    return reading


def _read_whole(fh: BinaryIO, path: str, header: SessionHeader, skip: frozenset[str],
                catalog: Catalog | None) -> Reading:
    try:
        if catalog is not None:
            scan = catalog.folds.scan(fh, path, skip_data=skip)
        else:
            scan = scan_surface(fh, path, skip_data=skip)
    except (SessionCorruptError, SessionFormatError):
        state = fold_lines(fh, path, skip_data=skip, stop_at_damage=True)
        scan = surface_of(fh, path, state, stream=True)
        return Reading(header, _title(scan.title), scan.last_seq, scan.surface,
                       _state_damage(state, scan.torn_bytes, stopped=True))
    damage: list[Damage] = []
    if scan.tail_line is not None:
        line = scan.tail_line + 1
        damage.append(Damage(line, UNFINISHED, f"line {line} {_reason(scan.tail_reason)} and no completed turn "
                                               "follows it: the end of the log is an unfinished write (a crash), so "
                                               "it and what follows are not shown"))
    elif scan.torn_bytes:
        damage.append(Damage(None, UNFINISHED, f"the last line ({scan.torn_bytes:,} bytes) is unfinished (a write "
                                               "in progress, or a crash), so it is not shown"))
    return Reading(header, _title(scan.title), scan.last_seq, scan.surface, damage)


def _read_window(fh: BinaryIO, path: str, header: SessionHeader, header_bytes: int, size: int,
                 skip: frozenset[str]) -> Reading | None:
    """The surface of the log's last :data:`WINDOW_BYTES`, folded on its own
    (:func:`dsh_jupyter.store.window.fold_window`); ``None`` when it cannot be (then the log is read in full)."""
    window = fold_window(fh, path, header, header_bytes, size, skip, WINDOW_BYTES)
    if window is None:
        return None
    scan, folded, start = window
    damage = _state_damage(folded, scan.torn_bytes, stopped=False)
    return Reading(header, _title(scan.title), scan.last_seq, scan.surface, damage, unread_bytes=start,
                   log_bytes=size)


def _without_header(fh: BinaryIO, path: str, session_id: str, skip: frozenset[str], size: int) -> Reading:
    """A log whose first line is not a session header: the events after it, as far as they can be read."""
    stand_in = SessionHeader(session_id, 0)
    fh.seek(0)
    newline = fh.read(MAX_HEADER_BYTES + 1).find(b"\n")
    if newline < 0:
        message = ("the first line (the session header) is missing, cut before its end or far too long, so "
                   "nothing in this log can be read; restore it from a backup, or move it aside")
        return Reading(stand_in, None, None, [], [Damage(1, HEADER, message)], created_known=False, log_bytes=size)
    damage = [Damage(1, HEADER, "the first line is not a valid session header, so the session's folder and "
                                "creation time are unknown; the events after it are shown as far as they can be "
                                "read")]
    state = FoldState(stand_in, newline + 1, newline + 1, size, 0, 0, [], {}, {}, None, skip - {STREAM_SURFACE})
    folded = fold_lines(fh, path, skip_data=skip, resume=state, stop_at_damage=True)
    scan = surface_of(fh, path, folded, stream=True)
    damage.extend(_state_damage(folded, scan.torn_bytes, stopped=True))
    return Reading(stand_in, _title(scan.title), scan.last_seq, scan.surface, damage, created_known=False,
                   log_bytes=size)


def _reason(text: str | None) -> str:
    """The scanner's reason for a bad line, without the JSON decoder's own position inside the line (which
    reads like a second line number)."""
    reason = text or "cannot be read"
    return JSON_PROBLEM if reason.startswith(JSON_PROBLEM + " (") else reason


#: How the store's scanner says a line is not JSON.
JSON_PROBLEM = "cannot be parsed as JSON"


def _state_damage(state: FoldState, torn: int, *, stopped: bool) -> list[Damage]:
    if state.bad_line is not None:
        line = state.bad_line + 1 if stopped or state.line_no == state.bad_line else None
        where = f"line {line}" if line is not None else "a line"
        return [Damage(line, LINE, f"{where} {_reason(state.bad_reason)}, so it and the rest of the log after it "
                                   "are not shown; restore the log from a backup to see them")]
    if torn:
        return [Damage(None, UNFINISHED, f"the last line ({torn:,} bytes) is unfinished (a write in progress, or a "
                                         "crash), so it is not shown")]
    return []


def _title(data: Any) -> str | None:
    title = data.get("title") if isinstance(data, dict) else None
    return title if isinstance(title, str) else None


def _indexed(catalog: Catalog | None, store: JsonlStore, session_id: str,
             fh: BinaryIO) -> tuple[tuple[int, int] | None, str | None]:
    """The catalog's counts of this very log (``None`` when it has none, or the log changed since) and the
    title it indexed (titles of a cut read come from there: the window may hold none)."""
    if catalog is None:
        return None, None
    entry = catalog.indexed(store.root, session_id)
    if entry is None:
        return None, None
    info = os.fstat(fh.fileno())
    current = entry.readable and entry.size == info.st_size and entry.mtime_ns == info.st_mtime_ns
    return ((entry.user_messages, entry.assistant_messages) if current else None), entry.title


# -- the answer -----------------------------------------------------------------------------------------------
def reading_of(snapshot: SurfaceSnapshot, title: str | None) -> Reading:
    """A surface read elsewhere (another tool's transcript, the PostgreSQL store) as a :class:`Reading`."""
    return Reading(snapshot.header, title, snapshot.captured_through_seq, snapshot.events)


def _utf8_prefix(text: str, max_bytes: int) -> tuple[str, int]:
    """The longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes, and how many bytes were cut."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, 0
    kept = data[:max_bytes].decode("utf-8", "ignore")
    return kept, len(data) - len(kept.encode("utf-8", "surrogatepass"))


def _decode(surface: Sequence[Event], index: int, damage: list[Damage], lost: list[int],
            numbered: bool) -> Event | None:
    """``surface[index]``, or ``None`` (noted in ``damage``) when its line cannot be decoded. ``numbered``:
    the scan counted lines from the header (not from a window's start)."""
    try:
        return surface[index]
    except SessionCorruptError as exc:
        lost[0] += 1
        if lost[0] <= MAX_DAMAGE:
            line = exc.line + 1 if exc.line is not None and numbered else None
            where = f"line {line}" if line is not None else "a line"
            damage.append(Damage(line, LINE, f"{where} cannot be decoded, so its message is left out"))
        return None


def details(reading: Reading, *, max_messages: int = PREVIEW_MESSAGES, max_message_bytes: int = PREVIEW_MESSAGE_BYTES,
            count_seconds: float = COUNT_SECONDS) -> SessionDetail:
    """The JSON of ``dsh/api/sessions/<payload>`` for what was read."""
    surface, damage = reading.surface, list(reading.damage)
    numbered = reading.unread_bytes == 0
    lost = [0]
    shown: deque[PreviewMessage] = deque()
    shown_user = compacted = 0
    index = len(surface)
    while index > 0 and len(shown) < max_messages:
        index -= 1
        event = _decode(surface, index, damage, lost, numbered)
        message = project_event(event) if event is not None else None
        if message is None:
            continue
        text, cut = _utf8_prefix(message.text, max_message_bytes)
        shown.appendleft({"role": message.role, "text": text, "checkpoint": message.checkpoint, "truncated": cut > 0,
                          "omittedBytes": cut})
        shown_user += message.role == USER
        compacted += message.checkpoint
    # The messages before the preview: counted while time allows, unless an index of this very log knows them
    # or only the log's end was read (then they are estimated from what the preview saw).
    counting = reading.indexed_counts is None and not reading.unread_bytes
    deadline = time.monotonic() + (count_seconds if counting else 0.0)
    before = user = 0
    counted = 0
    while counted < index and time.monotonic() < deadline:
        for position in range(counted, min(index, counted + 256)):
            event = _decode(surface, position, damage, lost, numbered)
            message = project_event(event) if event is not None else None
            if message is not None:
                before += 1
                user += message.role == USER
                compacted += message.checkpoint
        counted = min(index, counted + 256)
    if lost[0] > MAX_DAMAGE:
        damage.append(Damage(None, LINE, f"{lost[0] - MAX_DAMAGE:,} more lines cannot be decoded; their messages "
                                         "are left out"))
    whole = reading.unread_bytes == 0 and counted == index
    exact_total: tuple[int, int] | None = None
    if whole:
        exact_total = (user + shown_user, before - user + len(shown) - shown_user)
    elif reading.indexed_counts is not None:
        exact_total = reading.indexed_counts
    if exact_total is not None:
        omitted = max(0, sum(exact_total) - len(shown))
        more = f"{omitted:,} more message{'s' if omitted != 1 else ''} before these are not shown" if omitted else ""
    else:
        omitted = _estimate(reading, before, counted, index, len(shown))
        if reading.unread_bytes:
            why = (f"only the last {_megabytes(reading.log_bytes - reading.unread_bytes)} of this "
                   f"{_megabytes(reading.log_bytes)} log were read")
        else:
            why = f"counting them all would take longer than {count_seconds:g} s"
        more = f"about {omitted:,} more messages before these are not shown ({why})"
    header = reading.header
    label = reading.title if reading.title is not None else header.id
    projected = sum(exact_total) if exact_total is not None else None
    return {
        "sessionId": header.id,
        "label": label,
        "title": reading.title,
        "cwd": header.cwd,
        "createdAt": int(header.created_at) if reading.created_known else None,
        "formatVersion": format_version(header),
        "capturedThroughSeq": reading.captured_through_seq,
        "compacted": compacted > 0,
        "messageCounts": {
            "events": 0 if reading.captured_through_seq is None else reading.captured_through_seq + 1,
            "surface": len(surface) if reading.unread_bytes == 0 else None,
            "projected": projected,
            "user": exact_total[0] if exact_total is not None else None,
            "assistant": exact_total[1] if exact_total is not None else None,
        },
        "preview": {
            "messages": list(shown),
            "omittedMessages": omitted,
            "omittedMessagesExact": exact_total is not None,
            "more": more,
            "read": "end" if reading.unread_bytes else "whole",
            "unreadBytes": reading.unread_bytes,
            "maxMessages": max_messages,
            "maxMessageBytes": max_message_bytes,
        },
        "damage": [d.to_json() for d in damage],
        "uri": encode_session_reference_uri(header.id),
        "mention": format_session_reference_mention(header.id, label),
    }


def _estimate(reading: Reading, before: int, counted: int, index: int, shown: int) -> int:
    """About how many messages precede the preview, from the share of messages among what was read."""
    examined = counted + (len(reading.surface) - index)  # surface entries looked at
    found = before + shown
    per_entry = found / examined if examined else 1.0
    estimate = before + round((index - counted) * per_entry)
    if reading.unread_bytes:
        read_bytes = max(1, reading.log_bytes - reading.unread_bytes)
        estimate += round(reading.unread_bytes * (len(reading.surface) * per_entry) / read_bytes)
    return estimate


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MB" if size >= 2**20 else f"{size:,} bytes"
