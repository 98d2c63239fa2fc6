"""A small index of foreign transcripts: ``path → (size, mtime, inode) → header facts``.

Their files only grow, so a file whose identity is unchanged is not opened at all, and a file that only grew
(same inode, larger) is read from where the last scan stopped. Anything else (smaller, replaced) is scanned
again from the start. The index lives in one JSON file beside the session catalog
(``$DSH_HOME/foreign-sessions.json``), written atomically; losing it costs one full scan, never correctness.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import ScanState

log = logging.getLogger(__name__)

INDEX_NAME = "foreign-sessions.json"
INDEX_VERSION = 1

Identity = tuple[int, int, int]


@dataclass
class IndexEntry:
    identity: Identity
    state: ScanState


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
                raw = json.loads(self.path.read_bytes())
            except (OSError, ValueError):
                raw = None
            if isinstance(raw, dict) and raw.get("version") == INDEX_VERSION and isinstance(raw.get("files"), dict):
                for name, record in raw["files"].items():
                    entry = _entry(record)
                    if entry is not None:
                        entries[name] = entry
        self._entries = entries
        return entries

    def get(self, path: str) -> IndexEntry | None:
        with self._lock:
            return self._load().get(path)

    def put(self, path: str, identity: Identity, state: ScanState) -> None:
        with self._lock:
            self._load()[path] = IndexEntry(identity, state)
            self._dirty = True

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
            files = {name: {"identity": list(e.identity), "state": e.state.to_json()}
                     for name, e in self._entries.items()}
            data = json.dumps({"version": INDEX_VERSION, "files": files}, separators=(",", ":")).encode()
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
    if not isinstance(record, dict):
        return None
    identity = record.get("identity")
    state = ScanState.from_json(record.get("state"))
    if (state is None or not isinstance(identity, list) or len(identity) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in identity)):
        return None
    return IndexEntry((identity[0], identity[1], identity[2]), state)
