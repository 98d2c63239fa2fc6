"""What a tool call says in a few words: its arguments on one line, and how it was allowed or refused."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..clip import one_line

#: The one-line argument summary of a tool call is at most this long (unless a view's limits say otherwise).
MAX_ARGS_LINE = 120
#: Tools whose calls carry source code, with the argument holding it (shown as written, and run again by the
#: notebook export).
RUNNABLE = {"python": "code", "bash": "command"}


def argument_summary(name: str, arguments: str, limit: int = MAX_ARGS_LINE) -> str:
    """A tool call's arguments on one line.

    The command of ``bash`` and the code of ``python`` are shown as written; other JSON objects as
    ``key=value`` pairs; anything else (not JSON, not an object) as its raw text.
    """
    try:
        parsed: object = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return one_line(str(arguments), limit)
    if isinstance(parsed, dict):
        primary = RUNNABLE.get(name)
        value = parsed.get(primary) if primary else None
        if isinstance(value, str):
            return one_line(value, limit)
        return one_line(", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items()), limit)
    return one_line(json.dumps(parsed, ensure_ascii=False), limit)


def call_source(name: str, arguments: str) -> str | None:
    """The code or command of a ``python`` or ``bash`` call (``None`` for other tools or odd arguments)."""
    key = RUNNABLE.get(name)
    if key is None:
        return None
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return None
    value = parsed.get(key) if isinstance(parsed, dict) else None
    return value if isinstance(value, str) else None


def approval_note(record: Mapping[str, object] | None) -> str | None:
    """A decision record (``meta.approval``) in a few words: "allowed once by you", "refused: needs approval".

    ``None`` for calls nobody needed to approve (reading tools, and every call when approval is ``auto``).
    """
    if not record:
        return None
    by, scope, prefix = record.get("answeredBy"), record.get("scope"), record.get("prefix")
    named = record.get("decidedBy")
    who = named.strip() if isinstance(named, str) and named.strip() else "you"  # a collaborator of a shared notebook
    if record.get("allowed"):
        if by == "person":
            if scope == "prefix" and prefix:
                return f"allowed by {who} for commands starting with {prefix}"
            return f"allowed for this session by {who}" if scope == "session" else f"allowed once by {who}"
        if by == "hook":
            return "allowed by a hook"
        return "allowed for this session" if scope == "session" else None  # auto and reading tools: nothing
    reason = record.get("reason")
    if by == "person":
        return f"refused by {who}: {reason}" if reason else f"refused by {who}"
    if by == "hook":
        return "refused by a hook"
    if by == "setting":
        return "refused: approval is read-only"
    if by == "timeout":
        return "refused: needs approval (no answer in time)"
    return "refused: needs approval"


__all__ = ["MAX_ARGS_LINE", "RUNNABLE", "approval_note", "argument_summary", "call_source"]
