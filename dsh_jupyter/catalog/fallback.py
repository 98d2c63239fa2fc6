"""The scanning fallback: candidates read straight from the logs, in a bounded, cancellable batch.

Used for the parts of the picture the catalog cannot answer yet: stores still being indexed for the first
time, or every known store while the catalog itself is unavailable (locked for too long, or damaged and
being rebuilt). It applies the reference's rules directly to the logs: read every header, rank, then read
titles in rank order until ``limit`` candidates are found.

It stops at ``deadline`` (a :func:`time.monotonic` value) or when ``cancel`` is set, and then returns what
it has with ``complete=False``: a keystroke is never held up for long by a cold disk. A log that cannot be
read is skipped (whatever it raises): one bad log never hides the others.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from ..store.paths import session_folder_name
from ..store.safe_open import open_log
from ..store.scan import read_header, scan_surface
from .entries import LOG_NAME, CatalogEntry
from .indexer import FOREGROUND_READ_BYTES

log = logging.getLogger(__name__)


class _Stop(Exception):
    """Deadline reached or cancelled (internal)."""


@dataclass
class ScanOutcome:
    """Entries found in rank order (at most ``limit``), and whether the scan finished in time."""

    entries: list[CatalogEntry] = field(default_factory=list)
    complete: bool = True


@dataclass(frozen=True)
class ScanSource:
    """One store to scan; ``folders`` restricts it to those session folders (``None``: every folder)."""

    root: str
    folders: frozenset[str] | None = None


def _open_log(path: str) -> BinaryIO:
    """Open a log for the scan as the store does: regular files only, never blocking, never following links."""
    return open_log(path)


def _check(deadline: float | None, cancel: object) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise _Stop
    if cancel is not None and cancel.is_set():  # type: ignore[attr-defined]
        raise _Stop


def _headers(source: ScanSource, deadline: float | None, cancel: object) -> Iterable[CatalogEntry]:
    try:
        names = [e.name for e in os.scandir(source.root) if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        log.warning("catalog: cannot list session store %s: %s", source.root, exc)
        return
    for name in names:
        if source.folders is not None and name not in source.folders:
            continue
        _check(deadline, cancel)
        path = os.path.join(source.root, name, LOG_NAME)
        try:
            with _open_log(path) as fh:
                header, _ = read_header(fh, path)
        except Exception as exc:  # whatever one log raises (even a RecursionError), the others are still read
            log.debug("catalog: skipping %s while scanning: %r", path, exc)
            continue
        if session_folder_name(header.id) != name:
            continue
        yield CatalogEntry(header.id, source.root, name, header.cwd, int(header.created_at), None, indexed=False)


def _title(entry: CatalogEntry) -> str | None:
    """The latest title of a log; ``None`` for a log too big to scan within a keystroke (its title reaches
    the answers once the catalog has indexed it in the background)."""
    path = entry.path
    try:
        with _open_log(path) as fh:
            if os.fstat(fh.fileno()).st_size > FOREGROUND_READ_BYTES:
                return None
            scan = scan_surface(fh, path, want_surface=False)
    except Exception:  # an unreadable title, whatever it raises, only costs the label
        return None
    data = scan.title
    title = data.get("title") if isinstance(data, dict) else None
    return title if isinstance(title, str) else None


def scan_candidates(sources: list[ScanSource], target_id: str | None, target_cwd: str | None, needle: str,
                    limit: int, *, exclude: frozenset[str] = frozenset(), deadline: float | None = None,
                    cancel: object = None) -> ScanOutcome:
    """Candidates from ``sources`` by the reference's rules; ``exclude`` ids are left out (besides the target).

    A session id found in several sources is taken from the first source that holds it.
    """
    outcome = ScanOutcome()
    found: dict[str, CatalogEntry] = {}
    try:
        for source in sources:
            for entry in _headers(source, deadline, cancel):
                if entry.session_id != target_id and entry.session_id not in exclude:
                    found.setdefault(entry.session_id, entry)
    except _Stop:
        outcome.complete = False
    ranked = sorted(found.values(), key=lambda e: e.order_key(target_cwd))
    try:
        for entry in ranked:
            if len(outcome.entries) >= limit:
                break
            _check(deadline, cancel)
            titled = CatalogEntry(entry.session_id, entry.store, entry.folder, entry.cwd, entry.created_at,
                                  _title(entry), indexed=False)
            if titled.matches(needle):
                outcome.entries.append(titled)
    except _Stop:
        outcome.complete = False
    return outcome


def deadline_in(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds
