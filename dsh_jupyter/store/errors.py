"""Errors raised by the storage backends (on top of the session errors in :mod:`dsh_jupyter.session`)."""

from __future__ import annotations

from ..session import SessionError


class SessionExistsError(SessionError, FileExistsError):
    """A writer for a *new* session found a stored log with the same id (another writer created it)."""


class SessionWriteError(SessionError, OSError):
    """Writing to storage failed. The stored log is as it was before the write, and the events that
    were being written are still buffered in the writer, so a later ``flush()`` can retry them."""
