"""Reading a JSONL session log: one scanner behind ``load``, ``read_surface``, ``read_title`` and ``open``.

Rules (the reference's reader, §3.5 and §9 of the behaviour notes):

* The header is exactly one newline-terminated line; anything else is an "empty or header-less
  session log".
* A final line without a trailing newline is a torn tail and is ignored.
* Every complete line is parsed (packed chunk rows expanded) and must continue the seq. At the first
  bad line (unparsable, invalid, a seq gap, or a surface op the fold refuses): if that line or any later
  line that parses is a ``turn/end``, the log is corrupt (:class:`SessionCorruptError` with the line,
  counted from 1 after the header); otherwise the bad line and everything after it are a tolerated
  crash tail. ``committed_bytes`` is the end of the last good line.
* A line holding an unknown event type that is not marked ``ignorable`` refuses the log.
* Hard caps: the header reader never reads more than :data:`MAX_HEADER_BYTES`, and an event line longer
  than :data:`MAX_LINE_BYTES` is a damaged line that is skipped block by block, never held whole. Any
  decoding failure (bad JSON, bad UTF-8, nesting too deep, a value too large) is a damaged line with its
  line number, like any other.

Why one module of over 700 lines: the full scan and the surface fold are two walks over the same private
line machinery (the block reader, the envelope patterns, the damaged-line and crash-tail rules). Kept in
one file, a damaged line is judged by one set of private functions in both walks; split, those rules would
become a public seam that only these two readers use.

Callers open logs with :func:`~dsh_jupyter.store.safe_open.open_log` (regular files only, no links, never
blocking) before handing them to these readers.

``scan_events`` decodes and validates every line. ``scan_surface`` is the fast path for reads that need
only the current surface or the latest title. For a line that starts with the exact envelope prefix our
writer and the reference's write (``{"type":T,"seq":N,"time":N,"data":``, or the packed-row prefix
with its ``dt`` list), it checks, without decoding the data:

* the line is newline-terminated and ends with ``}``, and a log-only line (not a surface event) of up
  to 64 KiB is well-formed JSON: checked by :class:`~dsh_jupyter.store.wellformed.WellFormed` without
  decoding it (a line it cannot vouch for is decoded in full), or by the marker pattern itself for the
  small turn and step markers;
* ``T`` is a known type, and ``seq`` (or ``seq0`` plus the member count taken from ``dt``) continues
  the log;
* for ``user/message``, ``assistant/message``, ``tool/result`` and ``system/message``: the envelope tail
  is exactly ``[,"sourceEventSeqs":[…]],"surfaceOp":<"append" | {"op":"replace","start":S,"end":E}>}``,
  and a replace op is checked against the surface fold (both ends on the surface, every shadowed seq
  cited).

Any line that does not fit these patterns (other key order, unknown or ignorable type, extra envelope
keys at the end, …) is decoded and validated in full, exactly like ``scan_events`` does. The surface
events that survive the fold and the latest title are then decoded and validated in full. What the
fast path does not check on lines it does not decode: the JSON inside ``data`` of a shadowed surface
event or of a log-only line over 64 KiB (damage in the middle of such a line that leaves its end intact),
the envelope contents beyond the prefix (e.g. a stray surfaceOp on a log-only line), the
``sourceEventSeqs`` of ``append`` nodes, and packed-row contents beyond the count of ``dt`` (on a row over
64 KiB, each comma in ``dt`` counts as a separator).
:meth:`JsonlStore.load` checks all of it. A line whose JSON the fast path does check is judged exactly as
decoding it would judge it.
"""

from __future__ import annotations

import io
import os
import re
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NoReturn, cast, overload

from .._json import loads
from ..session import (
    Event,
    ReplaceOp,
    SessionCorruptError,
    SessionFormatError,
    SessionHeader,
    SurfaceFold,
    SurfaceOp,
    events_from_record,
)
from ..session.events import KNOWN_TYPES, PACKED_ROW_TYPES, SESSION_TITLE, SURFACE_TYPES, SYSTEM_MESSAGE, TURN_END
from .longline import LONG_LINE_BYTES, RAW_LONG_STRINGS, long_record
from .wellformed import WellFormed

BLOCK_SIZE = 1 << 18

#: The most bytes a header line may take. A real header is a few hundred bytes (id, time, cwd); the
#: reader never reads further than this, so a header-less file, a 50 MB first line or a device that
#: never ends costs at most this much.
MAX_HEADER_BYTES = 1 << 20

#: The longest event line a reader accepts. Longer lines are damaged lines (like unparsable ones), and
#: reading one never buffers more than about this much: the rest of it is skipped block by block.
#: dsh writes nothing near this size: tool output keeps a bounded preview in the log (the full output
#: spills to a file in the session folder), and reference snapshots in the log are capped by their
#: byte budget (the full snapshot spills to a file too). Only a prompt or answer of tens of megabytes
#: in one message would reach it.
MAX_LINE_BYTES = 32 << 20

