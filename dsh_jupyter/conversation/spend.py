"""What a session's model calls cost, summed: the one rule behind every per-session cost shown
(``%dsh sessions``, ``dsh-jupyter sessions list``/``show``, the REST sessions list, the catalogs).

A session's cost is the sum of the ``cost`` its ``assistant/message`` events' usage objects carry (computed
from the model's prices, or reported by the provider). Unknown stays unknown: a session none of whose model
calls had a cost shows nothing; one whose every priced call was free shows ``free``; one mixing priced and
unpriced calls shows the known sum as a lower bound (``≥ $0.0042``). Compaction never lowers the total: calls
a summary replaced on the surface were still paid for, so every assistant message of the log counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TypedDict

from .._json import loads
from ..session.events import ASSISTANT_MESSAGE
from .usage import format_cost, usage_cost

_MARK = b'"' + ASSISTANT_MESSAGE.encode() + b'"'
# The lines our writer makes: the turn first in the data, then the usage either right after the step or as the
# data's last key (a flat object, so what follows it is known exactly: a nested "usage" never matches).
_HEAD = re.compile(rb'\{"type":"assistant/message","seq":\d{1,16},"time":\d{1,16},"data":\{"turn":(\d{1,16})(?=[,}])'
                   rb'(?:,"step":\d{1,16},"usage":(\{[^{}]*\}))?')
_TAIL = re.compile(rb'"usage":(\{[^{}]*\})\},"surfaceOp":"append"\}\Z')
_USAGE_KEY = b'"usage":'


class SpendJson(TypedDict):
    """A session's cost on the wire: ``usd`` is the sum of the known costs (a lower bound when
    ``unpricedCalls`` > 0); ``text`` is how it is shown (``free``, ``$0.0042``, ``≥ $0.0042``)."""

    usd: float
    pricedCalls: int
    unpricedCalls: int
    text: str


@dataclass(frozen=True)
class Spend:
    """The cost of some model calls: ``usd`` summed over the ``priced`` calls that had a cost; ``unpriced``
    calls had none (the provider reported no usage, or the model's prices are unknown)."""

    usd: float = 0.0
    priced: int = 0
    unpriced: int = 0

    def add(self, usage: object) -> Spend:
        """These calls plus one more, whose ``usage`` object (session format, or ``None``) is given."""
        cost = usage_cost(usage)
        if cost is None:
            return Spend(self.usd, self.priced, self.unpriced + 1)
        return Spend(self.usd + cost, self.priced + 1, self.unpriced)

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.usd + other.usd, self.priced + other.priced, self.unpriced + other.unpriced)

    @property
    def known(self) -> bool:
        """Whether any call had a cost (otherwise nothing is shown: never a guessed $0)."""
        return self.priced > 0

    def text(self) -> str:
        """``""`` (no call had a cost), ``free``, ``$0.0042``, or ``≥ $0.0042`` when some calls had no cost."""
        if not self.known:
            return ""
        if self.unpriced:
            return "≥ " + (format_cost(self.usd) if self.usd > 0 else "$0")
        return format_cost(self.usd)

    def to_json(self) -> SpendJson | None:
        """The wire form, or ``None`` when no call had a cost (the field is then left out)."""
        if not self.known:
            return None
        return {"usd": round(self.usd, 10), "pricedCalls": self.priced, "unpricedCalls": self.unpriced,
                "text": self.text()}

    @classmethod
    def from_json(cls, record: object) -> Spend:
        """A :meth:`to_json` record back (anything else: no known cost)."""
        if not isinstance(record, Mapping):
            return cls()
        usd, priced, unpriced = record.get("usd"), record.get("pricedCalls"), record.get("unpricedCalls")
        if (usage_cost({"cost": usd}) is None or not _count(priced) or not _count(unpriced)):
            return cls()
        return cls(float(usd), int(priced), int(unpriced))  # type: ignore[arg-type]


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def message_usage(data: object) -> tuple[int | None, object]:
    """``(turn, usage)`` of an ``assistant/message`` event's data (``None`` where absent)."""
    if not isinstance(data, Mapping):
        return None, None
    turn = data.get("turn")
    return (turn if _count(turn) else None), data.get("usage")


