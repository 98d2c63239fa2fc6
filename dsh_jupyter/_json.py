"""JSON helpers that write exactly what JavaScript's ``JSON.stringify`` writes.

Session logs are shared with the reference harness (written in TypeScript), so the bytes we emit for a
value must be the bytes it would emit: compact separators, non-ASCII kept literally, ``\\uXXXX`` in
lowercase hex for control characters, and lone UTF-16 surrogates written as ``\\udxxx`` escapes.

``orjson`` gives the fast path; it refuses lone surrogates, which we then handle with the standard
library plus a post-pass.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _join_pair(match: re.Match[str]) -> str:
    high, low = (ord(c) for c in match.group(0))
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def js_string(value: str) -> str:
    """Normalise a Python ``str`` to the string JavaScript sees for the same UTF-16 code units.

    A high surrogate directly followed by a low one is the astral character they form; every other
    surrogate stays a lone surrogate.
    """
    if _LONE_SURROGATE.search(value) is None:
        return value
    return _SURROGATE_PAIR.sub(_join_pair, value)


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return js_string(value)
    if isinstance(value, dict):
        return {js_string(k) if isinstance(k, str) else k: _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


def _escape_lone(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def dumps(value: Any) -> str:
    """Serialise like ``JSON.stringify(value)`` (compact, literal non-ASCII)."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        pass
    text = json.dumps(_normalise(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # Only lone surrogates can remain; outside strings JSON has none, so this is lossless.
    return _LONE_SURROGATE.sub(_escape_lone, text)


def dumpb(value: Any) -> bytes:
    """:func:`dumps` as UTF-8 bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return dumps(value).encode("utf-8")


def loads(data: bytes | str) -> Any:
    """Parse JSON text; accepts ``\\udxxx`` escapes of lone surrogates (which orjson refuses).

    Every failure is a :class:`ValueError`, whatever went wrong: bad syntax, bytes that are not UTF-8,
    nesting too deep for the decoder (``RecursionError``) or text too large to decode (``MemoryError``).
    Input may come from a hostile file, and callers handle one exception type.
    """
    try:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        return json.loads(data)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to decode") from None
    except MemoryError:
        raise ValueError(f"the JSON text ({len(data)} characters or bytes) is too large to decode") from None