#: Log-only lines up to this size are still checked to be well-formed JSON by the fast path (cheap,
#: and it catches a line cut right after an inner ``}``); longer ones get only the prefix/suffix checks.
PARSE_MAX = 64 * 1024

_INT = rb"(?:0|[1-9][0-9]{0,15})"
#: The envelope prefix (type, seq, time, up to the data).
_ENVELOPE = re.compile(
    rb'\{"type":"([^"\\]{1,64})","seq":(0|[1-9][0-9]{0,15}),"time":(0|[1-9][0-9]{0,15}),"data":'
)
#: The rest of a line that holds one of the small data objects of the turn and step markers
#: (``{"turn":N[,"step":N][,"reason":{"kind":K}]}`` and the envelope's closing brace): a full match proves the
#: line is JSON, and it need not be checked again. A separate pattern, tried only on a short rest: an optional
#: tail group on :data:`_ENVELOPE` cost every line (also the long ones) more than the prefix itself.
_MARKER_DATA = re.compile(
    rb'\{"turn":' + _INT + rb'(?:,"step":' + _INT + rb')?(?:,"reason":\{"kind":"[a-z_-]{1,32}"\})?\}\}'
)
#: The longest rest :data:`_MARKER_DATA` can match (two 16-digit ints and a 32-letter kind, with the keys).
_MARKER_MAX = 112
_PACKED = re.compile(
    rb'\{"type":"(?:text-chunks|reasoning-chunks|tool-call-chunks)","seq0":(0|[1-9][0-9]{0,15}),'
    rb'"time0":(?:0|[1-9][0-9]{0,15}),"data":\{"turn":(?:null|[0-9]+),"step":(?:null|[0-9]+),'
    rb'"index":[0-9]+,"dt":\['
)
_DIGITS = b"0123456789"
_OP_KEY = b',"surfaceOp":'
_DATA_KEY = len(b',"data":')  # from the end of the time group to the data
_OP_TAIL = re.compile(
    rb',"surfaceOp":(?:"append"|\{"op":"replace","start":(0|[1-9][0-9]{0,15}),"end":(0|[1-9][0-9]{0,15})\})\}'
)
_CITED_KEY = b',"sourceEventSeqs":['
_SEQ_LIST = re.compile(rb"(?:[0-9]{1,16}(?:,[0-9]{1,16})*)?")

_FAST_PLAIN = frozenset(t.encode() for t in KNOWN_TYPES - SURFACE_TYPES)
_FAST_SURFACE = frozenset(t.encode() for t in SURFACE_TYPES | {SYSTEM_MESSAGE})
_TITLE_B = SESSION_TITLE.encode()
_TURN_END_B = TURN_END.encode()
_READABLE_TYPES = KNOWN_TYPES | {SYSTEM_MESSAGE} | set(PACKED_ROW_TYPES)
_CLOSE_BRACE = ord("}")
_CLOSE_BRACKET = ord("]")
_COMMA = ord(",")

HEADERLESS = "empty or header-less session log"


class _BadLine(Exception):
    """A committed-looking line that ends the readable prefix (internal)."""


@dataclass
class ScanResult:
    """What a scan found. ``committed_bytes`` is where a writer resuming the log truncates to."""

    path: str
    header: SessionHeader
    header_bytes: int
    committed_bytes: int
    file_size: int
    next_seq: int
    #: 1-based event line of the first bad line when a crash tail was tolerated, else ``None``.
    tail_line: int | None = None
    tail_reason: str | None = None
    events: list[Event] = field(default_factory=list)
    surface: list[Event] = field(default_factory=list)
    title: dict[str, Any] | None = None

    @property
    def last_seq(self) -> int | None:
        return self.next_seq - 1 if self.next_seq else None

    @property
    def torn_bytes(self) -> int:
        """Bytes after the committed prefix (torn final line and any tolerated crash tail)."""
        return self.file_size - self.committed_bytes


def read_header(fh: BinaryIO, path: str) -> tuple[SessionHeader, int]:
    """Read and validate the header line; returns the header and its length including the newline.

    Reads at most :data:`MAX_HEADER_BYTES` bytes (plus one), whatever the file holds."""
    fh.seek(0)
    line = bytearray()
    while True:
        chunk = fh.read(min(max(8192, len(line)), MAX_HEADER_BYTES + 1 - len(line)))
        if not chunk:
            raise SessionCorruptError(
                f"{HEADERLESS}: the first line is missing or has no newline. The file was cut while it was "
                "being created; move it aside (nothing else in it can be read).",
                path=path,
            )
        newline = chunk.find(b"\n")
        line += chunk if newline < 0 else chunk[:newline]
        if len(line) + (newline >= 0) > MAX_HEADER_BYTES:
            raise SessionCorruptError(
                f"{HEADERLESS}: the first line is longer than {MAX_HEADER_BYTES} bytes, so it is not a session "
                "header (a header is one short line). Move the file aside.",
                path=path,
            )
        if newline >= 0:
            break
    try:
        header = SessionHeader.from_line(bytes(line))
    except SessionFormatError as exc:
        raise SessionFormatError(f"{path}: {exc}") from None
    return header, len(line) + 1