def line_usage(line: bytes) -> tuple[int | None, object] | None:
    """``(turn, usage)`` when the log line is an ``assistant/message`` event, else ``None``. Lines that do
    not name the type are never decoded, so a log's tool output costs a substring search only."""
    if _MARK not in line:
        return None
    head = _HEAD.match(line)
    if head is not None:  # the usual shape: only the usage object is decoded
        usage = head.group(2)
        if usage is None:
            tail = _TAIL.search(line, len(line) - 4096 if len(line) > 4096 else 0)
            usage = tail.group(1) if tail is not None else None
        if usage is not None:
            try:
                return int(head.group(1)), loads(usage)
            except (ValueError, RecursionError):
                pass
        elif _USAGE_KEY not in line:
            return int(head.group(1)), None
    try:
        record = loads(line)
    except (ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(record, dict) or record.get("type") != ASSISTANT_MESSAGE:
        return None
    return message_usage(record.get("data"))


class Buffer(Protocol):
    """Bytes to search: ``bytes``, or an ``mmap`` of a log (searched in place, never copied whole)."""

    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...

    def rfind(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...

    def __getitem__(self, index: slice, /) -> bytes: ...


def usages_in(buf: Buffer, start: int = 0, stop: int | None = None) -> Iterator[tuple[int | None, object]]:
    """``(turn, usage)`` of each ``assistant/message`` line of the log lines in ``buf[start:stop]``, in order.
    The type is searched for in the whole stretch at once, so only those lines are ever looked at one by one."""
    end_of = len(buf) if stop is None else stop  # type: ignore[arg-type]
    find, rfind = buf.find, buf.rfind
    at = find(_MARK, start, end_of)
    while at >= 0:
        begin = max(rfind(b"\n", start, at) + 1, start)
        end = find(b"\n", at, end_of)
        if end < 0:
            end = end_of
        found = line_usage(buf[begin:end])
        if found is not None:
            yield found
        at = find(_MARK, end, end_of)


def usages_in_file(fh: BinaryIO, chunk: int = 1 << 20) -> Iterator[tuple[int | None, object]]:
    """:func:`usages_in` over a log file read ``chunk`` bytes at a time from where it stands, so a big log is
    never held whole (a line longer than a chunk is held until its end is read)."""
    carry = b""
    while block := fh.read(chunk):
        buf = carry + block if carry else block
        cut = buf.rfind(b"\n") + 1
        if cut:
            yield from usages_in(buf, 0, cut)
        carry = buf[cut:]
    if carry:
        yield from usages_in(carry)


def spend_of_buffer(buf: Buffer, start: int = 0, stop: int | None = None) -> Spend:
    """The cost of the model calls among the log lines in ``buf[start:stop]`` (:func:`usages_in`)."""
    return _summed(usage for _turn, usage in usages_in(buf, start, stop))


def _summed(usages: Iterable[object]) -> Spend:
    """The cost of the model calls whose usage objects are ``usages`` (one :class:`Spend` made at the end)."""
    usd, priced, unpriced = 0.0, 0, 0
    for usage in usages:
        cost = usage_cost(usage)
        if cost is None:
            unpriced += 1
        else:
            usd, priced = usd + cost, priced + 1
    return Spend(usd, priced, unpriced)


def spend_of_lines(lines: Iterable[bytes]) -> Spend:
    """The cost of the model calls among a log's lines."""
    return _summed(found[1] for line in lines if (found := line_usage(line)) is not None)


def spend_of_events(events: Iterable[object]) -> Spend:
    """The cost of the model calls among decoded events (an in-memory log's, a scan's surface)."""
    return _summed(message_usage(getattr(event, "data", None))[1] for event in events
                   if getattr(event, "type", None) == ASSISTANT_MESSAGE)


def spend_of_log(log: object) -> Spend:
    """The cost of an in-memory log's model calls (:class:`~dsh_jupyter.session.SessionLog`'s ``events``;
    an object without events has no known cost)."""
    events = getattr(log, "events", None)
    if callable(events):
        events = events()
    return spend_of_events(events) if isinstance(events, Iterable) else Spend()


def spend_by_turn(usages: Iterable[tuple[int | None, object]]) -> Iterator[tuple[int | None, Spend]]:
    """Each turn's cost in log order, from ``(turn, usage)`` pairs (consecutive calls of a turn summed)."""
    current: tuple[int | None, Spend] | None = None
    for turn, usage in usages:
        if current is not None and current[0] == turn:
            current = (turn, current[1].add(usage))
            continue
        if current is not None:
            yield current
        current = (turn, Spend().add(usage))
    if current is not None:
        yield current


__all__ = ["Spend", "SpendJson", "line_usage", "message_usage", "spend_by_turn", "spend_of_buffer",
           "spend_of_events", "spend_of_lines", "spend_of_log", "usages_in", "usages_in_file"]
