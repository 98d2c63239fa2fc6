"""Cutting text for display and for the model: one rule for every place that shortens a text.

- :func:`one_line`: whitespace folded, cut with an ellipsis (titles, table cells, call summaries);
- :func:`capped`: cut to a number of characters, then a line saying how much was left out;
- :func:`fitted`: cut so that the text *with* its note stays within the limit (bounded summaries);
- :func:`keep_end`: a long line cut in its middle, so that its end (where a message says what to do) stays.
"""

from __future__ import annotations


def one_line(text: str, limit: int) -> str:
    """``text`` with runs of whitespace as one space, cut to ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


#: How many characters of a line's end :func:`keep_end` always keeps.
KEPT_END = 100


def keep_end(line: str, limit: int, end: int = KEPT_END) -> str:
    """``line`` when it fits in ``limit`` characters, else its start, " … " and its last ``end`` characters: a
    remedy at the end of a message ("…; set %config DshMagics.approval = \"auto\"") is never the part cut."""
    if len(line) <= limit:
        return line
    end = min(end, limit // 2)
    return line[: max(0, limit - end - 3)].rstrip() + " … " + line[-end:].lstrip()


def capped(text: str, limit: int, what: str = "characters") -> str:
    """``text`` cut to ``limit`` characters, then ``… (N more characters not shown)`` on a line of its own
    (``what`` names the unit, e.g. ``"characters of output"``)."""
    if len(text) <= limit:
        return text
    return text[:limit] + left_out(len(text) - limit, what)


def left_out(count: int, what: str = "characters") -> str:
    """The line :func:`capped` adds after a cut text: ``\\n… (N more characters not shown)``."""
    return f"\n… ({count} more {what} not shown)"


def fitted(text: str, limit: int) -> str:
    """``text`` cut so that it and the note ``… (N more characters)`` take at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    note = f" … ({len(text) - limit:,} more characters)"
    return text[: max(0, limit - len(note))] + note
