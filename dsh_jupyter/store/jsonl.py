"""The default backend: one plain JSON-lines file per session, beside the notebook.

Layout: ``<root>/<encode_segment(id)>/session.jsonl`` (the folder also holds the writer lock and any
session-owned artifacts). The file is uncompressed, so ``pandas.read_json(path, lines=True)`` reads it.

Writing: appends are buffered in memory; :meth:`JsonlWriter.flush` makes them durable. The first flush
publishes the header and the first batch together (temp file, fsync, ``link`` without overwrite, fsync
of the folder); later flushes append and fsync, and a failure truncates the file back to its previous
length. One writer per session, enforced with a non-blocking ``flock``; readers never lock.

Reading trusts nothing in the store: every log is opened with :func:`~.safe_open.open_log` (a FIFO, socket,
device or link is refused with a message naming it, and never blocks), a listing skips such entries with a
warning instead of failing, and :meth:`JsonlStore.check_writable` tells a host before a turn starts that
a read-only store can be listed and referenced but not written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import uuid
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .._json import dumpb
from ..secrets import mask_encoded
from ..session import (
    Event,
    SessionFormatError,
    SessionHeader,
    SessionLog,
    SessionNotFoundError,
    SurfaceSnapshot,
)
from ..session.events import KNOWN_TYPES, SYSTEM_MESSAGE
from .base import BufferedWriter, SessionLocation, SessionStore
from .errors import LogAccessError, SessionExistsError, SessionWriteError, StoreReadOnlyError
from .locking import WriterLock
from .paths import LOCK_NAME, LOG_NAME, UnreadableEntry, list_session_folders, session_folder_name
from .repair import resumed
from .safe_open import nearest_existing, open_fd, open_log, write_all, write_problem
from .scan import MAX_LINE_BYTES, EventStream, read_header, scan_events, scan_surface

log = logging.getLogger(__name__)

_TEMP_PREFIX = ".session.jsonl."
_TEMP_SUFFIX = ".tmp"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents; returns the folders whose listing changed (to fsync)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    changed: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        changed.append(folder.parent)
    return changed


def encode_event(event: Event, expected_seq: int, *, newline: bool = True) -> bytes:
    """Validate one event for appending and return its line (with newline, unless ``newline`` is false: the body a
    SQL store keeps), secret values masked."""
    if not isinstance(event, Event):
        raise TypeError(f"append() takes Event objects, got {type(event).__name__}")
    if event.seq != expected_seq:
        raise SessionFormatError(
            f"cannot append seq {event.seq}: the log continues at seq {expected_seq}. Events must be appended "
            "in order with contiguous seqs (build them with SessionLog.append)."
        )
    if event.type not in KNOWN_TYPES and event.type != SYSTEM_MESSAGE and not event.ignorable:
        raise SessionFormatError(
            f"cannot append event type {event.type!r}: readers refuse unknown types; mark it ignorable=True "
            "if readers that do not know it may skip it"
        )
    try:
        line = mask_encoded(event.to_json(), dumpb)
    except (TypeError, ValueError) as exc:
        raise SessionFormatError(f"event seq {event.seq} ({event.type}) holds data that is not JSON: {exc}") from None
    if newline:
        line += b"\n"
    if len(line) + (not newline) > MAX_LINE_BYTES:  # readers refuse longer lines: never write one
        raise SessionFormatError(
            f"event seq {event.seq} ({event.type}) is {len(line) / 2**20:.0f} MiB, over the "
            f"{MAX_LINE_BYTES >> 20} MiB that one logged event may hold; put large data in a file and mention it"
        )
    return line


class JsonlWriter(BufferedWriter[bytes]):
    """The single writer of one JSONL session (see the module docstring for the guarantees)."""

    def __init__(self, store: JsonlStore, header: SessionHeader, *, lock: WriterLock | None = None,
                 size: int | None = None, next_seq: int = 0) -> None:
        super().__init__(header, lock=lock, next_seq=next_seq)
        self._store = store
        self.folder = store.folder(header.id)
        self.path = self.folder / LOG_NAME
        self._size = size  # bytes on disk; None until the log is published
        self._fd: int | None = None
        self._new_dirs: list[Path] = []
        self._broken: str | None = None

    @property
    def materialized(self) -> bool:
        return self._size is not None

    def _encode(self, event: Event, seq: int) -> bytes:
        return encode_event(event, seq)

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _flush_locked(self) -> None:
        if not self._buffer:
            return
        if self._broken is not None:
            raise SessionWriteError(
                f"the writer of {self.path} stopped after {self._broken}; close it and reopen the session with "
                "store.open(id)"
            )
        data = b"".join(self._buffer)
        if self._size is None:
            self._publish(data)
        else:
            self._append(data)
        self._buffer.clear()
        self._stored_seq = self._next_seq

    def _publish(self, data: bytes) -> None:
        """First flush: header plus first batch appear at once, and never over an existing log."""
        if self._lock is None:
            try:
                self._new_dirs = _make_dirs(self.folder)
            except OSError as exc:
                raise SessionWriteError(
                    f"could not create the session folder {self.folder} ({exc}); nothing was stored and the "
                    f"{self.pending} buffered event(s) are kept, so flush() can be retried"
                ) from exc
            self._lock = WriterLock.acquire(self.folder / LOCK_NAME, session_id=self.header.id, log=str(self.path))
        _remove_stale_temps(self.folder)
        if self.path.exists():
            raise SessionExistsError(
                f"cannot create session {self.header.id!r}: {self.path} already exists (another writer created "
                "it first). Nothing was written. Resume it with store.open(id), or start a new session."
            )
        payload = dumpb(self.header.to_json()) + b"\n" + data
        temp = self.folder / f"{_TEMP_PREFIX}{uuid.uuid4().hex}{_TEMP_SUFFIX}"
        linked = False
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                write_all(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(temp, self.path)  # fails if the name exists: never overwrites
            linked = True
            # The log's name, and the session folder's own entry if it is new, must survive a power cut.
            for folder in (self.folder, *reversed(self._new_dirs)):
                _fsync_dir(folder)
        except FileExistsError:
            temp.unlink(missing_ok=True)
            raise SessionExistsError(
                f"cannot create session {self.header.id!r}: {self.path} appeared while it was being published "
                "(another writer). Nothing was written."
            ) from None
        except OSError as exc:
            if linked:
                self.path.unlink(missing_ok=True)
            temp.unlink(missing_ok=True)
            raise SessionWriteError(
                f"could not create {self.path} ({exc}); nothing was stored and the {self.pending} buffered "
                "event(s) are kept, so flush() can be retried once the problem (disk full, permissions) is fixed"
            ) from exc
        self._size = len(payload)  # published: from here on, flushes append
        self._new_dirs = []
        with contextlib.suppress(OSError):  # a leftover temp file is removed by the next writer of this session
            temp.unlink()

    def _append(self, data: bytes) -> None:
        assert self._size is not None
        try:
            if self._fd is None:
                self._fd = open_fd(self.path, os.O_WRONLY | os.O_APPEND)
            write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError as exc:
            if self._fd is None:
                raise SessionWriteError(
                    f"could not open {self.path} for appending ({exc}); nothing was written and the "
                    f"{self.pending} buffered event(s) are kept, so flush() can be retried"
                ) from exc
            try:
                os.ftruncate(self._fd, self._size)
                restored = "the file was truncated back to its previous length"
                # If this fails, the next successful flush syncs the truncation together with the retried batch.
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
            except OSError as undo:
                # The file may now end with part of this batch: appending the batch again would repeat seqs.
                self._broken = f"a failed append could not be undone ({undo})"
                restored = (f"truncating it back to {self._size} bytes also failed ({undo}), so it may keep part of "
                            "this batch; this writer stops here: close it and reopen the session with store.open(id), "
                            "which keeps the complete lines and repairs the rest")
            raise SessionWriteError(
                f"could not append to {self.path} ({exc}); {restored}. The {self.pending} buffered event(s) are "
                "kept, so flush() can be retried once the problem (disk full, permissions) is fixed."
            ) from exc
        self._size += len(data)


def _remove_stale_temps(folder: Path) -> None:
    """Temp files left by a writer killed between publishing and cleaning up (we hold the lock)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(_TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX):
            with contextlib.suppress(OSError):
                os.unlink(folder / name)


