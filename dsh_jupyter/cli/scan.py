"""``sessions scan``: find session stores under folders, make them known to the catalog and index them.

Deferred import: the store's path rules load when the command runs, not for ``--help``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, TextIO

from .errors import EXIT_OK, EXIT_USAGE, CliError
from .output import print_json, say, warn_errors, write
from .scope import services

if TYPE_CHECKING:
    from ..catalog import Catalog

#: Folders never entered while looking for stores.
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", ".git", ".hg", ".venv", "venv", "site-packages", ".tox",
                        ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints"})
_MAX_SCAN_DIRS = 50_000


def find_stores(paths: Sequence[str]) -> list[str]:
    """Session stores under ``paths``: ``.dsh/sessions`` folders, and any folder that holds session logs."""
    from ..store.paths import LOG_NAME

    found: list[str] = []
    visited = 0

    def looks_like_store(folder: str) -> bool:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(entry.path, LOG_NAME)):
                        return True
        except OSError:
            return False
        return False

    def walk(folder: str, depth: int) -> Iterator[str]:
        nonlocal visited
        visited += 1
        if visited > _MAX_SCAN_DIRS:
            return
        try:
            with os.scandir(folder) as entries:
                subdirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for entry in subdirs:
            if entry.name == ".dsh":
                sessions = os.path.join(entry.path, "sessions")
                if os.path.isdir(sessions):
                    yield sessions
                continue
            if entry.name.startswith(".") or entry.name in _SKIP_DIRS or depth <= 0:
                continue
            yield from walk(entry.path, depth - 1)

    for raw in paths:
        path = os.path.abspath(os.path.expanduser(raw))
        if not os.path.isdir(path):
            raise CliError(f"{raw} is not a folder; give folders to search for session stores", EXIT_USAGE)
        if looks_like_store(path):
            found.append(path)
        found.extend(walk(path, 12))
    if visited > _MAX_SCAN_DIRS:
        say(f"warning: stopped after {_MAX_SCAN_DIRS} folders; scan a narrower folder to find the rest")
    configured = os.environ.get("DSH_SESSIONS_DIR", "")
    if configured.strip() and not paths:
        candidate = str(services().sessions_root())
        if os.path.isdir(candidate):
            found.append(candidate)
    return sorted(dict.fromkeys(os.path.realpath(p) for p in found))


def cmd_scan(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    stores = find_stores(args.paths or [os.getcwd()])
    results = []
    for root in stores:
        name = catalog.register_store(root)
        report = catalog.sync([name], budget=None)
        warn_errors(report.errors)
        results.append({"store": name, "indexed": report.indexed, "removed": report.removed,
                        "sessions": next((s.sessions for s in catalog.stores() if s.root == name), 0)})
    if args.json:
        print_json({"stores": results}, out)
        return EXIT_OK
    if not results:
        where = ", ".join(args.paths) if args.paths else "the current folder"
        write(out, f"no session stores found under {where}\n")
        return EXIT_OK
    for r in results:
        write(out, f"{r['store']}: {r['sessions']} sessions ({r['indexed']} indexed now, {r['removed']} removed)\n")
    return EXIT_OK
