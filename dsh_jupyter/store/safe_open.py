"""Opening store files without trusting them: regular files only, never blocking, never through a link.

A store can arrive from anywhere (a copied or unzipped folder), so any name in it may be a FIFO (an
open or read that never returns), a socket, a device such as ``/dev/zero`` (endless bytes), a symbolic
link out of the store, or a file this user may not read. :func:`open_log` opens without following a
link (the file itself and its session folder; the store root may be a link the user set up), without
blocking (``O_NONBLOCK``), checks with ``fstat`` that it holds a regular file, then clears
``O_NONBLOCK``. Everything else raises :class:`~dsh_jupyter.store.errors.UnsafeLogError` or
:class:`~dsh_jupyter.store.errors.LogPermissionError`, whose message names the file and says why.
A missing file (or folder) still raises :class:`FileNotFoundError` / :class:`NotADirectoryError`: callers
treat that as "no such session", not as damage.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import LogAccessError, LogPermissionError, UnsafeLogError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# A folder descriptor only anchors the no-follow open of the file inside it: O_PATH (Linux) is enough.
_FOLDER_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | _DIRECTORY | _NOFOLLOW | _CLOEXEC

_SKIP_HINT = "replace it with a regular session log, or remove it"
_PERMISSION_HINT = "ask the owner for read access (chmod/chown), or copy the session into a store of your own"


def kind_of(mode: int) -> str:
    """A plain-words name for a file type (``stat.st_mode``)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def _lstat_kind(path: str) -> str | None:
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError:
        return None


def _refusal(path: str, exc: OSError, *, what: str = "") -> OSError:
    """The error to raise for a failed no-follow open of ``path`` (``what`` names a folder's role)."""
    label = f"{path}{what}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return LogPermissionError(label, "cannot be read by this user (permission denied)", _PERMISSION_HINT)
    kind = _lstat_kind(path)
    if exc.errno == errno.ENOENT or kind is None:
        return exc
    if exc.errno == errno.ELOOP or kind == "a symbolic link":
        hint = "replace the link with the folder itself" if what else _SKIP_HINT
        return UnsafeLogError(label, "is a symbolic link, and store entries are never followed through links", hint)
    if exc.errno == errno.ENOTDIR:
        return exc  # a plain file where a folder should be: nothing is stored there
    if kind is not None and kind != "a regular file":
        return UnsafeLogError(label, f"is {kind}, not a regular file", _SKIP_HINT)
    return LogAccessError(label, f"cannot be opened ({exc.strerror or exc})", _SKIP_HINT)


def open_fd(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, mode: int = 0o644) -> int:
    """A descriptor of a regular file at ``path``, opened with ``flags`` plus no-follow, non-blocking and
    close-on-exec; the file's session folder (its parent) is not followed through a link either.

    Raises :class:`UnsafeLogError`, :class:`LogPermissionError` or :class:`LogAccessError` (see the module
    docstring), or the plain :class:`FileNotFoundError` when the file or its folder does not exist.
    """
    text = os.fspath(path)
    folder, name = os.path.split(text)
    folder_fd: int | None = None
    if folder:
        try:
            folder_fd = os.open(folder, _FOLDER_FLAGS)
        except OSError as exc:
            raise _refusal(folder, exc, what=" (the session's folder)") from None
    try:
        fd = os.open(name if folder_fd is not None else text, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode,
                     dir_fd=folder_fd)
    except OSError as exc:
        raise _refusal(text, exc) from None
    finally:
        if folder_fd is not None:
            os.close(folder_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeLogError(text, f"is {kind_of(info.st_mode)}, not a regular file", _SKIP_HINT)
        if fcntl is not None and _NONBLOCK:  # F_SETFL keeps the access mode and sets only the status flags
            fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write less than it is given)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises rather than returning 0 on regular files
            raise OSError("write made no progress")
        view = view[written:]


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a store file for reading, safely (see :func:`open_fd`): a buffered binary reader."""
    fd = open_fd(path, os.O_RDONLY)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:  # pragma: no cover - fdopen of a valid descriptor does not fail
        os.close(fd)
        raise


def read_small(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes from the start of a store file, opened safely (lock files, markers)."""
    with open_log(path) as fh:
        return fh.read(limit)


def write_problem(path: Path) -> str | None:
    """Why this user could not write ``path`` (a folder or a file), or ``None``. Never raises."""
    try:
        info = os.stat(path)
    except PermissionError:
        return "cannot be reached by this user (permission denied)"
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    with contextlib.suppress(OSError):
        if os.statvfs(path).f_flag & getattr(os, "ST_RDONLY", 1):
            return "is on a read-only file system"
    if stat.S_ISDIR(info.st_mode):
        return None if os.access(path, os.W_OK | os.X_OK) else "is a folder this user cannot write to"
    return None if os.access(path, os.W_OK) else "is a file this user cannot write to"


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (where a folder would be created). An ancestor this user
    cannot look into counts as existing, so :func:`write_problem` reports it."""
    probe = path
    while probe.parent != probe:
        try:
            os.lstat(probe)
        except FileNotFoundError:
            probe = probe.parent
            continue
        except OSError:
            return probe
        return probe
    return probe


__all__ = ["kind_of", "nearest_existing", "open_fd", "open_log", "read_small", "write_problem"]
