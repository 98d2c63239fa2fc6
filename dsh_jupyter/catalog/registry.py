"""The list of known session stores, kept beside the catalog so a lost catalog can be rebuilt in full.

``<DSH_HOME>/catalog-stores.json`` holds ``{"version": 1, "stores": [{"root": path, "registered": ms}]}``.
It changes only when a store is used for the first time, under a file lock, and is replaced atomically
(temp file and rename). It never holds anything about sessions: those always come from the logs.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path

from filelock import FileLock, Timeout

log = logging.getLogger(__name__)

REGISTRY_NAME = "catalog-stores.json"
_LOCK_TIMEOUT = 2.0


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
        with FileLock(str(path) + ".lock", timeout=_LOCK_TIMEOUT):
            known = read_roots(home)
            added = [r for r in dict.fromkeys(roots) if r not in known]
            if not added:
                return []
            now = int(time.time() * 1000)
            entries = [{"root": r, "registered": now} for r in known + added]
            _write_atomic(path, json.dumps({"version": 1, "stores": entries}, indent=1, ensure_ascii=True))
            return added
    except (OSError, Timeout) as exc:
        log.warning("catalog: could not record new store(s) in %s (%s); they stay known to the catalog itself",
                    path, exc)
        return []


def remove_roots(home: Path, roots: list[str]) -> None:
    """Forget ``roots`` (best effort)."""
    path = registry_path(home)
    try:
        with FileLock(str(path) + ".lock", timeout=_LOCK_TIMEOUT):
            known = read_roots(home)
            kept = [r for r in known if r not in set(roots)]
            if kept == known:
                return
            now = int(time.time() * 1000)
            _write_atomic(path, json.dumps({"version": 1, "stores": [{"root": r, "registered": now} for r in kept]},
                                           indent=1, ensure_ascii=True))
    except (OSError, Timeout) as exc:
        log.warning("catalog: could not update the store list %s: %s", path, exc)


def _write_atomic(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(prefix=".catalog-stores.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
