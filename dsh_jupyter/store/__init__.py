"""Session storage: the persistence seam and its backends (JSONL by default, SQLite, PostgreSQL)."""

from __future__ import annotations

from .base import SessionLocation, SessionStore, SessionWriter
from .errors import SessionExistsError, SessionWriteError
from .jsonl import JsonlStore, JsonlWriter
from .paths import decode_segment, default_sessions_dir, encode_segment, project_key
from .postgres import PostgresStore, PostgresWriter
from .sqlite import SqliteStore, SqliteWriter

__all__ = [
    "JsonlStore",
    "JsonlWriter",
    "PostgresStore",
    "PostgresWriter",
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
