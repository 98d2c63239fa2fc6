"""The end of a big JSONL log, folded on its own: the current surface a full read would end with, for the
price of the window's bytes.

A log of a gigabyte takes seconds to fold from its start. Its newest messages, though, are in its last few
megabytes, and folding from the first whole line there gives exactly the surface events a full read would
show last — unless something in the window reaches before it (a compaction of older messages, a surface
operation citing an earlier event) or is damaged. :func:`fold_window` then says so by returning ``None``,
and the caller reads the log in full. Readers that show a session's end (the REST details, ``dsh-jupyter
sessions show``) use it for logs over :data:`FULL_READ_BYTES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO

from .._json import loads
from ..session import SessionError, events_from_record
from .scan import OVERLONG, FoldState, _Lines, fold_lines, folded_skips, surface_of

if TYPE_CHECKING:
    from ..session import SessionHeader
    from .scan import ScanResult

#: A log bigger than this is worth reading from its end only (when its counts are known elsewhere).
FULL_READ_BYTES = 64 << 20
#: How much of a big log's end is folded.
WINDOW_BYTES = 8 << 20


def fold_window(fh: BinaryIO, path: str, header: SessionHeader, header_bytes: int, size: int,
                skip: frozenset[str], window: int = WINDOW_BYTES) -> tuple[ScanResult, FoldState, int] | None:
    """Fold the last ``window`` bytes of the log open in ``fh`` (``size`` bytes, its header
    ``header_bytes`` long) on their own: ``(scan, fold state, offset of the first line folded)``, the surface a
    lazily decoded sequence; ``None`` when the window cannot stand alone (see the module notes)."""
    fh.seek(max(header_bytes, size - window) - 1)
    probe = fh.read(min(size, 1 << 20))
    newline = probe.find(b"\n")
    if newline < 0:
        return None
    start = max(header_bytes, size - window) + newline
    first = next(iter(_Lines(fh, start)), None)
    if first is None or first[0] is OVERLONG:
        return None
    buf, begin, end, _ = first
    try:
        events = events_from_record(loads(buf[begin:end]))
    except (ValueError, SessionError, RecursionError):
        return None
    if not events:
        return None
    state = FoldState(header, header_bytes, start, size, events[0].seq, 0, [], {}, {}, None, folded_skips(skip))
    folded = fold_lines(fh, path, skip_data=skip, resume=state, stop_at_damage=True)
    if folded.bad_line is not None:
        return None  # something reaches before the window, or is damaged: a full read says what
    return surface_of(fh, path, folded, stream=True), folded, start