#: Stands in for the bytes of a line longer than :data:`MAX_LINE_BYTES` (compared by identity).
OVERLONG = bytes(1)


class _Lines:
    """Newline-terminated lines of a file from ``offset`` on, read in blocks (no whole-file buffer).

    Yields ``(buf, start, end, file_offset)`` with the line at ``buf[start:end]`` (newline excluded). A line
    longer than ``max_line`` bytes is never held whole: it comes out as ``(OVERLONG, 0, length, offset)``.
    After iteration, ``torn`` holds the length of a final line without newline.
    """

    def __init__(self, fh: BinaryIO, offset: int, block_size: int = BLOCK_SIZE,
                 max_line: int | None = None) -> None:
        self.fh = fh
        self.offset = offset
        self.block_size = block_size
        self.max_line = MAX_LINE_BYTES if max_line is None else max_line
        self.torn = 0

    def __iter__(self) -> Iterator[tuple[bytes, int, int, int]]:
        fh = self.fh
        fh.seek(self.offset)
        base = self.offset  # file offset of the next line's first byte
        block = self.block_size
        max_line = self.max_line
        # The pieces read so far of a line that began in an earlier block: views of the blocks, so such a line is
        # copied once, when its pieces are joined.
        head: list[memoryview] = []
        held = 0  # its length so far
        skipping = False  # that line is overlong: its bytes are counted, never held
        want = block
        while True:
            chunk = fh.read(want)
            if not chunk:
                break
            pos = 0
            if held:
                newline = chunk.find(b"\n")
                if newline < 0:
                    held += len(chunk)
                    if not skipping and held > max_line:
                        skipping, head = True, []
                    elif not skipping:
                        head.append(memoryview(chunk))
                    # A line longer than a block: grow the read so a huge line costs few reads. Never more
                    # than the cap needs: a line is known to be overlong one byte past the cap.
                    want = block if skipping else max(block, min(held, max_line + 1 - held))
                    continue
                length = held + newline
                if skipping or length > max_line:
                    yield OVERLONG, 0, length, base
                else:
                    head.append(memoryview(chunk)[:newline])
                    yield b"".join(head), 0, length, base
                base += length + 1
                head, held, skipping = [], 0, False
                pos = newline + 1
            # Lines wholly inside this block come out as slices of it (no copy of the block).
            find = chunk.find
            newline = find(b"\n", pos)
            while newline >= 0:
                if newline - pos > max_line:
                    yield OVERLONG, 0, newline - pos, base
                else:
                    yield chunk, pos, newline, base
                base += newline - pos + 1
                pos = newline + 1
                newline = find(b"\n", pos)
            held = len(chunk) - pos
            if held > max_line:
                skipping = True
            elif held:
                head.append(memoryview(chunk)[pos:])
            want = block if skipping else max(block, min(held, max_line + 1 - held))
        self.torn = held


def _decode_line(line: bytes) -> list[Event]:
    """Decode and validate one line; :class:`_BadLine` when it is not a readable event line.

    An unknown, non-ignorable type raises :class:`SessionFormatError` (the caller refuses the log)."""
    try:
        record = loads(line)
    except ValueError as exc:
        raise _BadLine(f"cannot be parsed as JSON ({exc})") from None
    if isinstance(record, dict):
        kind = record.get("type")
        if isinstance(kind, str) and kind not in _READABLE_TYPES and record.get("ignorable") is not True:
            raise SessionFormatError(f"unknown event type {kind!r} that is not marked ignorable")
    try:
        events = events_from_record(record)
    except SessionFormatError as exc:
        raise _BadLine(f"is not a valid event ({exc})") from None
    except (RecursionError, MemoryError) as exc:  # a hostile record nested or sized past what checks survive
        raise _BadLine(f"is not a valid event ({_describe(exc)})") from None
    return events


def _describe(exc: BaseException) -> str:
    """Plain words for a decoder failure that is not a format error."""
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    if isinstance(exc, MemoryError):
        return "it is too large to decode"
    return str(exc)


def _overlong(length: int) -> str:
    return f"is {length} bytes long, over the {MAX_LINE_BYTES}-byte limit for one event line"