class JsonlStore(SessionStore):
    """Sessions as JSON-lines files under ``root`` (resolved to an absolute path once, here)."""

    kind = "jsonl"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.abspath(os.path.expanduser(os.fspath(root))))
        self._skipped: list[UnreadableEntry] = []
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.root)!r})"

    # -- layout (no I/O) ---------------------------------------------------------------------------------
    def folder(self, session_id: str) -> Path:
        """The folder of one session (it exists only once the session was flushed)."""
        return self.root / session_folder_name(session_id)

    def log_path(self, session_id: str) -> Path:
        return self.folder(session_id) / LOG_NAME

    def locate(self, header: SessionHeader) -> SessionLocation:
        return SessionLocation(self.kind, str(self.log_path(header.id)))

    def session_dir(self, header: SessionHeader) -> Path:
        return self.folder(header.id)

    # -- writing ---------------------------------------------------------------------------------------
    def create(self, header: SessionHeader) -> JsonlWriter:
        header.validate()
        path = self.log_path(header.id)
        if self.exists(header.id):
            raise SessionExistsError(
                f"session {header.id!r} already exists at {path}; resume it with store.open(id) or start a new session"
            )
        return JsonlWriter(self, header)

    def open(self, session_id: str) -> tuple[SessionLog, JsonlWriter]:
        fh, path = self._open_log(session_id)
        with fh:
            self.check_writable(session_id)
            lock = WriterLock.acquire(path.parent / LOCK_NAME, session_id=session_id, log=str(path))
            try:
                _remove_stale_temps(path.parent)
                scan = scan_events(fh, str(path))
                self._check_id(scan.header, session_id, path)
                if scan.torn_bytes:
                    # Drop the torn line / tolerated crash tail so new lines follow the committed prefix.
                    _truncate(path, scan.committed_bytes)
                session = SessionLog(scan.header, scan.events)
                writer = JsonlWriter(self, scan.header, lock=lock, size=scan.committed_bytes,
                                     next_seq=scan.next_seq)
            except BaseException:
                lock.release()
                raise
        return resumed(session, writer)

    def delete(self, session_id: str) -> None:
        folder = self.folder(session_id)
        path = folder / LOG_NAME
        if not self.exists(session_id):
            raise SessionNotFoundError(session_id, str(self.root))
        lock = WriterLock.acquire(folder / LOCK_NAME, session_id=session_id, log=str(path))
        try:
            shutil.rmtree(folder)
        finally:
            lock.release()

    # -- writability ---------------------------------------------------------------------------------
    def check_writable(self, session_id: str | None = None) -> None:
        """Raise :class:`StoreReadOnlyError` when a turn could not be saved: the store root (or, for an
        existing session, its folder and log) cannot be written by this user or sits on a read-only file
        system. Reading, listing and referencing never need this."""
        if session_id is not None and self.exists(session_id):
            targets = [self.folder(session_id), self.log_path(session_id)]
        else:
            targets = [nearest_existing(self.root)]
        for target in targets:
            problem = write_problem(target)
            if problem is not None:
                what = "session" if session_id is None else f"session {session_id!r}"
                raise StoreReadOnlyError(
                    f"the session store {self.root} is read-only here ({target} {problem}), so the {what} can be "
                    "listed and referenced but a new turn could not be saved. Nothing was sent or written. Set "
                    "%config DshMagics.sessions_dir (or $DSH_SESSIONS_DIR) to a folder you can write to, or ask "
                    "the owner for write access."
                )

    # -- reading (never locks) -----------------------------------------------------------------------------
    def _open_log(self, session_id: str) -> tuple[BinaryIO, Path]:
        """The session's log, opened safely: not found, or a clear error naming the file (never a hang)."""
        path = self.log_path(session_id)
        try:
            return open_log(path), path
        except (FileNotFoundError, NotADirectoryError):
            raise SessionNotFoundError(session_id, str(self.root)) from None

    @staticmethod
    def _check_id(header: SessionHeader, session_id: str, path: Path) -> None:
        if header.id != session_id:
            raise SessionFormatError(
                f"{path} holds session {header.id!r}, not {session_id!r}: the file was copied or renamed into "
                "the wrong folder. Move it to the folder named for its own id."
            )

    def header(self, session_id: str) -> SessionHeader:
        """A direct lookup: the session's folder is computed from its id and only that header is read."""
        fh, path = self._open_log(session_id)
        with fh:
            header, _ = read_header(fh, str(path))
        self._check_id(header, session_id, path)
        return header

    def load(self, session_id: str) -> SessionLog:
        fh, path = self._open_log(session_id)
        with fh:
            scan = scan_events(fh, str(path))
        self._check_id(scan.header, session_id, path)
        return SessionLog(scan.header, scan.events)

    @contextlib.contextmanager
    def stream_events(self, session_id: str) -> Iterator[tuple[SessionHeader, Iterable[Event]]]:
        """The log's events decoded one line at a time (:class:`~dsh_jupyter.store.scan.EventStream`)."""
        fh, path = self._open_log(session_id)
        with fh:
            stream = EventStream(fh, str(path))
            self._check_id(stream.header, session_id, path)
            yield stream.header, stream

    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        fh, path = self._open_log(session_id)
        with fh:
            scan = scan_surface(fh, str(path), want_title=False, skip_data=frozenset(skip_data))
        self._check_id(scan.header, session_id, path)
        return SurfaceSnapshot(scan.header, scan.last_seq, scan.surface)

    def read_title(self, session_id: str) -> dict[str, Any] | None:
        """The latest title, decoding only that line. The scan runs forward over the whole file (without
        decoding) so a title is reported only from the committed log, exactly as ``read_surface`` sees it:
        never from a torn tail or from after a damaged line."""
        fh, path = self._open_log(session_id)
        with fh:
            scan = scan_surface(fh, str(path), want_surface=False)
        self._check_id(scan.header, session_id, path)
        return scan.title

    def list_headers(self) -> list[SessionHeader]:
        """Every readable session's header. An entry that cannot be read (not a regular file, a link, a
        damaged or foreign header, no permission) is skipped with a warning naming it, never hiding the
        rest; :attr:`skipped` holds the warnings of the latest listing, :attr:`unreadable` the entries."""
        folders, skipped = list_session_folders(self.root)
        headers: list[SessionHeader] = []
        for name, path in folders:
            try:
                with open_log(path) as fh:
                    header, _ = read_header(fh, str(path))
            except (FileNotFoundError, NotADirectoryError):
                continue  # a folder without a log (e.g. a writer that never flushed)
            except LogAccessError as exc:
                skipped.append(UnreadableEntry(path, f"it {exc.reason}" + (f"; {exc.hint}" if exc.hint else "")))
                continue
            except ValueError as exc:  # a damaged or foreign header: the message starts with the path
                text = str(exc)
                reason = text[len(f"{path}: "):] if text.startswith(f"{path}: ") else text
                skipped.append(UnreadableEntry(path, reason))
                continue
            except OSError as exc:
                skipped.append(UnreadableEntry(path, f"it cannot be read ({exc.strerror or exc})"))
                continue
            if session_folder_name(header.id) != name:
                skipped.append(UnreadableEntry(path, f"it holds session {header.id!r}, whose folder would be "
                                                     f"{session_folder_name(header.id)!r}"))
                continue
            headers.append(header)
        self._report(skipped)
        return headers

    @property
    def skipped(self) -> list[str]:
        """Warnings for the entries the latest :meth:`list_headers` skipped (each names its entry)."""
        return [entry.message for entry in self._skipped]

    @property
    def unreadable(self) -> list[UnreadableEntry]:
        """The entries the latest :meth:`list_headers` skipped, each with its reason."""
        return list(self._skipped)

    def _report(self, skipped: list[UnreadableEntry]) -> None:
        self._skipped = skipped
        for entry in skipped:
            message = entry.message
            if message not in self._warned:  # once per store object, not on every keystroke's listing
                self._warned.add(message)
                log.warning("%s", message)

    def exists(self, session_id: str) -> bool:
        try:
            return stat.S_ISREG(os.lstat(self.log_path(session_id)).st_mode)
        except OSError:
            return False


def _truncate(path: Path, size: int) -> None:
    """Cut a log back to ``size`` bytes (the writer's lock is held), durably."""
    fd = open_fd(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["JsonlStore", "JsonlWriter", "encode_event"]
