"""Sessions an agent in this process holds in memory (``SessionQuery.register_live``).

A live session is read from memory, never from its log, exactly as :class:`~dsh_jupyter.query.SessionQuery`
does: it may hold events that are not flushed yet (a new title, a new message). The catalog merges these
over what it indexed.
"""

from __future__ import annotations

from typing import Any

from ..conversation.spend import spend_of_log
from ..session.projection import project_surface
from .entries import CatalogEntry


def live_logs(query: Any) -> dict[str, Any]:
    """The live, non-empty session logs of ``query`` by id.

    Uses ``query.live_logs()`` when the query offers it, else the query's registry of live sessions.
    """
    accessor = getattr(query, "live_logs", None)
    logs = dict(accessor()) if callable(accessor) else dict(getattr(query, "_live", None) or {})
    return {sid: log for sid, log in logs.items() if len(log)}


def live_entry(log: Any) -> CatalogEntry:
    """A catalog entry for a live log (title as ``SessionQuery.title`` reads it, cost from its events in
    memory; no store)."""
    data = log.title()
    title = data.get("title") if isinstance(data, dict) else None
    header = log.header
    return CatalogEntry(header.id, "", "", header.cwd, int(header.created_at),
                        title if isinstance(title, str) else None, indexed=False, live=True,
                        spend=spend_of_log(log))


def live_texts(log: Any) -> list[str]:
    """The projected user/assistant texts of a live log (what the body index would hold)."""
    return [m.text for m in project_surface(log.snapshot()).messages]
