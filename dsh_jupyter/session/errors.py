"""Errors raised while building, reading or validating a session log."""

from __future__ import annotations


class SessionError(Exception):
    """Base class of every session-log error."""


class SessionFormatError(SessionError, ValueError):
    """A header or event does not follow the session format; the message says what is wrong."""


class SessionNotFoundError(SessionError, LookupError):
    """No session with that id exists in the store."""

    def __init__(self, session_id: str, where: str = "") -> None:
        self.session_id = session_id
        suffix = f" in {where}" if where else ""
        super().__init__(f"session {session_id!r} not found{suffix}")


class SessionCorruptError(SessionError, ValueError):
    """A committed part of a log cannot be read; ``path`` and ``line`` point at the damage."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


class SessionLockedError(SessionError, RuntimeError):
    """Another writer (process, kernel or object) already holds the session open for writing."""