def _packed_members(buf: bytes, list_start: int, end: int) -> int:
    """How many events a packed row holds, from its ``dt`` list at ``buf[list_start:]`` (one delta per member
    after the first); 0 when the list holds anything but digits and commas or is not followed by more keys.

    Each comma counts as a separator: an empty entry (``[1,,2]``) is not JSON, which the caller checks on a row
    of up to :data:`PARSE_MAX` bytes; on a longer row the JSON inside ``data`` is not checked by the fast path
    (see the module notes), so neither is this."""
    close = buf.find(b"]", list_start, end)
    if close < 0 or close + 1 >= end or buf[close + 1] != _COMMA:
        return 0
    if close == list_start:
        return 1
    commas = buf[list_start:close].translate(None, _DIGITS)  # what is not a digit: only the separators, in a plain list
    if commas.translate(None, b","):
        return 0
    return len(commas) + 2


def _line_is_turn_end(line: bytes) -> bool:
    if _TURN_END_B not in line:
        return False
    try:
        record = loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("type") == TURN_END


class _Scanner:
    """State shared by both scans: seq continuity, the fold, the first bad line and its tail."""

    def __init__(self, path: str, header: SessionHeader, header_bytes: int) -> None:
        self.path = path
        self.header = header
        self.header_bytes = header_bytes
        self.committed = header_bytes
        self.next_seq = 0
        self.fold = SurfaceFold()
        self.bad_line: int | None = None
        self.bad_reason: str | None = None

    def admit(self, events: list[Event]) -> list[int]:
        """Seq continuity, citations and the fold for one decoded line (raises :class:`_BadLine`).

        Returns the seqs its surface ops shadowed."""
        expected = self.next_seq
        for offset, event in enumerate(events):
            if event.seq != expected + offset:
                raise _BadLine(f"breaks the seq sequence (expected {expected + offset}, got {event.seq})")
            if event.source_event_seqs is not None:
                later = [s for s in event.source_event_seqs if s >= event.seq]
                if later:
                    raise _BadLine(f"cites seq {later[0]}, which is not earlier than its own seq {event.seq}")
        shadowed: list[int] = []
        for event in events:
            if event.surface_op is not None:
                shadowed.extend(self.apply(event.seq, event.surface_op, event.source_event_seqs))
        return shadowed

    def apply(self, seq: int, op: Any, cited: Any) -> list[int]:
        try:
            return self.fold.apply(seq, op, cited)
        except SessionFormatError as exc:
            raise _BadLine(f"has a surface op the fold refuses ({exc})") from None

    def mark_bad(self, line_no: int, reason: str, line: bytes, *, tolerate: bool = False) -> None:
        self.bad_line, self.bad_reason = line_no, reason
        if not tolerate and _line_is_turn_end(line):
            self.corrupt(line_no)

    def check_tail(self, line_no: int, line: bytes) -> None:
        if _line_is_turn_end(line):
            self.corrupt(line_no)

    def corrupt(self, turn_end_line: int) -> NoReturn:
        assert self.bad_line is not None
        where = "itself a turn/end" if turn_end_line == self.bad_line else f"turn/end at line {turn_end_line}"
        raise SessionCorruptError(
            f"corrupt session log: event line {self.bad_line} {self.bad_reason}, but a completed turn is "
            f"recorded at or after it ({where}), so the damage is inside the committed log, before its last "
            "completed turn. Restore the file from a backup; if you have none, copy it aside and start a new "
            "session (lines are counted from 1 after the header).",
            path=self.path,
            line=self.bad_line,
        )

    def refuse(self, line_no: int, exc: SessionFormatError) -> NoReturn:
        raise SessionFormatError(
            f"{self.path}: event line {line_no} holds an {exc}. This log was written by a newer or different "
            "program; read it with a dsh-jupyter version that knows this event type."
        ) from None

    def result(self, file_size: int, **extra: Any) -> ScanResult:
        return ScanResult(self.path, self.header, self.header_bytes, self.committed, file_size, self.next_seq,
                          self.bad_line, self.bad_reason, **extra)


class EventStream:
    """Every event of a log in order, decoded and validated one line at a time (``load`` and
    :meth:`~dsh_jupyter.store.JsonlStore.stream_events`): iterating holds one line's events at a time.

    The header is read when the stream is made. The crash-tail rules are those of :func:`scan_events`: a bad
    line ends the events; a ``turn/end`` after it raises :class:`SessionCorruptError` during iteration (so a
    reader that writes as it goes must not publish before the iteration ends). :meth:`result` is valid once
    the iteration is done."""

    def __init__(self, fh: BinaryIO, path: str) -> None:
        self.header, header_bytes = read_header(fh, path)
        self._fh = fh
        self._scanner = _Scanner(path, self.header, header_bytes)

    def __iter__(self) -> Iterator[Event]:
        scanner = self._scanner
        line_no = 0
        for buf, start, end, offset in _Lines(self._fh, scanner.header_bytes):
            line_no += 1
            if buf is OVERLONG:
                if scanner.bad_line is None:
                    scanner.mark_bad(line_no, _overlong(end), b"")
                continue
            line = buf[start:end]
            if scanner.bad_line is not None:
                scanner.check_tail(line_no, line)
                continue
            try:
                decoded = _decode_line(line)
                scanner.admit(decoded)
            except _BadLine as exc:
                scanner.mark_bad(line_no, str(exc), line)
                continue
            except SessionFormatError as exc:
                scanner.refuse(line_no, exc)
            scanner.next_seq += len(decoded)
            scanner.committed = offset + (end - start) + 1
            yield from decoded

    def result(self, **extra: Any) -> ScanResult:
        return self._scanner.result(self._fh.seek(0, os.SEEK_END), **extra)


