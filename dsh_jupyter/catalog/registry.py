"""Known session stores: the catalog's ``stores`` table, and the list kept beside the catalog so a lost
catalog can be rebuilt in full.

A store is named by its absolute, symlink-resolved root (:func:`store_root`).
``<DSH_HOME>/catalog-stores.json`` holds ``{"version": 1, "stores": [{"root": path, "registered": ms}]}``.
It changes only when a store is used for the first time, under a file lock, and is replaced atomically
(temp file and rename). It never holds anything about sessions: those always come from the logs.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..atomic import write_atomic

log = logging.getLogger(__name__)

REGISTRY_NAME = "catalog-stores.json"
_LOCK_TIMEOUT = 2.0
#: The lock guards one small read and write, held for milliseconds: poll often (filelock's default sleeps 50 ms,
#: which a first prompt paid whenever the background indexer held the lock just then).
_LOCK_POLL = 0.002


def store_root(path: str | os.PathLike[str]) -> str:
    """The catalog's name for a store: its absolute, symlink-resolved path."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path))))


@dataclass(frozen=True)
class StoreInfo:
    """A known store: its root, how many sessions it holds, and whether it is fully indexed."""

    root: str
    sessions: int
    ready: bool
    missing: bool

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "sessions": self.sessions, "ready": self.ready, "missing": self.missing}


@dataclass(frozen=True)
class KnownStore:
    """A ``stores`` row: ``dir_mtime_ns`` is the root's mtime when its listing was last reconciled."""

    id: int
    root: str
    dir_mtime_ns: int
    ready: bool
    missing: bool


def came_back(store: KnownStore | StoreInfo) -> bool:
    """Whether ``store`` is marked missing although its root is a folder again (created after the store was
    registered, or moved back). The mark goes only once the store is indexed; until then the catalog treats it as a
    store still being indexed (its logs read directly, its listings not complete)."""
    return store.missing and os.path.isdir(store.root)


def load_stores(conn: sqlite3.Connection) -> dict[int, KnownStore]:
    """Every row of ``stores`` by id."""
    return {
        int(r[0]): KnownStore(int(r[0]), os.fsdecode(bytes(r[1])), int(r[2]), bool(r[3]), bool(r[4]))
        for r in conn.execute("SELECT id, root, dir_mtime_ns, ready, missing FROM stores")
    }


def store_id(conn: sqlite3.Connection, name: str) -> int | None:
    """The id of the store named ``name``, or ``None`` when the catalog does not know it."""
    row = conn.execute("SELECT id FROM stores WHERE root = ?", (os.fsencode(name),)).fetchone()
    return None if row is None else int(row[0])


def store_infos(conn: sqlite3.Connection) -> list[StoreInfo]:
    """Every known store with its session count, by root."""
    rows = conn.execute(
        "SELECT root, ready, missing, (SELECT count(*) FROM sessions s WHERE s.store_id = stores.id) "
        "FROM stores ORDER BY root").fetchall()
    return [StoreInfo(os.fsdecode(bytes(r[0])), int(r[3]), bool(r[1]), bool(r[2])) for r in rows]


def registry_path(home: Path) -> Path:
    return home / REGISTRY_NAME


def read_roots(home: Path) -> list[str]:
    """Store roots listed in the registry (empty when it is missing or unreadable)."""
    path = registry_path(home)
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="surrogateescape"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("catalog: ignoring the unreadable store list %s (%s); stores are registered again as they "
                    "are used", path, exc)
        return []
    stores = data.get("stores") if isinstance(data, dict) else None
    roots: list[str] = []
    for entry in stores if isinstance(stores, list) else []:
        root = entry.get("root") if isinstance(entry, dict) else None
        if isinstance(root, str) and root and root not in roots:
            roots.append(root)
    return roots


def add_roots(home: Path, roots: list[str]) -> list[str]:
    """Add ``roots`` that are not listed yet; returns the ones added. Best effort: failures are logged."""
    path = registry_path(home)
    try:
        home.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=_LOCK_TIMEOUT, poll_interval=_LOCK_POLL):
            known = read_roots(home)
            added = [r for r in dict.fromkeys(roots) if r not in known]
            if not added:
                return []
            now = int(time.time() * 1000)
            entries = [{"root": r, "registered": now} for r in known + added]
            write_atomic(path, json.dumps({"version": 1, "stores": entries}, indent=1, ensure_ascii=True).encode())
            return added
    except (OSError, Timeout) as exc:
        log.warning("catalog: could not record new store(s) in %s (%s); they stay known to the catalog itself",
                    path, exc)
        return []


def remove_roots(home: Path, roots: list[str]) -> None:
    """Forget ``roots`` (best effort)."""
    path = registry_path(home)
    try:
        with FileLock(str(path) + ".lock", timeout=_LOCK_TIMEOUT, poll_interval=_LOCK_POLL):
            known = read_roots(home)
            kept = [r for r in known if r not in set(roots)]
            if kept == known:
                return
            now = int(time.time() * 1000)
            write_atomic(path, json.dumps({"version": 1, "stores": [{"root": r, "registered": now} for r in kept]},
                                          indent=1, ensure_ascii=True).encode())
    except (OSError, Timeout) as exc:
        log.warning("catalog: could not update the store list %s: %s", path, exc)
