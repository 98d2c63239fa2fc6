"""The single-writer lock: an exclusive, non-blocking ``flock`` on a small lock file.

``flock`` locks belong to an open file description, so two writers conflict whether they live in two
processes or in one, and the kernel drops the lock when its holder dies (no stale locks after a crash).
Acquiring never waits: a held lock raises :class:`~dsh_jupyter.session.SessionLockedError` at once.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..session import SessionLockedError
from .errors import StoreReadOnlyError
from .safe_open import open_fd, read_small

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt


def _try_lock(fd: int) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return False
            raise
        return True
    try:  # pragma: no cover - Windows
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:  # pragma: no cover
        return False
    return True  # pragma: no cover


def _holder(path: Path) -> str:
    try:
        text = read_small(path, 32).decode("ascii", errors="replace").strip()
    except OSError:
        return ""
    return f" (held by process {text})" if text.isdigit() else ""


class WriterLock:
    """An acquired writer lock; :meth:`release` (or process exit) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, *, session_id: str, log: str) -> WriterLock:
        """Take the lock at ``path`` (creating the file) or raise :class:`SessionLockedError` at once.

        ``log`` names where the session is stored, for the error message.
        """
        try:
            fd = open_fd(path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
                raise StoreReadOnlyError(
                    f"session {session_id!r} ({log}) cannot be opened for writing: its folder is read-only for "
                    "this user, so the session can be read and referenced but not continued. Start a new "
                    "session in a store you can write to (%config DshMagics.sessions_dir or $DSH_SESSIONS_DIR)."
                ) from None
            raise
        try:
            locked = _try_lock(fd)
        except BaseException:
            os.close(fd)
            raise
        if not locked:
            os.close(fd)
            raise SessionLockedError(
                f"session {session_id!r} ({log}) is already open for writing{_holder(path)}. Only one "
                "writer per session is allowed: close the other writer (shut down the kernel or notebook "
                "that has it open, or call close() on its writer), or start a new session instead."
            )
        try:  # Record who holds it, for the next writer's error message. Best effort.
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode("ascii"))
        except OSError:
            pass
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Release the lock. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock
