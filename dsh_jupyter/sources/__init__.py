"""Read-only sources: other tools' transcripts (Claude Code, Codex) listed and referenced like our sessions.

See :mod:`.base` for the seam and the projection rules, :mod:`.claude` and :mod:`.codex` for the formats.
"""

from __future__ import annotations

from .base import ForeignHeader, ForeignSource, ProjectedItem, ScanState
from .registry import FOREIGN_ENV, ForeignSessions, enabled_by_env, foreign_sessions, split_id, tool_of

__all__ = [
    "FOREIGN_ENV",
    "ForeignHeader",
    "ForeignSessions",
    "ForeignSource",
    "ProjectedItem",
    "ScanState",
    "enabled_by_env",
    "foreign_sessions",
    "split_id",
    "tool_of",
]
