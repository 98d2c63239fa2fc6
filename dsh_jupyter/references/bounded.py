"""Bounded projection: what retention and a capped spill need from one source, in bounded memory.

A reference to a huge session must not hold that session. :class:`BoundedProjection` takes projected
messages one at a time (streamed from the store's surface) and keeps only:

* for every message: its role, whether it is a compaction checkpoint, its UTF-8 size and its tag-safe
  JSON size (compact arrays, a few bytes a message);
* the text of every message retention could keep: the latest message, every checkpoint, and the most
  recent other messages whose JSON sizes add up to at most the budget (retention drops the oldest
  first, so whatever it keeps is among these). A text larger than the budget can only be kept cut,
  and a cut keeps at most half the budget from each end, so of such a text only its first and last
  ``budget // 2 + 8`` bytes are held;
* the first ``spill_bytes`` bytes of text, in order, for the capped full snapshot (see :mod:`.spill`).

So a reference holds about ``2 × budget + spill_bytes`` bytes of text plus a few bytes a message,
whatever the size of the source. Messages are measured and clipped as soon as they arrive: a single
huge message is never kept whole.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..session.longtext import LongText
from ..session.projection import (
    ASSISTANT,
    USER,
    LongMessage,
    ProjectedMessage,
    ProjectedSession,
    format_version,
    source_data,
)
from ..session.projection import (
    project_long_event as project_event,  # the one seam bound_surface projects through (a test stands in for it)
)
from .framing import tag_safe_string_size
from .utf8 import head_end, js_utf8, tag_safe_size_of_utf8

if TYPE_CHECKING:
    from ..session.surface import SurfaceSnapshot

#: Bytes held from each end of a text longer than the budget, beyond half the budget.
CLIP_SLACK = 8

_ASSISTANT_FLAG = 1
_CHECKPOINT_FLAG = 2


@dataclass(frozen=True)
class HeldText:
    """One message's text as retention may use it: whole (``text``), or only its two ends.

    ``head`` and ``tail`` are the first and last bytes of the text's UTF-8 (as JavaScript encodes it)
    when ``text`` is ``None``; ``utf8_bytes`` is the whole text's size either way."""

    role: str
    checkpoint: bool
    utf8_bytes: int
    text: str | None
    head: bytes = b""
    tail: bytes = b""


@dataclass(frozen=True)
class SpillPart:
    """A message of the spill's prefix: ``text`` is all of it when ``whole``, else its first bytes. ``plain``: the
    text is known to hold no lone surrogate (it was encoded to UTF-8 without error), so JavaScript sees it as it is
    (:func:`~dsh_jupyter._json.js_string` would leave it unchanged)."""

    role: str
    text: str
    whole: bool
    plain: bool = False


