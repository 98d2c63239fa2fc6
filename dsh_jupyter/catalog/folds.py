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

When the surviving lines of a log are small enough (:data:`DECODED_CAP` bytes; :data:`DECODED_TOTAL` for
all logs together), their decoded events are kept too, so an unchanged log is not even decoded again and
an appended one decodes only its new surface lines (a streaming reader of a log scanned afresh gets them
decoded as it reaches them, each kept as it is decoded). Events are immutable records shared the way a live
session's in-memory log shares them; a bigger surface is decoded on access, one event at a time, as
without a cache.

The ctime in the identity is what makes "unchanged" trustworthy: any write or ``utime`` moves it, and no
program can set it back. File times advance in coarse ticks, though, so a log read within
:data:`RACY_NS` of its last change could change again without its times moving: such an entry is never
trusted as unchanged (the next read scans it again, and keeps a trustworthy entry).

The one change the append check cannot see is an edit in place before the end of the committed prefix
that also makes the file longer and leaves every sampled byte as it was (the same limit as the catalog's
incremental indexing; ``Catalog.reindex`` or a new process forgets the cache).
A wrong entry can cost time, never a wrong answer as far as those checks reach.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from ..session import SessionError, SurfaceSnapshot
from ..store.identity import FileIdentity
from ..store.longline import LONG_LINE_BYTES, RAW_LONG_STRINGS
from ..store.scan import STREAM_SURFACE, fold_lines, folded_skips, surface_of

if TYPE_CHECKING:
    from ..session import Event
    from ..store.jsonl import JsonlStore
    from ..store.scan import FoldState, ScanResult

#: Logs whose fold result is kept (least recently read dropped first).
MAX_ENTRIES = 64
#: Surviving surface lines (bytes) of one log up to which its decoded events are kept.
DECODED_CAP = 16 << 20
#: Surviving surface lines (bytes) whose decoded events are kept for all logs together.
DECODED_TOTAL = 64 << 20
#: A log changed less than this long (nanoseconds) before it was read may change again within the same
#: file-time tick: its entry is not trusted as unchanged.
RACY_NS = 50_000_000
#: Sampled windows of the committed prefix that make up a fingerprint, and their size in bytes.
SAMPLES = 16
WINDOW = 64


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
    #: Decoded surviving events by seq (empty when the surface is too big to keep); ``cost`` their line bytes.
    decoded: dict[int, Event]
    cost: int
    #: Read so soon after the file's last change that the same identity may hide a later change.
    racy: bool


def surviving_bytes(state: FoldState) -> int:
    """Bytes of the surviving surface lines a read decodes (those left undecoded for ``skip_data`` excluded)."""
    skipped, locations = state.skipped, state.locations
    return sum(locations[seq][1] for seq in state.nodes if seq not in skipped)


@dataclass
class FoldStats:
    """How reads were served: ``unchanged`` (no scan), ``appended`` (the new part scanned), ``full``."""

    unchanged: int = 0
    appended: int = 0
    full: int = 0


