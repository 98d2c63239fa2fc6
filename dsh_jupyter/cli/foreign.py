"""Other tools' sessions (Claude Code, Codex) beside ours in ``sessions list|search|show``: read-only, listed
unless ``--store``, ``--no-foreign`` or ``$DSH_FOREIGN_SESSIONS=0`` leave them out.

Deferred import: the foreign-session readers load when the command runs, not for ``--help``.
"""

from __future__ import annotations

import argparse
import heapq
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from .output import cost_cell, escape, when

if TYPE_CHECKING:
    from ..catalog import CatalogEntry
    from ..sources import ForeignHeader, ForeignSessions


def foreign(args: argparse.Namespace) -> ForeignSessions | None:
    """Other tools' sessions, unless ``--store``, ``--no-foreign`` or ``$DSH_FOREIGN_SESSIONS=0`` leave them out."""
    from ..sources import enabled_by_env, foreign_sessions

    if getattr(args, "store", None) or getattr(args, "no_foreign", False) or not enabled_by_env():
        return None
    return foreign_sessions()


def foreign_json(header: ForeignHeader) -> dict[str, Any]:
    record: dict[str, Any] = {"sessionId": header.session_id, "label": header.title or header.session_id,
                              "title": header.title}
    if header.cwd is not None:
        record["cwd"] = header.cwd
    record.update({"createdAt": header.created_at, "tool": header.tool, "path": header.path, "readOnly": True})
    return record


def foreign_line(header: ForeignHeader, *, mark: str = "") -> str:
    cwd = escape(header.cwd) if header.cwd is not None else "(no cwd)"
    title = escape(header.title) if header.title is not None else "(untitled)"
    return (f"{mark}{when(header.created_at)}  {escape(header.session_id)}  {'-':>7}  {cost_cell('')}  {title}  [{cwd}]"
            f"  ({header.tool})")


def merged(entries: Sequence[CatalogEntry], headers: Sequence[ForeignHeader], key_entry: Callable[[Any], Any],
           key_header: Callable[[Any], Any], limit: int | None) -> list[CatalogEntry | ForeignHeader]:
    """Our entries and other tools' headers in one order (each list is already in that order)."""
    tagged = heapq.merge(((key_entry(e), 0, i, e) for i, e in enumerate(entries)),
                         ((key_header(h), 1, i, h) for i, h in enumerate(headers)), key=lambda t: t[:3])
    rows = [cast("CatalogEntry | ForeignHeader", t[3]) for t in tagged]
    return rows if limit is None else rows[:limit]