def scan_events(fh: BinaryIO, path: str) -> ScanResult:
    """Decode and validate every line (``load`` and ``open``)."""
    stream = EventStream(fh, path)
    events = list(stream)
    return stream.result(events=events)


#: A surface event the fold leaves undecoded (its type is in ``skip_data``), as the fold found it (its seq is the
#: key it is kept under): type, time, surface op and the ``sourceEventSeqs`` list (its text between the brackets,
#: ``None`` when the line has none or one the fast pattern does not read). Made into an :class:`Event` only when
#: the surface is read: most such lines of a long log (tool results) are shadowed by a later compaction before then.
Undecoded = tuple[bytes, bytes, SurfaceOp, bytes | None]


def _skipped_event(skipped: dict[int, Undecoded | Event], seq: int) -> Event:
    """The event (``data=None``) of a surviving line the fold left undecoded, made once and kept in its place."""
    found = skipped[seq]
    if isinstance(found, Event):
        return found
    kind, time_b, op, cited = found
    event = skipped[seq] = Event(kind.decode(), seq, int(time_b), None, op,
                                 None if cited is None else _parse_cited(cited))
    return event


@dataclass
class FoldState:
    """Where a surface scan (:func:`fold_lines`) stopped: everything needed to materialise the surface again
    without rescanning, or to continue the scan over lines appended since.

    ``locations`` maps each surviving surface seq to its line ``(offset, length, line_no)``; ``skipped``
    holds the surviving events left undecoded for ``skip_data``: each as the fold found it (:data:`Undecoded`)
    until :func:`surface_of` first makes it an event with ``data=None`` and keeps that event in its place (so
    every later read of the state shares it); ``line_no`` counts the event lines read so far. A state whose
    ``bad_line`` is set ended in a tolerated crash tail."""

    header: SessionHeader
    header_bytes: int
    committed: int
    file_size: int
    next_seq: int
    line_no: int
    nodes: list[int]
    locations: dict[int, tuple[int, int, int]]
    skipped: dict[int, Undecoded | Event]
    title_at: tuple[int, int, int] | None
    skip_data: frozenset[str]
    bad_line: int | None = None
    bad_reason: str | None = None

    def result(self, path: str, **extra: Any) -> ScanResult:
        return ScanResult(path, self.header, self.header_bytes, self.committed, self.file_size, self.next_seq,
                          self.bad_line, self.bad_reason, **extra)


