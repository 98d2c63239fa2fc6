"""What the command prints: terminal-safe text on stdout, messages on stderr, JSON, times and sizes.

Every field that comes from a log (ids, titles, folders) goes through :func:`escape`; everything written on
stdout goes through :func:`write`, and every message on stderr through :func:`say`.

Deferred import: the escape rule loads with the first line printed, not for ``--help``.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..conversation.spend import Spend

# DEL and C1 controls survive ``json.dumps(ensure_ascii=False)``; inside JSON strings they become \uXXXX.
_JSON_CONTROLS = re.compile("[\x7f-\x9f]")


def escape(text: str) -> str:
    """Terminal control characters (line feed included) as literal ``\\xNN``: one field, one line.

    The notebook's rule (:func:`dsh_jupyter.escape.escape_controls`), so a terminal and a cell
    show the same text."""
    from ..escape import escape_controls

    return escape_controls(text)


def text(value: str) -> str:
    """A multi-line text for the terminal: line feeds and tabs kept, every other control as ``\\xNN``."""
    from ..escape import escape_text

    return escape_text(value)


def write(out: TextIO, value: str) -> None:
    """Everything a command prints on stdout goes through here (terminal controls escaped)."""
    out.write(text(value))


def say(message: str) -> None:
    """A message on stderr (``dsh-jupyter: ...``), terminal controls escaped."""
    print(f"dsh-jupyter: {text(message)}", file=sys.stderr)


def warn_errors(errors: list[str]) -> None:
    """The catalog's per-log problems, one warning line each."""
    for error in errors:
        say(f"warning: {error}")


def when(ms: int) -> str:
    """A time in milliseconds since the epoch as local ``YYYY-MM-DD HH:MM`` (the number itself when it is
    out of range)."""
    try:
        return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def cost_cell(shown: str) -> str:
    """A session's cost (``Spend.text``: blank when unknown) as the fixed-width column of ``list``/``search``."""
    return f"{shown:>9}"


#: How many turns the ``cost`` row of ``show`` names one by one (the latest ones).
TURN_COSTS_SHOWN = 10


def cost_row(total: Spend, turns: Sequence[tuple[int | None, Spend]] | None, log_bytes: int = 0) -> str:
    """``show``'s cost line: the session's total, how many model calls had a cost, then the latest turns'
    costs (those known), e.g. ``≥ $0.0042 (3 of 4 model calls priced); by turn: 1 $0.0012, 2 $0.0030``.
    ``turns`` ``None``: the log (of ``log_bytes``) was too big to read for them."""
    calls = total.priced + total.unpriced
    text = total.text()
    if total.unpriced:
        text += f" ({total.priced:,} of {calls:,} model calls priced)"
    if turns is None:
        return text + f"; by turn: not read (the log is {megabytes(log_bytes)})"
    known = [(turn, spend) for turn, spend in turns if spend.known]
    if not known or len(turns) < 2:  # a single turn's cost is the total
        return text
    shown = known[-TURN_COSTS_SHOWN:]
    parts = ", ".join(f"{'?' if turn is None else turn} {spend.text()}" for turn, spend in shown)
    latest = f" (the latest {len(shown)} of {len(known):,})" if len(shown) < len(known) else ""
    return f"{text}; by turn{latest}: {parts}"


def megabytes(size: int | None) -> str:
    return f"{(size or 0) / 2**20:,.1f} MB"


def print_json(value: Any, out: TextIO, *, indent: int | None = 1) -> None:
    """``value`` as JSON on one line (``indent=None``) or indented; non-ASCII kept, controls as ``\\uXXXX``."""
    encoded = json.dumps(value, ensure_ascii=False, indent=indent)
    out.write(_JSON_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", encoded) + "\n")
