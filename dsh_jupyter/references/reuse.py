"""What a prepare() of an unchanged source uses again: its bounded projection and its saved spill.

A source's bounded projection (:mod:`.bounded`) and its full snapshot (:mod:`.spill`) depend only on the
source's bytes and the settings they were made for. When the reader vouches for the bytes (a snapshot's
``source_key``, given by the catalog's fold cache from the log's file identity and fingerprint), the resolver
keeps both:

* :class:`WarmProjections`: the bounded projection of a source, by its key, budget and spill cap, so an
  unchanged source is not projected and measured message by message again (at most
  :data:`MAX_HELD_TEXT` bytes of text kept for all sources together, least recently used dropped first);
* :class:`SavedSpills`: per target session folder, which file was written for which source. The next
  preparation of the same source for the same target, with the same label, budget, cap and masked secrets,
  names that file again instead of rendering and writing it anew.

A remembered file is used only while it is exactly as it was written: its device, inode, size, mtime and
ctime are compared first (a file edited, replaced, truncated or deleted since is written afresh; no program
can set a ctime back; the one edit this cannot see is one of the same size within the file-time tick of the
write itself). A source whose log grew, was rewritten, or was read too soon after a change to be trusted has
another key or none, and is projected and written afresh.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from ..secrets import default_masker
from .bounded import BoundedProjection
from .spill import SAVED, SpillResult

#: Saved spills remembered (least recently used forgotten first).
MAX_REMEMBERED = 64
#: Text (bytes) the kept projections may hold together; one bigger than this is not kept.
MAX_HELD_TEXT = 32 << 20


@dataclass(frozen=True)
class FileStamp:
    """What ``stat`` says about a saved file; any difference means it is no longer the file written."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp | None:
        try:
            result = os.stat(path, follow_symlinks=False)
        except OSError:
            return None
        return cls(result.st_dev, result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


SpillKey = tuple[str, Hashable, str, int, int, frozenset[str]]


def spill_key(folder: Path, source_key: Hashable | None, label: str, budget: int,
              max_spill_bytes: int) -> SpillKey | None:
    """What a saved spill of a source is remembered by, or ``None`` when the source's bytes are not vouched for."""
    if source_key is None:
        return None
    return (str(folder), source_key, label, budget, max_spill_bytes, default_masker().values())


class SavedSpills:
    """Spills written by one resolver, by :func:`spill_key` (thread-safe)."""

    def __init__(self, max_remembered: int = MAX_REMEMBERED) -> None:
        self.max_remembered = max_remembered
        self._saved: OrderedDict[SpillKey, tuple[SpillResult, FileStamp]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._saved)

    def lookup(self, key: SpillKey | None) -> SpillResult | None:
        """The saved spill of ``key`` when its file is still exactly as written, else ``None``."""
        if key is None:
            return None
        with self._lock:
            found = self._saved.get(key)
        if found is None:
            return None
        result, stamp = found
        assert result.path is not None
        if FileStamp.of(result.path) != stamp:
            with self._lock:
                self._saved.pop(key, None)
            return None
        with self._lock:
            if key in self._saved:
                self._saved.move_to_end(key)
        return result

    def remember(self, key: SpillKey | None, result: SpillResult) -> None:
        """Keep ``result`` (a spill just written) for ``key``; unsaved results and unvouched sources are not kept."""
        if key is None or result.status != SAVED or result.path is None:
            return
        stamp = FileStamp.of(result.path)
        if stamp is None:
            return
        with self._lock:
            self._saved[key] = (result, stamp)
            self._saved.move_to_end(key)
            while len(self._saved) > self.max_remembered:
                self._saved.popitem(last=False)


ProjectionKey = tuple[str, Hashable, int, int | None]


def projection_key(session_id: str, source_key: Hashable | None, budget: int,
                   spill_bytes: int | None) -> ProjectionKey | None:
    """What a kept projection is found by, or ``None`` when the source's bytes are not vouched for."""
    return None if source_key is None else (session_id, source_key, budget, spill_bytes)


class WarmProjections:
    """Bounded projections of vouched-for sources (thread-safe; see the module notes)."""

    def __init__(self, max_held_text: int = MAX_HELD_TEXT) -> None:
        self.max_held_text = max_held_text
        self._kept: OrderedDict[ProjectionKey, BoundedProjection] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: ProjectionKey | None) -> BoundedProjection | None:
        if key is None:
            return None
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def keep(self, key: ProjectionKey | None, projection: BoundedProjection) -> None:
        """Keep ``projection`` (never changed once built) for ``key``; the least recently used go beyond the cap."""
        if key is None or projection.held_text_bytes() > self.max_held_text:
            return
        with self._lock:
            self._kept[key] = projection
            self._kept.move_to_end(key)
            while sum(p.held_text_bytes() for p in self._kept.values()) > self.max_held_text:
                self._kept.popitem(last=False)