class FoldCache:
    """Fold results of recently read logs (thread-safe; see the module docstring)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, *, decoded_cap: int = DECODED_CAP,
                 decoded_total: int = DECODED_TOTAL, racy_ns: int = RACY_NS) -> None:
        self.max_entries = max_entries
        self.racy_ns = racy_ns
        self.decoded_cap = decoded_cap
        self.decoded_total = decoded_total
        self.stats = FoldStats()
        self._entries: OrderedDict[tuple[str, frozenset[str]], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def scan_left(self, fh: BinaryIO, path: str, *, skip_data: Collection[str] = ()) -> int | None:
        """Bytes a :meth:`scan` of ``fh`` would scan now (the appended part of a kept fold), or ``None`` when
        its fold is not kept and the whole log would be scanned. Reads nothing but ``fstat``."""
        key = (os.path.abspath(path), folded_skips(skip_data))
        identity = FileIdentity.of(os.fstat(fh.fileno()))
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or not identity.same_file(entry.identity) or identity.size < entry.state.committed:
            return None
        return identity.size - entry.state.committed

    def read_surface(self, store: JsonlStore, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        """``store.read_surface(session_id, skip_data=...)``, served from the cache where the log allows it."""
        fh, path = store._open_log(session_id)
        with fh:
            scan, entry = self._scan(fh, str(path), skip_data=frozenset(skip_data), want_title=False)
        store._check_id(scan.header, session_id, path)
        return SurfaceSnapshot(scan.header, scan.last_seq, scan.surface, source_key=source_key(entry))

    def scan(self, fh: BinaryIO, path: str, *, skip_data: frozenset[str] = frozenset(), want_surface: bool = True,
             want_title: bool = True) -> ScanResult:
        """What :func:`~dsh_jupyter.store.scan.scan_surface` answers for ``fh``, scanning as little as the cache
        allows."""
        return self._scan(fh, path, skip_data=skip_data, want_surface=want_surface, want_title=want_title)[0]

    def _scan(self, fh: BinaryIO, path: str, *, skip_data: frozenset[str] = frozenset(), want_surface: bool = True,
              want_title: bool = True) -> tuple[ScanResult, _Entry | None]:
        """:meth:`scan`, and the entry it kept for the log (``None``: none, the log could not be kept)."""
        stream, raw = STREAM_SURFACE in skip_data, RAW_LONG_STRINGS in skip_data
        key = (os.path.abspath(path), folded_skips(skip_data))
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
            assert entry is not None
            try:
                result = self._surface(fh, path, state, want_surface, want_title, stream, entry.decoded, raw)
            except SessionError:
                state = None  # a saved line no longer decodes: the cache was wrong, read the log afresh
            else:
                return result, self._keep(key, fh, identity, state, kind, result, raw=raw)
        state = fold_lines(fh, path, skip_data=key[1])
        # A streaming reader of a log just scanned gets its surface decoded on access, even a small one: the
        # events it decodes are kept for the next read (``memo``), and those it never looks at (a prepare() whose
        # projection of this very log is kept already) cost nothing. The saved offsets of a cached entry are
        # checked by decoding them (a wrong entry costs a rescan, above); these are fresh from this scan.
        memo: dict[int, Event] | None = {} if stream and surviving_bytes(state) <= self.decoded_cap else None
        result = (self._surface(fh, path, state, want_surface, want_title, stream, {}, raw) if memo is None else
                  surface_of(fh, path, state, want_surface=want_surface, want_title=want_title, stream=True,
                             memo=memo, raw=raw))
        return result, self._keep(key, fh, identity, state, "full", result, memo, raw=raw)

    def _surface(self, fh: BinaryIO, path: str, state: FoldState, want_surface: bool, want_title: bool,
                 stream: bool, decoded: dict[int, Event], raw: bool) -> ScanResult:
        small = want_surface and surviving_bytes(state) <= self.decoded_cap
        return surface_of(fh, path, state, want_surface=want_surface, want_title=want_title,
                          stream=stream and not small, decoded=decoded, raw=raw)

    def _reuse(self, fh: BinaryIO, path: str, entry: _Entry, identity: FileIdentity,
               skip_data: frozenset[str]) -> tuple[FoldState | None, str]:
        saved = entry.state
        if not identity.same_file(entry.identity) or identity.size < saved.committed:
            return None, "full"
        if fingerprint(fh, saved.committed, saved.header_bytes) != entry.fingerprint:
            return None, "full"
        if identity == entry.identity:
            return (None, "full") if entry.racy else (saved, "unchanged")
        if identity.size <= entry.identity.size:
            return None, "full"  # rewritten at the same length or cut: an append always makes the file longer
        return fold_lines(fh, path, skip_data=skip_data, resume=saved), "appended"

    def _keep(self, key: tuple[str, frozenset[str]], fh: BinaryIO, identity: FileIdentity, state: FoldState,
              kind: str, result: ScanResult, memo: dict[int, Event] | None = None, *, raw: bool = False
              ) -> _Entry | None:
        """Keep what a read found; ``memo``: the dict a streamed surface fills as it decodes (kept as the decoded
        events, its cost counted at once); ``raw``: the read left long strings undecoded (events of long lines are
        then not kept: they are for that reader only)."""
        with self._lock:
            setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        if state.bad_line is not None or identity.size != state.file_size:
            # A crash tail cannot be continued (such a log is always scanned in full), and a file that changed
            # while it was read has no one identity to keep.
            with self._lock:
                self._entries.pop(key, None)
            return None
        cost = surviving_bytes(state)
        decoded: dict[int, Event] = {} if memo is None else memo
        if memo is None and cost <= self.decoded_cap and isinstance(result.surface, list):
            locations = state.locations
            decoded = {event.seq: event for event in result.surface if event.seq not in state.skipped
                       and not (raw and locations[event.seq][1] > LONG_LINE_BYTES)}
        racy = time.time_ns() - max(identity.mtime_ns, identity.ctime_ns) < self.racy_ns
        entry = _Entry(identity, state, fingerprint(fh, state.committed, state.header_bytes), decoded,
                       cost if decoded or memo is not None else 0, racy)
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries or (
                    len(self._entries) > 1 and sum(e.cost for e in self._entries.values()) > self.decoded_total):
                self._entries.popitem(last=False)
        return entry


def source_key(entry: _Entry | None) -> Hashable | None:
    """What a snapshot read with ``entry`` kept vouches for (:attr:`SurfaceSnapshot.source_key`): the file's
    identity and fingerprint, or ``None`` when the entry cannot be trusted to tell a later change (a log read
    within :data:`RACY_NS` of its last change, or one not kept)."""
    if entry is None or entry.racy:
        return None
    return (entry.identity, entry.fingerprint, entry.state.committed, entry.state.skip_data)