class BoundedProjection:
    """A source's projection reduced to what a reference to it can use (see the module notes).

    ``budget`` is the largest per-source budget retention may be asked to meet; ``spill_bytes`` caps
    the text kept for the full snapshot (``None``: keep all of it, for sources already in memory).
    ``source_key`` is the snapshot's :attr:`~dsh_jupyter.session.SurfaceSnapshot.source_key` (what the reader
    vouches the source's bytes were): a saved spill of the same key can be used again (:mod:`.reuse`).
    """

    source_key: Hashable | None = None

    def __init__(self, session_id: str, cwd: str | None, captured_through_seq: int | None, format_version: int,
                 *, budget: int, spill_bytes: int | None) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.captured_through_seq = captured_through_seq
        self.format_version = format_version
        self.budget = budget
        self.spill_bytes = spill_bytes
        self.flags = bytearray()
        self.text_bytes = array("q")
        self.json_sizes = array("q")
        self.held: dict[int, HeldText] = {}
        self.spill: list[SpillPart] = []
        self.spill_text_bytes = 0
        self.total_text_bytes = 0
        self._spill_room = spill_bytes
        self._window: deque[int] = deque()
        self._window_size = 0
        self._latest: int | None = None
        self._clip = budget // 2 + CLIP_SLACK

    # -- facts ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.flags)

    @property
    def compacted(self) -> bool:
        return any(flag & _CHECKPOINT_FLAG for flag in self.flags)

    @property
    def spill_complete(self) -> bool:
        """Whether the spill prefix holds every message whole."""
        return len(self.spill) == len(self.flags) and all(part.whole for part in self.spill)

    def held_text_bytes(self) -> int:
        """About how many bytes of text the projection holds (its spill prefix and the texts retention may keep)."""
        return self.spill_text_bytes + sum(len(h.head) + len(h.tail) if h.text is None else h.utf8_bytes
                                           for h in self.held.values())

    def role(self, index: int) -> str:
        return ASSISTANT if self.flags[index] & _ASSISTANT_FLAG else USER

    def checkpoint(self, index: int) -> bool:
        return bool(self.flags[index] & _CHECKPOINT_FLAG)

    def data(self, label: str, messages: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        """The source's JSON object with ``messages`` (default: the spill prefix's texts)."""
        pairs = messages if messages is not None else [(part.role, part.text) for part in self.spill]
        return source_data(self.session_id, label, self.cwd, self.captured_through_seq, pairs)

    # -- intake --------------------------------------------------------------------------------------
    def add(self, message: ProjectedMessage | LongMessage) -> None:
        """Measure one projected message (in model order), keeping only the text described above.

        A :class:`~dsh_jupyter.session.projection.LongMessage` is measured a piece at a time, and its text is
        built whole only where it is kept whole (when it fits the budget or the spill's room)."""
        clip = self._clip
        if isinstance(message, LongMessage):
            long_text = message.text
            measured = _measure_pieces(long_text, max(clip, self._spill_room or 0), clip)
            plain = False  # not looked for: a long text is measured a piece at a time
            room = self._spill_room
            whole = room is None or measured.size <= max(self.budget, room)
            text = long_text.text() if whole else ""
        else:
            text = message.text
            found = _measure(text, max(clip, self._spill_room or 0), clip)  # None: the text holds lone surrogates
            plain = found is not None
            measured = found if found is not None else _measure_whole(text)
            del found  # one name for the measure: it holds the text's bytes, dropped below
        size = measured.size
        index = len(self.flags)
        self.flags.append((_ASSISTANT_FLAG if message.role == ASSISTANT else 0)
                          | (_CHECKPOINT_FLAG if message.checkpoint else 0))
        self.text_bytes.append(size)
        self.json_sizes.append(measured.json_size)
        self.total_text_bytes += size
        self._add_to_spill(message.role, text, size, measured.head, plain=plain)
        if size <= self.budget:
            held = HeldText(message.role, message.checkpoint, size, text)
        else:
            held = HeldText(message.role, message.checkpoint, size, None, measured.head[:clip],
                            measured.tail[len(measured.tail) - clip :])
        del measured
        previous = self._latest
        if previous is not None and not self.checkpoint(previous):
            self._window.append(previous)
            self._window_size += self.json_sizes[previous]
            while self._window_size > self.budget:
                dropped = self._window.popleft()
                self._window_size -= self.json_sizes[dropped]
                del self.held[dropped]
        self._latest = index
        self.held[index] = held

    def _add_to_spill(self, role: str, text: str, size: int, head: bytes, *, plain: bool) -> None:
        """``head``: at least the first ``min(size, room)`` bytes of the text's UTF-8. ``text`` may be "" for a
        text over both the budget and the spill's room (a long message): only its ``head`` is used then.
        ``plain``: ``text`` holds no lone surrogate (see :class:`SpillPart`)."""
        room = self._spill_room
        if room is None:
            self.spill.append(SpillPart(role, text, True, plain))
            self.spill_text_bytes += size
            return
        if room <= 0:
            return
        if size <= room:
            self.spill.append(SpillPart(role, text, True, plain))
            self.spill_text_bytes += size
            self._spill_room = room - size
            return
        end = head_end(head, room)  # decoded with replacement characters: no lone surrogate can come out
        self.spill.append(SpillPart(role, head[:end].decode("utf-8", errors="replace"), False, True))
        self.spill_text_bytes += end
        self._spill_room = 0


#: Code points encoded at a time when measuring a long text.
MEASURE_SLICE = 1 << 20


@dataclass(frozen=True)
class _Measure:
    size: int
    json_size: int
    head: bytes  # at least the first bytes asked for (all of them for a short text)
    tail: bytes  # at least the last bytes asked for


def _measure(text: str, head: int, tail: int) -> _Measure | None:
    """UTF-8 and tag-safe JSON sizes of ``text`` and its first ``head`` and last ``tail`` bytes, encoding
    at most :data:`MEASURE_SLICE` code points at a time (so a huge text is never copied whole); ``None``
    when the text holds lone surrogates."""
    try:
        if len(text) <= MEASURE_SLICE:
            data = text.encode("utf-8")
            return _Measure(len(data), tag_safe_size_of_utf8(data), data, data)
        size = 0
        json_size = 2
        for start in range(0, len(text), MEASURE_SLICE):
            piece = text[start : start + MEASURE_SLICE].encode("utf-8")
            size += len(piece)
            json_size += tag_safe_size_of_utf8(piece) - 2
        return _Measure(size, json_size, _encoded_head(text, head), text[-tail:].encode("utf-8")[-tail:])
    except UnicodeEncodeError:
        return None


def _measure_whole(text: str) -> _Measure:
    """:func:`_measure` of a text with lone surrogates, on one JavaScript-style copy."""
    data = js_utf8(text)
    return _Measure(len(data), tag_safe_string_size(text), data, data)


def _measure_pieces(text: LongText, head: int, tail: int) -> _Measure:
    """:func:`_measure` of a text read a piece at a time (never built whole): pieces hold whole characters and
    never split a surrogate pair, so their sizes add up to the whole text's."""
    size = 0
    json_size = 2
    first = bytearray()
    for piece in text.pieces():
        measured = _measure(piece, 0, 0) or _measure_whole(piece)
        size += measured.size
        json_size += measured.json_size - 2
        if len(first) < head:
            first += js_utf8(piece[:head])[: head - len(first)]
    last: list[bytes] = []
    held = 0
    for piece in text.pieces_from_end():
        if held >= tail:
            break
        data = js_utf8(piece[-tail:])
        last.append(data)
        held += len(data)
    ends = b"".join(reversed(last))
    return _Measure(size, json_size, bytes(first), ends[max(0, len(ends) - tail) :] if tail else b"")


def _encoded_head(text: str, size: int) -> bytes:
    """At least the first ``size`` bytes of ``text``'s UTF-8 (all of it when shorter), encoded
    :data:`MEASURE_SLICE` code points at a time: a huge text is neither copied nor encoded whole."""
    head = bytearray()
    # Every code point takes at least one byte, so ``size`` code points always give ``size`` bytes.
    for start in range(0, min(len(text), size), MEASURE_SLICE):
        if len(head) >= size:
            break
        head += text[start : min(start + MEASURE_SLICE, size)].encode("utf-8")
    del head[size:]
    return bytes(head)


def bound_messages(messages: Iterable[ProjectedMessage], projection: BoundedProjection) -> BoundedProjection:
    """Feed ``messages`` into ``projection``; returns it."""
    for message in messages:
        projection.add(message)
    return projection


def bound_projection(projection: ProjectedSession, budget: int, spill_bytes: int | None = None) -> BoundedProjection:
    """A projection already in memory, reduced for a ``budget`` (its spill prefix keeps every message)."""
    bounded = BoundedProjection(projection.session_id, projection.cwd, projection.captured_through_seq,
                                projection.format_version, budget=budget, spill_bytes=spill_bytes)
    return bound_messages(projection.messages, bounded)


class ReadAbandoned(Exception):
    """The preparation this read was for was cancelled; nobody waits for the result."""


def bound_surface(snapshot: SurfaceSnapshot, budget: int, spill_bytes: int | None,
                  abandoned: Callable[[], bool] | None = None) -> BoundedProjection:
    """Project a ``read_surface`` snapshot one event at a time (its events may be decoded lazily).

    ``abandoned`` is polled between events: when it turns true the read stops (:class:`ReadAbandoned`)
    instead of decoding the rest of a huge log for nobody."""
    header = snapshot.header
    bounded = BoundedProjection(header.id, header.cwd, snapshot.captured_through_seq, format_version(header),
                                budget=budget, spill_bytes=spill_bytes)
    bounded.source_key = getattr(snapshot, "source_key", None)
    for event in snapshot.events:
        if abandoned is not None and abandoned():
            raise ReadAbandoned(header.id)
        message = project_event(event)  # a LongMessage for a text the store left undecoded (RAW_LONG_STRINGS)
        if message is not None:
            bounded.add(message)
    return bounded
