"""Errors raised by the storage backends (on top of the session errors in :mod:`dsh_jupyter.session`)."""

from __future__ import annotations

from ..session import SessionError


class SessionExistsError(SessionError, FileExistsError):
    """A writer for a *new* session found a stored log with the same id (another writer created it)."""


class SessionWriteError(SessionError, OSError):
    """Writing to storage failed. The stored log is as it was before the write, and the events that
    were being written are still buffered in the writer, so a later ``flush()`` can retry them."""


class LogAccessError(SessionError, OSError):
    """A file of the store could not be opened for reading; ``path`` names it and ``reason`` says why.

    It is an :class:`OSError` too, so code that already treats unreadable files as skipped keeps doing so.
    """

    def __init__(self, path: str, reason: str, hint: str = "") -> None:
        self.path = path
        self.reason = reason
        self.hint = hint
        message = f"{path} {reason}"
        super().__init__(f"{message}; {hint}" if hint else message)

    def as_skipped(self) -> str:
        """The warning for a listing that leaves this entry out."""
        return f"skipped {self.path}: it {self.reason}" + (f"; {self.hint}" if self.hint else "")


class UnsafeLogError(LogAccessError):
    """The store entry is not a regular file inside the store (a FIFO, socket, device, folder or a
    symbolic link): it is never read, so it can neither block a reader nor feed it endless bytes."""


class LogPermissionError(LogAccessError, PermissionError):
    """The operating system refused to let this user read a file or folder of the store."""


class StoreReadOnlyError(SessionError, PermissionError):
    """The store can be read but not written: sessions can be listed and referenced, not continued."""
