"""Retention: fit one source's snapshot into its byte budget, exactly as the reference harness does.

The budget is the UTF-8 size of the source's tag-safe JSON object. Phase 1 drops whole messages, oldest
first, never a compaction checkpoint and never the newest message. Phase 2 then repeatedly takes the
message with the most text bytes (earliest on a tie) and re-cuts its *original* text to
``max(0, its bytes - overflow)`` bytes, keeping a head and a tail plus an omission notice. The cut
target is counted in raw text bytes while the size counts escaped JSON, so text that grows when
escaped may need several rounds and can end up empty. Byte counts follow JavaScript: a lone UTF-16
surrogate counts 3 bytes (it encodes as U+FFFD) and becomes U+FFFD when its text is cut.

The notice is ours, but it keeps the reference's size (31 bytes plus the digits of the count), so
every budget outcome - which message is cut, where, and the final sizes - matches the reference's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._json import js_string
from .framing import tag_safe_dumps, tag_safe_string_size
from .projection import ProjectedSession

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def omission_notice(omitted: int) -> str:
    """The line appended to a cut text: ``\\n[… N UTF-8 bytes omitted …]`` (31 bytes plus N's digits)."""
    return f"\n[\u2026 {omitted} UTF-8 bytes omitted \u2026]"


_NOTICE_BYTES = len(omission_notice(0).encode("utf-8")) - 1
assert _NOTICE_BYTES == 31, "the omission notice must keep the reference's length"


def js_utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text`` as JavaScript's encoder produces them (lone surrogates become U+FFFD)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", js_string(text)).encode("utf-8")


def js_utf8_length(text: str) -> int:
    """``Buffer.byteLength(text, 'utf8')``."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return len(js_string(text).encode("utf-8", "surrogatepass"))


def _head_end(data: bytes, end: int) -> int:
    """Drop a trailing incomplete UTF-8 sequence from ``data[:end]``; returns the new end."""
    if end <= 0:
        return end
    i = end - 1
    while i >= 0 and data[i] & 0xC0 == 0x80 and end - i <= 3:
        i -= 1
    if i < 0:
        return end
    lead = data[i]
    expected = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4 if lead < 0xF8 else 0
    if expected == 0:
        return end
    return i if end - i < expected else end


def _tail_start(data: bytes, start: int) -> int:
    """Drop leading continuation bytes from ``data[start:]``; returns the new start."""
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return start


def truncate_with_notice(text: str, max_bytes: int, *, encoded: bytes | None = None) -> tuple[str, int]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes: head + tail + notice; ``(text, omitted bytes)``.

    A binary search over the retained byte count ``r`` keeps the first ``ceil(r/2)`` and the last
    ``floor(r/2)`` bytes (trimmed to character boundaries) and the largest ``r`` whose result fits wins.
    When not even the bare notice fits, the result is ``''`` with every byte omitted.
    """
    data = js_utf8(text) if encoded is None else encoded
    total = len(data)
    if total <= max_bytes:
        return text, 0
    best: tuple[int, int] | None = None  # (head end, tail start) of the best fit
    low, high = 0, max_bytes
    while low <= high:
        retained = (low + high) // 2
        head_end = _head_end(data, (retained + 1) // 2)
        tail_start = _tail_start(data, total - retained // 2)
        kept = head_end + (total - tail_start)
        omitted = total - kept
        if kept + _NOTICE_BYTES + len(str(omitted)) <= max_bytes:
            best = (head_end, tail_start)
            low = retained + 1
        else:
            high = retained - 1
    if best is None:
        return "", total
    head_end, tail_start = best
    omitted = total - head_end - (total - tail_start)
    kept_text = data[:head_end].decode("utf-8", errors="replace") + data[tail_start:].decode("utf-8", errors="replace")
    return kept_text + omission_notice(omitted), omitted


@dataclass(frozen=True)
class RetentionStats:
    """Per-source retention facts, stored in the context message's source metadata."""

    compacted: bool
    original_messages: int
    retained_messages: int
    omitted_messages: int
    omitted_bytes: int

    @property
    def truncated(self) -> bool:
        return self.omitted_messages > 0 or self.omitted_bytes > 0

    def to_json(self) -> dict[str, Any]:
        """``compacted, originalMessages, retainedMessages, omittedMessages, omittedBytes, truncated``."""
        return {
            "compacted": self.compacted,
            "originalMessages": self.original_messages,
            "retainedMessages": self.retained_messages,
            "omittedMessages": self.omitted_messages,
            "omittedBytes": self.omitted_bytes,
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class RetainedSource:
    """One source fitted to its budget: the preview object, its tag-safe JSON and the full projection."""

    projection: ProjectedSession
    label: str
    data: dict[str, Any]
    serialized: str
    stats: RetentionStats

    @property
    def size(self) -> int:
        return len(self.serialized.encode("utf-8"))

    @property
    def full_data(self) -> dict[str, Any]:
        return self.projection.data(self.label)


class _Unit:
    __slots__ = ("role", "original", "checkpoint", "text", "text_bytes", "json_size", "omitted", "original_bytes")

    def __init__(self, role: str, text: str, checkpoint: bool, overhead: int) -> None:
        self.role = role
        self.original = text
        self.checkpoint = checkpoint
        self.text = text
        self.text_bytes = js_utf8_length(text)
        self.json_size = overhead + tag_safe_string_size(text)
        self.omitted = 0
        self.original_bytes: bytes | None = None


def retain_source(projection: ProjectedSession, label: str, max_bytes: int) -> RetainedSource | None:
    """Fit ``projection`` (labelled ``label``) into ``max_bytes``; ``None`` when even the minimum does not fit."""
    overhead = {
        role: len(tag_safe_dumps({"role": role, "text": ""}).encode("utf-8")) - 2 for role in ("user", "assistant")
    }
    units = [_Unit(m.role, m.text, m.checkpoint, overhead[m.role]) for m in projection.messages]
    fixed = len(tag_safe_dumps(projection.data(label, [])).encode("utf-8"))

    retained = units
    count = len(units)
    total_units = sum(u.json_size for u in units)

    def size() -> int:
        return fixed + total_units + max(0, count - 1)

    # Phase 1: drop whole messages, oldest first, sparing checkpoints and the newest message. Sizes
    # only shrink, so one pass in order drops exactly what "drop the first droppable while too big" does.
    omitted_messages = 0
    dropped_bytes = 0
    if units and size() > max_bytes:
        newest = units[-1]
        retained = []
        for unit in units:
            if unit is not newest and not unit.checkpoint and size() > max_bytes:
                count -= 1
                total_units -= unit.json_size
                omitted_messages += 1
                dropped_bytes += unit.text_bytes
            else:
                retained.append(unit)

    # Phase 2: re-cut the longest remaining text until the object fits.
    while size() > max_bytes:
        longest: _Unit | None = None
        for unit in retained:
            if unit.text_bytes > (longest.text_bytes if longest is not None else 0):
                longest = unit
        if longest is None:
            return None
        target = max(0, longest.text_bytes - (size() - max_bytes))
        if longest.original_bytes is None:
            longest.original_bytes = js_utf8(longest.original)
        text, omitted = truncate_with_notice(longest.original, target, encoded=longest.original_bytes)
        if text == longest.text:
            return None
        total_units -= longest.json_size
        longest.text = text
        longest.text_bytes = js_utf8_length(text)
        longest.json_size = overhead[longest.role] + tag_safe_string_size(text)
        longest.omitted = omitted
        total_units += longest.json_size

    data = projection.data(label, [(u.role, u.text) for u in retained])
    serialized = tag_safe_dumps(data)
    stats = RetentionStats(
        compacted=projection.compacted,
        original_messages=len(units),
        retained_messages=len(retained),
        omitted_messages=omitted_messages,
        omitted_bytes=sum(u.omitted for u in retained) + dropped_bytes,
    )
    return RetainedSource(projection, label, data, serialized, stats)
