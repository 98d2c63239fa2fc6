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

Retention works on a :class:`~.bounded.BoundedProjection` (sizes of every message, text of only those it
could keep), so the rule is the same for a source read from a huge log and for one already in memory.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

from ..session.projection import ProjectedSession
from .bounded import BoundedProjection, HeldText, bound_projection
from .framing import tag_safe_dumps, tag_safe_string_size
from .utf8 import head_end, js_utf8, js_utf8_length, tail_start

__all__ = [
    "RetainedSource",
    "RetentionStats",
    "js_utf8",
    "js_utf8_length",
    "omission_notice",
    "retain_source",
    "truncate_with_notice",
]


def omission_notice(omitted: int) -> str:
    """The line appended to a cut text: ``\\n[… N UTF-8 bytes omitted …]`` (31 bytes plus N's digits)."""
    return f"\n[\u2026 {omitted} UTF-8 bytes omitted \u2026]"


_NOTICE_BYTES = len(omission_notice(0).encode("utf-8")) - 1
assert _NOTICE_BYTES == 31, "the omission notice must keep the reference's length"


def truncate_with_notice(text: str, max_bytes: int, *, encoded: bytes | None = None) -> tuple[str, int]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes: head + tail + notice; ``(text, omitted bytes)``.

    A binary search over the retained byte count ``r`` keeps the first ``ceil(r/2)`` and the last
    ``floor(r/2)`` bytes (trimmed to character boundaries) and the largest ``r`` whose result fits wins.
    When not even the bare notice fits, the result is ``''`` with every byte omitted.
    """
    data = js_utf8(text) if encoded is None else encoded
    if len(data) <= max_bytes:
        return text, 0
    return cut_ends(data, data, len(data), max_bytes)


def cut_ends(head: bytes, tail: bytes, total: int, max_bytes: int) -> tuple[str, int]:
    """:func:`truncate_with_notice` of a text known only by its ends: ``head`` and ``tail`` are its first
    and last bytes (at least ``ceil(max_bytes/2)`` and ``floor(max_bytes/2)`` of them) and ``total`` its
    size, which must exceed ``max_bytes``."""
    tail_base = total - len(tail)
    best: tuple[int, int] | None = None  # (head end, tail start) of the best fit
    low, high = 0, max_bytes
    while low <= high:
        retained = (low + high) // 2
        cut_head = head_end(head, (retained + 1) // 2)
        cut_tail = tail_start(tail, total - retained // 2 - tail_base) + tail_base
        kept = cut_head + (total - cut_tail)
        omitted = total - kept
        if kept + _NOTICE_BYTES + len(str(omitted)) <= max_bytes:
            best = (cut_head, cut_tail)
            low = retained + 1
        else:
            high = retained - 1
    if best is None:
        return "", total
    cut_head, cut_tail = best
    omitted = total - cut_head - (total - cut_tail)
    kept_text = (head[:cut_head].decode("utf-8", errors="replace")
                 + tail[cut_tail - tail_base :].decode("utf-8", errors="replace"))
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
    """One source fitted to its budget: the preview object, its tag-safe JSON, and the bounded projection
    it came from (which also holds what the full snapshot may show)."""

    projection: BoundedProjection
    label: str
    data: dict[str, Any]
    serialized: str
    stats: RetentionStats

    @property
    def size(self) -> int:
        return len(self.serialized.encode("utf-8"))

    @property
    def full_data(self) -> dict[str, Any]:
        """The source object with the spill prefix's texts (every message whole, unless the spill is capped)."""
        return self.projection.data(self.label)


class _Unit:
    __slots__ = ("checkpoint", "held", "json_size", "omitted", "original_bytes", "role", "text", "text_bytes")

    def __init__(self, held: HeldText, json_size: int) -> None:
        self.role = held.role
        self.held = held
        self.checkpoint = held.checkpoint
        self.text = held.text  # None: the original, of which only the ends are held
        self.text_bytes = held.utf8_bytes
        self.json_size = json_size
        self.omitted = 0
        self.original_bytes: bytes | None = None

    def cut(self, max_bytes: int) -> tuple[str, int]:
        """The original text cut to ``max_bytes`` (which is below its size)."""
        held = self.held
        if held.text is None:
            return cut_ends(held.head, held.tail, held.utf8_bytes, max_bytes)
        if self.original_bytes is None:
            self.original_bytes = js_utf8(held.text)
        return truncate_with_notice(held.text, max_bytes, encoded=self.original_bytes)


def retain_source(projection: ProjectedSession | BoundedProjection, label: str,
                  max_bytes: int) -> RetainedSource | None:
    """Fit ``projection`` (labelled ``label``) into ``max_bytes``; ``None`` when even the minimum does not fit.

    A :class:`BoundedProjection` must have been collected for a budget of at least ``max_bytes``."""
    if isinstance(projection, ProjectedSession):
        projection = bound_projection(projection, max_bytes)
    elif max_bytes > projection.budget:
        raise ValueError(f"a projection bounded for {projection.budget} bytes cannot be retained for {max_bytes}")
    source = projection
    overhead = {
        role: len(tag_safe_dumps({"role": role, "text": ""}).encode("utf-8")) - 2 for role in ("user", "assistant")
    }
    total = len(source)
    sizes = array("q", (overhead[source.role(i)] + source.json_sizes[i] for i in range(total)))
    fixed = len(tag_safe_dumps(source.data(label, [])).encode("utf-8"))

    count = total
    total_units = sum(sizes)

    def size() -> int:
        return fixed + total_units + max(0, count - 1)

    # Phase 1: drop whole messages, oldest first, sparing checkpoints and the newest message. Sizes
    # only shrink, so one pass in order drops exactly what "drop the first droppable while too big" does.
    omitted_messages = 0
    dropped_bytes = 0
    kept: list[int] | range = range(total)
    if total and size() > max_bytes:
        newest = total - 1
        kept = []
        for index in range(total):
            if index != newest and not source.checkpoint(index) and size() > max_bytes:
                count -= 1
                total_units -= sizes[index]
                omitted_messages += 1
                dropped_bytes += source.text_bytes[index]
            else:
                kept.append(index)
    retained = [_Unit(source.held[i], sizes[i]) for i in kept]

    # Phase 2: re-cut the longest remaining text until the object fits.
    while size() > max_bytes:
        longest: _Unit | None = None
        for unit in retained:
            if unit.text_bytes > (longest.text_bytes if longest is not None else 0):
                longest = unit
        if longest is None:
            return None
        target = max(0, longest.text_bytes - (size() - max_bytes))
        text, omitted = longest.cut(target)
        if text == longest.text:
            return None
        total_units -= longest.json_size
        longest.text = text
        longest.text_bytes = js_utf8_length(text)
        longest.json_size = overhead[longest.role] + tag_safe_string_size(text)
        longest.omitted = omitted
        total_units += longest.json_size

    pairs: list[tuple[str, str]] = []
    for unit in retained:
        assert unit.text is not None, "a text held only by its ends always needs a cut"
        pairs.append((unit.role, unit.text))
    data = source.data(label, pairs)
    serialized = tag_safe_dumps(data)
    stats = RetentionStats(
        compacted=source.compacted,
        original_messages=total,
        retained_messages=len(retained),
        omitted_messages=omitted_messages,
        omitted_bytes=sum(u.omitted for u in retained) + dropped_bytes,
    )
    return RetainedSource(source, label, data, serialized, stats)
