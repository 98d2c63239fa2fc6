"""UTF-8 bytes as JavaScript counts them, and cutting byte strings at character boundaries.

A lone UTF-16 surrogate counts 3 bytes (JavaScript's encoder writes it as U+FFFD) and becomes U+FFFD
when its text is encoded.
"""

from __future__ import annotations

import re

from .._json import js_string

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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


def head_end(data: bytes, end: int) -> int:
    """Drop a trailing incomplete UTF-8 sequence from ``data[:end]``; returns the new end.

    Looks only at ``data[end - 4 : end]``, so ``data`` may be just the first bytes of a longer text."""
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


def tail_start(data: bytes, start: int) -> int:
    """Drop leading continuation bytes from ``data[start:]``; returns the new start.

    Looks only forward from ``start``, so ``data`` may be just the last bytes of a longer text."""
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return start


#: Bytes that a tag-safe JSON string writes as a two-character escape (``\\"`` and friends).
_TWO_CHAR_ESCAPES = b'"\\\b\t\n\f\r'
#: Bytes written as a six-character escape: other control characters, and ``<`` (``\\u003c``).
_SIX_CHAR_ESCAPES = bytes(b for b in range(0x20) if b not in b"\b\t\n\f\r") + b"<"
#: Every byte that is not escaped (deleted to keep only the escaped ones).
_PLAIN_BYTES = bytes(b for b in range(256) if b not in _TWO_CHAR_ESCAPES + _SIX_CHAR_ESCAPES)


def tag_safe_size_of_utf8(data: bytes) -> int:
    """The tag-safe JSON string size (quotes included) of a text whose UTF-8 is ``data``, counted on the
    bytes so that no escaped copy is made. Valid only for text without lone surrogates (``data`` came
    from ``str.encode`` without error): ``"``, ``\\`` and ``\\b \\t \\n \\f \\r`` take 2 bytes, other
    control characters and ``<`` (written ``\\u003c``) 6, every other byte 1.

    Two passes in C: one keeps only the escaped bytes (few, in prose), the next splits those in two kinds.
    """
    escaped = data.translate(None, _PLAIN_BYTES)
    if not escaped:
        return 2 + len(data)
    six = len(escaped) - len(escaped.translate(None, _SIX_CHAR_ESCAPES))
    return 2 + len(data) + len(escaped) + 4 * six
