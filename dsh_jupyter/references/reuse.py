"""Saved spills used again: a source that has not changed is not written out a second time.

A truncated source's full snapshot (:mod:`.spill`) depends only on the source's bytes, its label, the spill
cap and the secrets being masked. When the reader vouches for the bytes (a snapshot's ``source_key``, given
by the catalog's fold cache from the log's file identity and fingerprint), the resolver remembers, per
target session folder, which file it wrote for which source. The next preparation of the same source for
the same target, with the same label, budget, cap and masked secrets, names that file again instead of
rendering and writing it anew.

A remembered file is used only while it is exactly as it was written: its device, inode, size, mtime and
ctime are compared first (a file edited, replaced, truncated or deleted since is written afresh; no program
can set a ctime back). A source whose log grew, was rewritten, or was read too soon after a change to be
trusted has another key or none, and gets a new file.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from ..secrets import default_masker
from .spill import SAVED, SpillResult

#: Saved spills remembered (least recently used forgotten first).
MAX_REMEMBERED = 64


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
