"""What a session is: header, events, message shapes, the surface fold, what a reference projects from it
(:mod:`.projection`), the words search matches in it (:mod:`.words`) and the rules of its title
(:mod:`.titles`, shared by the agent and the offline model). No storage here."""

from __future__ import annotations

from .errors import (
    SessionCorruptError,
    SessionError,
    SessionFormatError,
    SessionLockedError,
    SessionNotFoundError,
)
from .events import Event, ReplaceOp, SurfaceOp, event_from_json, events_from_record
from .header import SESSION_FORMAT_VERSION, SessionHeader, now_ms
from .log import SessionLog
from .surface import SurfaceFold, SurfaceSnapshot, fold_surface

__all__ = [
    "SESSION_FORMAT_VERSION",
    "Event",
    "ReplaceOp",
    "SessionCorruptError",
    "SessionError",
    "SessionFormatError",
    "SessionHeader",
    "SessionLockedError",
    "SessionLog",
    "SessionNotFoundError",
    "SurfaceFold",
    "SurfaceOp",
    "SurfaceSnapshot",
    "event_from_json",
    "events_from_record",
    "fold_surface",
    "now_ms",
]