def fold_lines(fh: BinaryIO, path: str, *, skip_data: frozenset[str] = frozenset(),
               resume: FoldState | None = None, stop_at_damage: bool = False) -> FoldState:
    """The scan of :func:`scan_surface` without materialising anything: it folds on seqs and records where
    the surviving surface lines and the latest title are.

    With ``resume`` (a state without a crash tail, over a file that only grew since), the scan continues at
    its committed offset; ``resume`` itself is left untouched. The caller vouches that the bytes before
    ``resume.committed`` did not change.

    ``stop_at_damage``: the first bad line ends the scan, whatever follows it (no
    :class:`SessionCorruptError`, and an unknown event type is a bad line too): the state then describes
    the readable prefix, with ``bad_line`` and ``bad_reason`` saying what stopped it. For a viewer that shows
    what can be read of a damaged log; never for a writer resuming it."""
    skip_data = folded_skips(skip_data)
    skip_b = frozenset(t.encode() for t in skip_data)
    if resume is None:
        header, header_bytes = read_header(fh, path)
        scanner = _Scanner(path, header, header_bytes)
        skipped: dict[int, Undecoded | Event] = {}
        locations: dict[int, tuple[int, int, int]] = {}  # surface seq -> (offset, length, line_no)
        title_at: tuple[int, int, int] | None = None
        line_no = 0
        next_seq = 0
    else:
        if resume.bad_line is not None or resume.skip_data != skip_data:
            raise ValueError("only a state without a crash tail, scanned for the same skip_data, can be resumed")
        scanner = _Scanner(path, resume.header, resume.header_bytes)
        scanner.committed = resume.committed
        for seq in resume.nodes:
            scanner.fold.apply(seq, "append")
        skipped = dict(resume.skipped)
        locations = dict(resume.locations)
        title_at = resume.title_at
        line_no = resume.line_no
        next_seq = resume.next_seq
    lines = iter(_Lines(fh, scanner.committed))
    envelope_match = _ENVELOPE.match
    marker_match = _MARKER_DATA.fullmatch
    marker_max = _MARKER_MAX
    packed_match = _PACKED.match
    tail_match = _OP_TAIL.match
    fast_plain = _FAST_PLAIN
    fast_surface = _FAST_SURFACE
    fold_apply = scanner.apply
    fold_append = scanner.fold.appender()
    parse_max = PARSE_MAX
    close_brace = _CLOSE_BRACE
    title_b = _TITLE_B
    well_formed = WellFormed().check
    # Lines follow each other: what is committed ends where the first bad line starts, or after the last line
    # (below), so a line that passes needs no bookkeeping for it.
    offset, size = scanner.committed - 1, 0
    # Up to the first bad line: every line is checked (the fast patterns first, else decoded in full).
    for buf, start, end, offset in lines:
        line_no += 1
        size = end - start
        if buf is OVERLONG:
            scanner.mark_bad(line_no, _overlong(size), b"", tolerate=stop_at_damage)
            break
        if size and buf[end - 1] == close_brace:
            match = envelope_match(buf, start, end)
            if match is not None:
                kind, seq_b = match.group(1, 2)
                data_at = match.end()
                if (kind in fast_plain and int(seq_b) == next_seq
                        and ((end - data_at <= marker_max and marker_match(buf, data_at, end) is not None)
                             or size > parse_max or well_formed(buf[start:end]))):
                    if kind == title_b:
                        title_at = (offset, size, line_no)
                    next_seq += 1
                    continue
                if kind in fast_surface and int(seq_b) == next_seq:
                    op_at = buf.rfind(_OP_KEY, match.end(3) + _DATA_KEY, end)
                    tail = tail_match(buf, op_at, end) if op_at > 0 else None
                    if tail is not None and tail.end() == end:
                        if tail.group(1) is None:
                            fold_append(next_seq)
                            locations[next_seq] = (offset, size, line_no)
                            if kind in skip_b:
                                skipped[next_seq] = (kind, match.group(3), "append",
                                                     _cited_list(buf, match.end(3) + _DATA_KEY, op_at))
                            next_seq += 1
                            continue
                        cited_b = _cited_list(buf, match.end(3) + _DATA_KEY, op_at)
                        cited = None if cited_b is None else _parse_cited(cited_b)
                        if cited is not None:
                            scanner.next_seq = next_seq
                            op = ReplaceOp(int(tail.group(1)), int(tail.group(2)))
                            try:
                                shadowed = fold_apply(next_seq, op, cited)
                            except _BadLine as exc:
                                scanner.mark_bad(line_no, str(exc), buf[start:end], tolerate=stop_at_damage)
                                break
                            for gone in shadowed:
                                locations.pop(gone, None)
                                skipped.pop(gone, None)
                            locations[next_seq] = (offset, size, line_no)
                            if kind in skip_b:
                                skipped[next_seq] = (kind, match.group(3), op, cited_b)
                            next_seq += 1
                            continue
            else:
                packed = packed_match(buf, start, end)
                if packed is not None and int(packed.group(1)) == next_seq:
                    members = _packed_members(buf, packed.end(), end)
                    if members and (size > parse_max or well_formed(buf[start:end])):
                        next_seq += members
                        continue
        # Slow path: decode this line in full.
        line = buf[start:end]
        scanner.next_seq = next_seq
        try:
            decoded = _decode_line(line)
            shadowed = scanner.admit(decoded)
        except _BadLine as exc:
            scanner.mark_bad(line_no, str(exc), line, tolerate=stop_at_damage)
            break
        except SessionFormatError as exc:
            if stop_at_damage:
                scanner.mark_bad(line_no, f"holds an {exc}", line, tolerate=True)
                break
            scanner.refuse(line_no, exc)
        for gone in shadowed:
            locations.pop(gone, None)
            skipped.pop(gone, None)
        for event in decoded:
            if event.surface_op is not None:
                locations[event.seq] = (offset, size, line_no)
            elif event.type == SESSION_TITLE:
                title_at = (offset, size, line_no)
        next_seq += len(decoded)
    else:
        offset += size + 1
    scanner.committed = offset
    # After a bad line: the rest is a crash tail unless a turn/end follows (then the log is corrupt).
    if not stop_at_damage:
        for buf, start, end, _offset in lines:
            line_no += 1
            if buf is not OVERLONG:
                scanner.check_tail(line_no, buf[start:end])
    return FoldState(scanner.header, scanner.header_bytes, scanner.committed, fh.seek(0, os.SEEK_END), next_seq,
                     line_no, scanner.fold.seqs, locations, skipped, title_at, skip_data, scanner.bad_line,
                     scanner.bad_reason)


