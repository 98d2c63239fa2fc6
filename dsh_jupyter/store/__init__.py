"""Session storage: the persistence seam and its two backends (JSONL by default, SQLite)."""

from __future__ import annotations

from .base import SessionLocation, SessionStore, SessionWriter
from .errors import SessionExistsError, SessionWriteError
from .jsonl import JsonlStore, JsonlWriter
from .paths import decode_segment, default_sessions_dir, encode_segment, project_key
from .sqlite import SqliteStore, SqliteWriter

__all__ = [
    "JsonlStore",
    "JsonlWriter",
    "SessionExistsError",
    "SessionLocation",
    "SessionStore",
    "SessionWriteError",
    "SessionWriter",
    "SqliteStore",
    "SqliteWriter",
    "decode_segment",
    "default_sessions_dir",
    "encode_segment",
    "project_key",
]
