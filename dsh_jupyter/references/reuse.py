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
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

from ..secrets import default_masker
from ..store.identity import FileIdentity
from .bounded import BoundedProjection
from .spill import SAVED, SpillResult

#: Saved spills remembered (least recently used forgotten first).
MAX_REMEMBERED = 64
#: Text (bytes) the kept projections may hold together; one bigger than this is not kept.
MAX_HELD_TEXT = 32 << 20

K = TypeVar("K")
V = TypeVar("V")


def _stamp(path: Path) -> FileIdentity | None:
    """What ``stat`` says about a saved file (any difference: no longer the file written), ``None`` when gone."""
    try:
        return FileIdentity.of(os.stat(path, follow_symlinks=False))
    except OSError:
        return None


class _Recent(Generic[K, V]):
    """A thread-safe mapping that forgets its least recently used entries first."""

    def __init__(self) -> None:
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: K, value: V, too_many: Callable[[OrderedDict[K, V]], bool]) -> None:
        """Keep ``value``, then forget the oldest entries while ``too_many`` says so."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while self._items and too_many(self._items):
                self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)


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
        self._saved: _Recent[SpillKey, tuple[SpillResult, FileIdentity]] = _Recent()

    def __len__(self) -> int:
        return len(self._saved)

    def lookup(self, key: SpillKey | None) -> SpillResult | None:
        """The saved spill of ``key`` when its file is still exactly as written, else ``None``."""
        found = self._saved.get(key) if key is not None else None
        if found is None:
            return None
        result, stamp = found
        assert result.path is not None
        if _stamp(result.path) != stamp:
            assert key is not None
            self._saved.pop(key)
            return None
        return result

    def remember(self, key: SpillKey | None, result: SpillResult) -> None:
        """Keep ``result`` (a spill just written) for ``key``; unsaved results and unvouched sources are not kept."""
        if key is None or result.status != SAVED or result.path is None:
            return
        stamp = _stamp(result.path)
        if stamp is not None:
            self._saved.put(key, (result, stamp), lambda items: len(items) > self.max_remembered)


ProjectionKey = tuple[str, Hashable, int, int | None]


def projection_key(session_id: str, source_key: Hashable | None, budget: int,
                   spill_bytes: int | None) -> ProjectionKey | None:
    """What a kept projection is found by, or ``None`` when the source's bytes are not vouched for."""
    return None if source_key is None else (session_id, source_key, budget, spill_bytes)


class WarmProjections:
    """Bounded projections of vouched-for sources (thread-safe; see the module notes)."""

    def __init__(self, max_held_text: int = MAX_HELD_TEXT) -> None:
        self.max_held_text = max_held_text
        self._kept: _Recent[ProjectionKey, BoundedProjection] = _Recent()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: ProjectionKey | None) -> BoundedProjection | None:
        return self._kept.get(key) if key is not None else None

    def keep(self, key: ProjectionKey | None, projection: BoundedProjection) -> None:
        """Keep ``projection`` (never changed once built) for ``key``; the least recently used go beyond the cap."""
        if key is None or projection.held_text_bytes() > self.max_held_text:
            return
        self._kept.put(key, projection,
                       lambda items: sum(p.held_text_bytes() for p in items.values()) > self.max_held_text)
