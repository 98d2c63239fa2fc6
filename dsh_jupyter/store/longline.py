"""Decoding a long log line without building its long strings (:data:`RAW_LONG_STRINGS`).

A line of tens of megabytes is nearly always one long text (a pasted document, a huge answer). Decoding it
builds that text as one Python ``str``: 4 bytes a character once it holds a single emoji, several times the
line's size. A reader that asked for :data:`RAW_LONG_STRINGS` gets, for a surface line over
:data:`LONG_LINE_BYTES`, the event with each string value of its ``data`` longer than
:data:`LONG_STRING_BYTES` (as written) left as a :class:`~dsh_jupyter.session.longtext.RawString`: the
line's bytes and where the string is, decoded later a piece at a time.

The line is judged exactly as a full decode judges it. Its strings are found on the bytes (a string is a
quote, then characters and escapes, then a quote); every long one is decoded piece by piece with the decoder
a full read uses (so bad UTF-8, a bad escape or a control character in it fails as it would there); the rest
of the line, with each long string replaced by a marker, is decoded and validated as usual, and the markers
are swapped for the raw strings. Anything unexpected (no envelope prefix, a long object key, a marker found
twice, a piece that does not decode, an event the checks refuse) returns ``None``: the caller then decodes
the line in full, which settles what is wrong with the very words a full read uses.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .._json import dumpb, loads
from ..session.longtext import RawString

#: The pseudo event type that asks a surface read for long strings left undecoded (see the module notes).
RAW_LONG_STRINGS = "dsh/raw-long-strings"
#: Lines longer than this are decoded with their long strings left raw.
LONG_LINE_BYTES = 4 << 20
#: String values at least this long (as written, between the quotes) are left raw.
LONG_STRING_BYTES = 1 << 20

_DATA_START = re.compile(rb'\{"type":"[^"\\]{1,64}","seq":[0-9]{1,16},"time":[0-9]{1,16},"data":')
#: One JSON string token, from its opening quote (linear: runs of plain bytes, then one escape at a time). The
#: quantifiers are possessive: a plain ``*`` keeps a backtracking record for every escape it passes, about 8
#: bytes of memory a byte of a long text.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_KEY_AFTER = re.compile(rb"[ \t\r\n]*:")
_NONCE = os.urandom(8).hex()


def long_record(line: bytes) -> dict[str, Any] | None:
    """The decoded record of ``line`` with its long string values (inside ``data``) as raw strings, or ``None``
    when it has none or cannot be read this way (see the module notes)."""
    prefix = _DATA_START.match(line)
    if prefix is None:
        return None
    spans: list[tuple[int, int]] = []
    position = prefix.end()
    find, string = line.find, _STRING.match
    while True:
        quote = find(b'"', position)
        if quote < 0:
            break
        token = string(line, quote)
        if token is None:
            return None  # a string that never closes: not JSON
        end = token.end()
        if end - quote - 2 >= LONG_STRING_BYTES and _KEY_AFTER.match(line, end) is None:
            spans.append((quote, end))
        position = end
    if not spans:
        return None
    marks: dict[str, RawString] = {}
    pieces: list[bytes] = []
    done = 0
    for index, (start, end) in enumerate(spans):
        raw = RawString.checked(line, start + 1, end - 1)
        if raw is None:
            return None
        mark = f"\u0000dsh-raw-{_NONCE}-{index}"
        marks[mark] = raw
        pieces += [line[done:start], dumpb(mark)]
        done = end
    pieces.append(line[done:])
    try:
        record = loads(b"".join(pieces))
    except ValueError:
        return None
    if not isinstance(record, dict) or _swap(record, marks) != len(marks):
        return None
    return record


def _swap(record: dict[str, Any], marks: dict[str, RawString]) -> int:
    """Put each raw string in place of its marker in ``record``; returns how many markers were found."""
    found = 0
    stack: list[dict[str, Any] | list[Any]] = [record]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        swaps: list[tuple[Any, RawString]] = []
        for key, value in items:
            if isinstance(value, str):
                raw = marks.get(value)
                if raw is not None:
                    swaps.append((key, raw))
            elif isinstance(value, (dict, list)):
                stack.append(value)
        for key, raw in swaps:
            node[key] = raw
        found += len(swaps)
    return found
