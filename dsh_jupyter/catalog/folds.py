"""The fold cache: each read log's fold result, so reading a log that has not changed skips its scan.

A reference (``prepare()``) reads the current surface of its source logs. Folding a 100 MB log means
looking at every line; the lines that survive the fold are a small part of it. The catalog keeps, per log
and in memory, what the last fold found (:class:`~dsh_jupyter.store.scan.FoldState`: the offsets of the
surviving surface lines, the latest title, the committed offset, the next seq) with the file's identity
(device, inode, size, mtime and ctime) and a fingerprint of sampled bytes of its committed prefix. On the
next read of the same log:

* identity and fingerprint unchanged: nothing is scanned; only the surviving lines are decoded;
* same file, longer, same fingerprint (a log that was only appended to): only the appended part is
  scanned, continuing the saved fold;
* anything else (replaced, truncated, rewritten, a crash tail, a fold that cannot be continued, a saved
  line that no longer decodes): the log is scanned in full, as without a cache.

The ctime in the identity is what makes "unchanged" trustworthy: any write or ``utime`` moves it, and no
program can set it back. The one change the append check cannot see is an edit in place before the end
of the committed prefix that also makes the file longer and leaves every sampled byte as it was (the same
limit as the catalog's incremental indexing; ``Catalog.reindex`` or a new process forgets the cache).
A wrong entry can cost time, never a wrong answer as far as those checks reach.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from ..session import SurfaceSnapshot
    from ..store.jsonl import JsonlStore
    from ..store.scan import FoldState, ScanResult

#: Logs whose fold result is kept (least recently read dropped first).
MAX_ENTRIES = 64
#: Sampled windows of the committed prefix that make up a fingerprint, and their size in bytes.
SAMPLES = 16
WINDOW = 64


@dataclass(frozen=True)
class FileIdentity:
    """What ``fstat`` says about a log; any difference means "not the same bytes as last time"."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, result: os.stat_result) -> FileIdentity:
        return cls(int(result.st_dev), int(result.st_ino), int(result.st_size), int(result.st_mtime_ns),
                   int(result.st_ctime_ns))

    def same_file(self, other: FileIdentity) -> bool:
        return self.dev == other.dev and self.ino == other.ino


def fingerprint(fh: BinaryIO, committed: int, header_bytes: int) -> bytes:
    """A digest of sampled windows of the first ``committed`` bytes: the header line, evenly spaced windows,
    and the bytes right before ``committed``."""
    offsets = {0, max(0, header_bytes - WINDOW), max(0, committed - WINDOW)}
    offsets.update(committed * i // SAMPLES for i in range(1, SAMPLES))
    digest = hashlib.blake2b(digest_size=16)
    fd = fh.fileno()
    for offset in sorted(offsets):
        length = max(0, min(WINDOW, committed - offset))
        chunk = os.pread(fd, length, offset)
        digest.update(offset.to_bytes(8, "little") + len(chunk).to_bytes(2, "little") + chunk)
    return digest.digest()


@dataclass(frozen=True)
class _Entry:
    identity: FileIdentity
    state: FoldState
    fingerprint: bytes


@dataclass
class FoldStats:
    """How reads were served: ``unchanged`` (no scan), ``appended`` (the new part scanned), ``full``."""

    unchanged: int = 0
    appended: int = 0
    full: int = 0


class FoldCache:
    """Fold results of recently read logs (thread-safe; see the module docstring)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.stats = FoldStats()
        self._entries: OrderedDict[tuple[str, frozenset[str]], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def read_surface(self, store: JsonlStore, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        """``store.read_surface(session_id, skip_data=...)``, served from the cache where the log allows it."""
        from ..session import SurfaceSnapshot

        fh, path = store._open_log(session_id)
        with fh:
            scan = self.scan(fh, str(path), skip_data=frozenset(skip_data), want_title=False)
        store._check_id(scan.header, session_id, path)
        return SurfaceSnapshot(scan.header, scan.last_seq, scan.surface)

    def scan(self, fh: BinaryIO, path: str, *, skip_data: frozenset[str] = frozenset(), want_surface: bool = True,
             want_title: bool = True) -> ScanResult:
        """What :func:`~dsh_jupyter.store.scan.scan_surface` answers for ``fh``, scanning as little as the cache
        allows."""
        from ..session import SessionError
        from ..store.scan import STREAM_SURFACE, fold_lines, surface_of

        stream = STREAM_SURFACE in skip_data
        key = (os.path.abspath(path), skip_data - {STREAM_SURFACE})
        identity = FileIdentity.of(os.fstat(fh.fileno()))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        state: FoldState | None = None
        kind = "full"
        if entry is not None:
            try:
                state, kind = self._reuse(fh, path, entry, identity, key[1])
            except (SessionError, ValueError, OSError):
                state = None
        if state is not None:
            try:
                result = surface_of(fh, path, state, want_surface=want_surface, want_title=want_title,
                                    stream=stream)
            except SessionError:
                state = None  # a saved line no longer decodes: the cache was wrong, read the log afresh
            else:
                self._keep(key, fh, identity, state, kind)
                return result
        state = fold_lines(fh, path, skip_data=key[1])
        result = surface_of(fh, path, state, want_surface=want_surface, want_title=want_title, stream=stream)
        self._keep(key, fh, identity, state, "full")
        return result

    def _reuse(self, fh: BinaryIO, path: str, entry: _Entry, identity: FileIdentity,
               skip_data: frozenset[str]) -> tuple[FoldState | None, str]:
        from ..store.scan import fold_lines

        saved = entry.state
        if not identity.same_file(entry.identity) or identity.size < saved.committed:
            return None, "full"
        if fingerprint(fh, saved.committed, saved.header_bytes) != entry.fingerprint:
            return None, "full"
        if identity == entry.identity:
            return saved, "unchanged"
        if identity.size <= entry.identity.size:
            return None, "full"  # rewritten at the same length or cut: an append always makes the file longer
        return fold_lines(fh, path, skip_data=skip_data, resume=saved), "appended"

    def _keep(self, key: tuple[str, frozenset[str]], fh: BinaryIO, identity: FileIdentity, state: FoldState,
              kind: str) -> None:
        with self._lock:
            setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        if state.bad_line is not None:  # a crash tail cannot be continued: always scan such a log in full
            with self._lock:
                self._entries.pop(key, None)
            return
        if identity.size != state.file_size:  # the file changed while it was read
            with self._lock:
                self._entries.pop(key, None)
            return
        entry = _Entry(identity, state, fingerprint(fh, state.committed, state.header_bytes))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
