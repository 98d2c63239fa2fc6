"""Is a log line well-formed JSON? Checked without building what decoding it would build.

The surface read skips the lines it does not return, but still checks that each log-only line is JSON:
a line cut right after an inner ``}`` (or two lines run together) looks like an event from outside.
Decoding such a line only to throw the result away builds every string and dict in it, which was most of
the cost of the read. :class:`WellFormed` asks simdjson, which validates the whole text (syntax, UTF-8,
escapes, nesting depth) without building Python objects.

simdjson is stricter than our decoder in a few places (integers past 64 bits, ``\\udxxx`` escapes of lone
surrogates, which :func:`~dsh_jupyter._json.loads` accepts), never looser on a line that starts with
``{`` (a byte-order mark is the one thing it accepts and the decoder refuses). So a ``True`` is the
decoder's ``True``, and the scanner decodes a line that gets ``False`` in full, which settles it exactly.
"""

from __future__ import annotations

from collections.abc import Callable


class WellFormed:
    """A checker for one scan (one thread: a simdjson parser is not shared)."""

    __slots__ = ("_parse",)

    def __init__(self) -> None:
        import simdjson

        self._parse: Callable[[bytes], object] = simdjson.Parser().parse

    def check(self, line: bytes) -> bool:
        """``True`` when ``line`` (which starts with ``{``) is JSON our decoder reads; ``False`` when it is not,
        or may not be."""
        try:
            self._parse(line)  # the parsed document is dropped at once, which frees the parser for the next
        except Exception:  # every refusal (ValueError, RuntimeError, ...) means "decode it in full"
            return False
        return True
