"""A small index of foreign transcripts: ``path → (size, mtime, inode) → header facts``.

Their files only grow, so a file whose identity is unchanged is not opened at all, and a file that only grew
(same inode, larger) is read from where the last scan stopped. Anything else (smaller, replaced) is scanned
again from the start. The index lives in one JSON file beside the session catalog
(``$DSH_HOME/foreign-sessions.json``), written atomically; losing it costs one full scan, never correctness.
The facts it keeps (title, first prompt, folder) are masked (:mod:`dsh_jupyter.secrets`) as they are put in.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._json import loads
from ..secrets import holds_encoded, mask_data, mask_fields
from .base import ForeignHeader, ScanState

log = logging.getLogger(__name__)

INDEX_NAME = "foreign-sessions.json"
INDEX_VERSION = 2

Identity = tuple[int, int, int]


@dataclass
class IndexEntry:
    identity: Identity
    state: ScanState
    #: The listing row built from ``state`` (kept in memory only).
    header: ForeignHeader | None = None


class ForeignIndex:
    """The facts of every transcript seen, loaded once and saved when something changed."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, IndexEntry] | None = None
        self._dirty = False
        self._lock = threading.Lock()

    def _load(self) -> dict[str, IndexEntry]:
        if self._entries is not None:
            return self._entries
        entries: dict[str, IndexEntry] = {}
        if self.path is not None:
            try:
                data = self.path.read_bytes()
                raw = loads(data)
                if holds_encoded(data):  # a file an older version wrote unmasked: masked as it is read
                    raw = mask_data(raw)
            except (OSError, ValueError):
                raw = None
            if isinstance(raw, dict) and raw.get("version") == INDEX_VERSION and isinstance(raw.get("files"), dict):
                for name, record in raw["files"].items():
                    entry = _entry(record)
                    if entry is not None:
                        entries[name] = entry
        self._entries = entries
        return entries

    def entries(self) -> dict[str, IndexEntry]:
        """Every entry, loaded (the live mapping: read it, change it only through :meth:`put`)."""
        with self._lock:
            return self._load()

    def get(self, path: str) -> IndexEntry | None:
        with self._lock:
            return self._load().get(path)

    def put(self, path: str, identity: Identity, state: ScanState) -> ScanState:
        """Keep what a scan of ``path`` found, its texts masked (listings show them, the index file keeps them);
        returns the state as kept."""
        entry = IndexEntry(identity, mask_fields(state))
        with self._lock:
            self._load()[path] = entry
            self._dirty = True
        return entry.state

    def remember(self, path: str, header: ForeignHeader) -> None:
        """Keep the listing row of an unchanged file, so the next listing does not rebuild it."""
        with self._lock:
            entry = self._load().get(path)
            if entry is not None:
                entry.header = header

    def keep_only(self, paths: set[str]) -> None:
        """Forget files that are gone."""
        with self._lock:
            entries = self._load()
            gone = [p for p in entries if p not in paths]
            for name in gone:
                del entries[name]
            self._dirty = self._dirty or bool(gone)

    def save(self) -> None:
        with self._lock:
            if not self._dirty or self.path is None or self._entries is None:
                return
            files = {name: [*e.identity, *e.state.to_json()] for name, e in self._entries.items()}
            data = orjson.dumps({"version": INDEX_VERSION, "files": files})
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, temp = tempfile.mkstemp(prefix=".foreign-", dir=self.path.parent)
                try:
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                    os.replace(temp, self.path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temp)
                    raise
            except OSError as exc:  # an index only: the next listing scans again
                log.info("could not save the index of other tools' sessions: %s", exc)
                return
            self._dirty = False


def _entry(record: Any) -> IndexEntry | None:
    """One file's ``[size, mtime_ns, inode, *state]`` (see :meth:`ScanState.to_json`), or ``None``."""
    if type(record) is not list or len(record) != 10:
        return None
    size, mtime, inode, offset, native, cwd, created, title, rank, first = record
    if (type(size) is not int or type(mtime) is not int or type(inode) is not int or type(offset) is not int
            or type(created) is not int or type(rank) is not int or offset < 0):
        return None
    state = ScanState(offset, native if type(native) is str else None, cwd if type(cwd) is str else None, created,
                      title if type(title) is str else None, rank, first if type(first) is str else None)
    return IndexEntry((size, mtime, inode), state)
