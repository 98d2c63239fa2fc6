"""Texts too long to build as one Python ``str``: a JSON string value of a log line kept as its bytes.

A Python ``str`` takes 1, 2 or 4 bytes a character, the widest character deciding for the whole string: a
30 MB message holding one emoji costs 120 MB once decoded. A reader that needs only the size of such a text
and its two ends (a reference keeps a head, a tail and a capped spill of it) can ask the store to leave it
undecoded (:data:`~dsh_jupyter.store.scan.RAW_LONG_STRINGS`): the event then holds a :class:`RawString`
where the string was, and the text is decoded piece by piece, never whole.

A :class:`RawString` is only ever made of a string the store has checked in full, piece by piece, with the
same decoder a full read uses (so a line it cannot vouch for is decoded whole, and fails exactly as before).
Pieces are cut between whole characters and whole escapes, never between the two escapes of a surrogate pair,
so the pieces, decoded one by one and joined, are exactly the text a full decode builds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from .._json import loads

#: Bytes of JSON string (as written in the line) decoded at a time.
PIECE_BYTES = 1 << 20

_BACKSLASH = 0x5C
#: The escape of a high surrogate (``\\ud800`` to ``\\udbff``): a piece never ends right after one, since the
#: escape that follows may be its low half (the decoder joins the two into one character).
_HIGH_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


def piece_cut(raw: bytes, at: int, low: int) -> int | None:
    """The largest cut ``c`` with ``low < c <= at`` such that ``raw[low:c]`` (JSON string content starting with a
    whole character or escape at ``low``) holds only whole characters and escapes and does not end with a high
    surrogate's escape, or ``None`` (bytes that are not UTF-8 there, or a run of high surrogate escapes).

    A cut at a byte that begins a UTF-8 sequence or is plain ASCII is between characters unless an escape
    spans it; an escape is at most 6 bytes, so only a backslash in the 12 bytes before the cut can matter. The
    first of a run of backslashes always begins an escape, so cutting there is safe (if sometimes earlier than
    needed)."""
    cut = at
    steps = 0
    while raw[cut] & 0xC0 == 0x80:  # inside a UTF-8 sequence: back to its first byte
        cut -= 1
        steps += 1
        if steps > 3 or cut <= low:
            return None  # not UTF-8 here: the decoder will say so, a full decode tells exactly how
    slash = raw.rfind(b"\\", max(low, cut - 12), cut)
    if slash >= 0:
        cut = _run_start(raw, slash, low)
        while cut - 6 >= low and _HIGH_SURROGATE_ESCAPE.fullmatch(raw, cut - 6, cut) is not None:
            cut = _run_start(raw, cut - 6, low)
    return cut if cut > low else None


def _run_start(raw: bytes, slash: int, low: int) -> int:
    """The first of the run of backslashes that holds ``raw[slash]`` (not before ``low``)."""
    while slash > low and raw[slash - 1] == _BACKSLASH:
        slash -= 1
    return slash


class RawString:
    """A JSON string value of a log line, undecoded: the content between its quotes is ``data[start:end]``.

    Made by the store once every piece decoded (see the module notes); ``cuts`` are the piece boundaries."""

    __slots__ = ("_cuts", "_data", "end", "start")

    def __init__(self, data: bytes, start: int, end: int, cuts: Sequence[int]) -> None:
        self._data = data
        self.start = start
        self.end = end
        self._cuts = tuple(cuts)

    @classmethod
    def checked(cls, data: bytes, start: int, end: int, piece: int | None = None) -> RawString | None:
        """The string ``data[start:end]`` once every piece of it decodes (pieces of about ``piece`` bytes,
        :data:`PIECE_BYTES` by default, longer where no cut is in reach); ``None`` when one does not (the caller
        then decodes the whole line, which settles what is wrong)."""
        piece = PIECE_BYTES if piece is None else piece
        cuts = [start]
        low = start
        while low < end:
            span = piece
            cut: int | None = None
            while cut is None:  # no cut in reach (a long run of escapes or of bytes that are not UTF-8): go further
                cut = end if end - low <= span else piece_cut(data, low + span, low)
                span *= 2
            try:
                decoded = _decode(data, low, cut)
            except ValueError:
                return None
            del decoded
            cuts.append(cut)
            low = cut
        return cls(data, start, end, cuts)

    def __repr__(self) -> str:
        return f"RawString({self.end - self.start} bytes)"

    @property
    def raw_bytes(self) -> int:
        """Bytes of the string as the line writes it (escapes included)."""
        return self.end - self.start

    def pieces(self) -> Iterator[str]:
        """The decoded text, a piece at a time, in order."""
        cuts = self._cuts
        for index in range(len(cuts) - 1):
            yield _decode(self._data, cuts[index], cuts[index + 1])

    def pieces_from_end(self) -> Iterator[str]:
        """The decoded text, a piece at a time, from the last piece back to the first."""
        cuts = self._cuts
        for index in range(len(cuts) - 1, 0, -1):
            yield _decode(self._data, cuts[index - 1], cuts[index])

    def text(self) -> str:
        """The whole decoded text (for a caller that found it small enough to hold)."""
        return "".join(self.pieces())


def _decode(data: bytes, start: int, end: int) -> str:
    text = loads(b'"' + data[start:end] + b'"')
    if not isinstance(text, str):  # pragma: no cover - a JSON string literal always decodes to a str
        raise ValueError("not a JSON string")
    return text


class LongText:
    """A text made of parts (``str`` or :class:`RawString`) joined as they are, read a piece at a time."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[str | RawString]) -> None:
        self.parts = tuple(parts)

    def __repr__(self) -> str:
        return f"LongText({len(self.parts)} parts)"

    def pieces(self) -> Iterator[str]:
        """The text a piece at a time, in order (a ``str`` part is one piece)."""
        for part in self.parts:
            if isinstance(part, str):
                if part:
                    yield part
            else:
                yield from part.pieces()

    def pieces_from_end(self) -> Iterator[str]:
        """The text a piece at a time, from the end back (each piece in its own order)."""
        for part in reversed(self.parts):
            if isinstance(part, str):
                if part:
                    yield part
            else:
                yield from part.pieces_from_end()

    def text(self) -> str:
        """The whole text as one ``str``."""
        return "".join(self.pieces())