def surface_of(fh: BinaryIO, path: str, state: FoldState, *, want_surface: bool = True, want_title: bool = True,
               stream: bool = False, decoded: Mapping[int, Event] | None = None,
               memo: dict[int, Event] | None = None, raw: bool = False) -> ScanResult:
    """Decode what a fold found: the surviving surface events (those in ``state.skipped`` come as they are)
    and the latest title. ``stream``: the surface is a read-only sequence decoded on access
    (:data:`STREAM_SURFACE`). ``decoded`` holds events already decoded from these very lines (a cache);
    ``memo``: a streamed surface adds each event it decodes there, by seq (for a cache to keep), but none it
    decoded with long strings left raw; ``raw``: :data:`~.longline.RAW_LONG_STRINGS`."""
    surface: list[Event] = []
    if want_surface:
        skipped, locations = state.skipped, state.locations
        known = decoded or {}
        entries = [_skipped_event(skipped, seq) if seq in skipped else known.get(seq) or (locations[seq], seq)
                   for seq in state.nodes]
        lazy = _LazySurface.open(fh, path, entries, memo, raw) if stream and entries else None
        # A lazy surface is a read-only Sequence; see STREAM_SURFACE.
        surface = cast("list[Event]", lazy) if lazy is not None else _decode_entries(fh, path, entries, raw)
    title: dict[str, Any] | None = None
    if want_title and state.title_at is not None:
        event = _decode_at(fh, path, state.title_at, None)
        title = event.data if isinstance(event.data, dict) else None
    return state.result(path, surface=surface, title=title)


def scan_surface(fh: BinaryIO, path: str, *, want_surface: bool = True, want_title: bool = True,
                 skip_data: frozenset[str] = frozenset()) -> ScanResult:
    """The fast path: fold on seqs, then decode only surviving surface events and the latest title.

    Surviving surface events whose type is in ``skip_data`` and whose line fits the fast pattern are not
    decoded at all: they come back with ``data=None`` (type, seq, time, surface op and cited seqs kept).
    With :data:`STREAM_SURFACE` in ``skip_data`` the surface is a read-only sequence decoded on access.
    """
    state = fold_lines(fh, path, skip_data=skip_data)
    return surface_of(fh, path, state, want_surface=want_surface, want_title=want_title,
                      stream=STREAM_SURFACE in skip_data, raw=RAW_LONG_STRINGS in skip_data)


def folded_skips(skip_data: Collection[str]) -> frozenset[str]:
    """The event types a fold skips: ``skip_data`` without the pseudo types that only say how the surface is
    decoded (:data:`STREAM_SURFACE`, :data:`~.longline.RAW_LONG_STRINGS`), so one fold serves them all."""
    return frozenset(skip_data) - {STREAM_SURFACE, RAW_LONG_STRINGS}


#: A pseudo event type for ``skip_data``: the surface then comes back as a read-only sequence that decodes
#: each event only when it is reached (from a private duplicate of the scanned file's descriptor), so a
#: caller that looks at one event at a time holds one decoded event at a time, whatever the log's size.
#: A line damaged inside its data then raises :class:`SessionCorruptError` during iteration, not from the scan.
STREAM_SURFACE = "dsh/stream-surface"

_Entry = Event | tuple[tuple[int, int, int], int]


class _LazySurface(Sequence[Event]):
    """Surface events decoded on access (see :data:`STREAM_SURFACE`)."""

    def __init__(self, fd: int, path: str, entries: list[_Entry], memo: dict[int, Event] | None = None,
                 raw: bool = False) -> None:
        self._fd = fd
        self._path = path
        self._entries = entries
        self._memo = memo
        self._raw = raw
        self._close = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, fh: BinaryIO, path: str, entries: list[_Entry], memo: dict[int, Event] | None = None,
             raw: bool = False) -> _LazySurface | None:
        """A lazy surface over ``fh``'s file, or ``None`` when ``fh`` has no descriptor to share. Each event it
        decodes is added to ``memo`` (by seq) when one is given; ``raw``: see :data:`RAW_LONG_STRINGS`."""
        try:
            fd = os.dup(fh.fileno())
        except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
            return None
        return cls(fd, path, entries, memo, raw)

    def _event(self, entry: _Entry) -> Event:
        if isinstance(entry, Event):
            return entry
        (offset, length, line_no), seq = entry
        memo = self._memo
        if memo is not None:
            known = memo.get(seq)
            if known is not None:
                return known
        line = os.pread(self._fd, length, offset)
        event = _decode_line_at(line, self._path, line_no, seq, self._raw)
        if memo is not None and not (self._raw and length > LONG_LINE_BYTES):  # raw strings are for this reader only
            memo[seq] = event
        return event

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self._event(e) for e in self._entries[index]]
        return self._event(self._entries[index])

    def __iter__(self) -> Iterator[Event]:
        for entry in self._entries:
            yield self._event(entry)


