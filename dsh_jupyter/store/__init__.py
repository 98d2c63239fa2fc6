"""Session storage: the persistence seam and its backends (JSONL by default, SQLite, PostgreSQL)."""

from __future__ import annotations

from .base import SessionLocation, SessionStore, SessionWriter
from .errors import (
    LogAccessError,
    LogPermissionError,
    SessionExistsError,
    SessionWriteError,
    StoreReadOnlyError,
    UnsafeLogError,
)
from .jsonl import JsonlStore, JsonlWriter
from .paths import decode_segment, default_sessions_dir, encode_segment, project_key
from .postgres import PostgresStore, PostgresWriter
from .safe_open import open_log
from .sqlite import SqliteStore, SqliteWriter

__all__ = [
    "JsonlStore",
    "JsonlWriter",
    "LogAccessError",
    "LogPermissionError",
    "PostgresStore",
    "PostgresWriter",
    "SessionExistsError",
    "SessionLocation",
    "SessionStore",
    "SessionWriteError",
    "SessionWriter",
    "SqliteStore",
    "SqliteWriter",
    "StoreReadOnlyError",
    "UnsafeLogError",
    "decode_segment",
    "default_sessions_dir",
    "encode_segment",
    "open_log",
    "project_key",
]