def _cited_list(buf: bytes, data_start: int, op_at: int) -> bytes | None:
    """The text of the envelope's ``sourceEventSeqs`` list right before ``surfaceOp`` (between its brackets);
    ``None`` when it is not there."""
    if buf[op_at - 1] != _CLOSE_BRACKET:
        return None
    key_at = buf.rfind(_CITED_KEY, data_start, op_at)
    return None if key_at < 0 else buf[key_at + len(_CITED_KEY) : op_at - 1]


def _parse_cited(body: bytes) -> tuple[int, ...] | None:
    """The seqs of a ``sourceEventSeqs`` list's text; ``None`` when it is not a plain list of seqs."""
    if _SEQ_LIST.fullmatch(body) is None:
        return None
    return tuple(map(int, body.split(b","))) if body else ()


#: Surviving lines closer together than this are read in one ``pread`` (the gap is read and dropped: lines
#: between them, also surviving ones whose data is skipped); about what one more ``pread`` costs in copying ...
READ_GAP = 16 * 1024
#: ... as long as one read stays within this many bytes (a single longer line is read alone).
READ_WINDOW = 4 << 20


def _decode_entries(fh: BinaryIO, path: str, entries: list[_Entry], raw: bool = False) -> list[Event]:
    """The events of ``entries`` in order: the lines to decode are read in runs of neighbours (one ``pread`` a
    run of at most :data:`READ_WINDOW` bytes), not one seek and read a line."""
    try:
        fd = fh.fileno()
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return [entry if isinstance(entry, Event) else _decode_at(fh, path, *entry, raw) for entry in entries]
    out: list[Event] = []
    index, count = 0, len(entries)
    while index < count:
        entry = entries[index]
        if isinstance(entry, Event):
            out.append(entry)
            index += 1
            continue
        # A run: this line and the next ones to decode that lie close after it. Events kept as they are (data
        # skipped) may sit in between: their lines are read with the gap and dropped.
        first = entry[0][0]
        stop, last_end = index + 1, first + entry[0][1]
        while stop < count:
            after = entries[stop]
            if not isinstance(after, Event):
                offset, length, _line = after[0]
                if offset < last_end or offset - last_end > READ_GAP or offset + length - first > READ_WINDOW:
                    break
                last_end = offset + length
            stop += 1
        while isinstance(entries[stop - 1], Event):  # a run ends on a line it decodes
            stop -= 1
        block = os.pread(fd, last_end - first, first)
        for item in entries[index:stop]:
            if isinstance(item, Event):
                out.append(item)
            else:
                (offset, length, line_no), seq = item
                out.append(_decode_line_at(block[offset - first : offset - first + length], path, line_no, seq, raw))
        index = stop
    return out


def _decode_at(fh: BinaryIO, path: str, where: tuple[int, int, int], seq: int | None, raw: bool = False) -> Event:
    """Re-read one committed line (found by a scan) and decode it in full."""
    offset, length, line_no = where
    fh.seek(offset)
    return _decode_line_at(fh.read(length), path, line_no, seq, raw)


def _decode_line_at(line: bytes, path: str, line_no: int, seq: int | None, raw: bool = False) -> Event:
    """Decode one committed line found by a scan: its event ``seq`` (the last one for ``None``). ``raw``: a line
    over :data:`~.longline.LONG_LINE_BYTES` keeps its long strings undecoded where it can (:mod:`.longline`)."""
    events: list[Event] | None = None
    if raw and len(line) > LONG_LINE_BYTES:
        record = long_record(line)
        if record is not None:
            try:
                events = events_from_record(record)
            except (SessionFormatError, RecursionError, MemoryError):
                events = None  # decoded in full below, which says what is wrong exactly as a full read does
    try:
        if events is None:
            events = events_from_record(loads(line))
    except (ValueError, SessionFormatError, RecursionError, MemoryError) as exc:
        raise SessionCorruptError(
            f"corrupt session log: event line {line_no} cannot be decoded ({_describe(exc)}). Restore the file from a "
            "backup, or copy it aside and start a new session.",
            path=path,
            line=line_no,
        ) from None
    if seq is None:
        return events[-1]
    for event in events:
        if event.seq == seq:
            return event
    raise SessionCorruptError(  # pragma: no cover - the scan saw this seq on this line
        f"event line {line_no} no longer holds seq {seq}; the file changed while it was read", path=path, line=line_no
    )
