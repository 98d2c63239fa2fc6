"""Freshness: what each query pays so that what it returns matches the logs (steps 1–4 of :mod:`.core`).

:func:`freshen` does steps 1–3 (changed store listings, folders waiting for a log, hot rows); :func:`checked`
and :func:`ranked` do step 4 (the rows about to be returned are ``stat``-ed and re-read when they changed).
Writes here are best effort: when another process holds the database, the work is left to the next query
or to the background, and the re-read rows are used as they are without being saved.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Mapping

from .entries import LOG_NAME, CatalogEntry
from .indexer import Indexer, SyncReport, changed, store_missing, try_write
from .logs import stat_log
from .registry import KnownStore, came_back, load_stores
from .rows import ROW_COLUMNS, Row
from .schema import error_kind
from .search import Filter
from .search import select as select_rows
from .worker import Job

log = logging.getLogger(__name__)

#: A log changed within this many seconds is checked on every query.
HOT_WINDOW = 900.0
#: At most this many hot rows are checked per query (the most recently changed).
HOT_LIMIT = 64
#: Folders without a log yet are checked on each query, newest first, up to this many.
PENDING_LIMIT = 64
#: Time a keystroke may spend reconciling a store whose listing changed before handing over to the background.
LISTING_BUDGET = 0.05


def log_path(roots: Mapping[int, str], row: Row) -> str:
    return os.path.join(roots.get(row.store_id, "\x00missing"), row.folder, LOG_NAME)


def _best_effort(fn: Callable[[], object]) -> bool:
    """Run a write step; ``False`` when the database was busy (the step is retried later)."""
    try:
        fn()
    except sqlite3.OperationalError as exc:
        if error_kind(exc) != "busy":
            raise
        return False
    return True


def freshen(conn: sqlite3.Connection, indexer: Indexer, submit: Callable[[Job], None], *, hot_window: float,
            listing_budget: float, defer_bytes: int | None) -> tuple[dict[int, KnownStore], dict[int, Row | None]]:
    """Steps 1–3; returns the stores as they are now, and the hot rows that were re-read but could not be
    saved (the database was busy), for the query to use as they are now. New logs needing more than
    ``defer_bytes`` bytes read are left to the background."""
    stores = load_stores(conn)
    reloaded = False
    back: list[int] = []  # stores marked missing whose root is a folder again (:func:`came_back`)
    for store in list(stores.values()):
        try:
            mtime = os.stat(store.root).st_mtime_ns
        except OSError:
            if not store.missing and _best_effort(functools.partial(store_missing, conn, store)):
                reloaded = True
            continue
        if mtime == store.dir_mtime_ns and not store.missing:
            continue
        if store.ready:
            deadline = time.monotonic() + listing_budget
            try:
                part = indexer.index_store(conn, store, deadline=deadline, full_stat=False, lease=False,
                                           busy_attempts=1, defer_bytes=defer_bytes)
            except sqlite3.OperationalError as exc:
                if error_kind(exc) != "busy":
                    raise
                part = SyncReport(pending=True)
            if part.pending:
                submit(("index", store.id))
            reloaded = True
        else:
            if came_back(store):
                back.append(store.id)
            submit(("index", store.id))
    if reloaded:
        stores = load_stores(conn)
    # Until the background has indexed them, this query reads their logs directly instead of leaving them out.
    for store_id in back:
        found = stores.get(store_id)
        if found is not None and found.missing:
            stores[store_id] = dataclasses.replace(found, missing=False)
    roots = {s.id: s.root for s in stores.values()}
    _check_pending(conn, indexer, roots)
    cutoff = time.time_ns() - int(hot_window * 1e9)
    hot = [Row.from_sql(r) for r in conn.execute(
        f"SELECT {ROW_COLUMNS} FROM sessions WHERE mtime_ns > ? ORDER BY mtime_ns DESC LIMIT ?",
        (cutoff, HOT_LIMIT))]
    changes = [(row, stat) for row in hot if changed(row, stat := stat_log(log_path(roots, row)))]
    unsaved: dict[int, Row | None] = {}
    if changes:
        refreshed = indexer.refresh(conn, roots, changes)
        if not refreshed.saved:
            unsaved = refreshed.rows
    return stores, unsaved


def _check_pending(conn: sqlite3.Connection, indexer: Indexer, roots: Mapping[int, str]) -> None:
    """Step 2: folders seen without a log are indexed once it appears (dropped when the folder is gone)."""
    pending = conn.execute("SELECT store_id, folder FROM pending_folders ORDER BY seen_ms DESC LIMIT ?",
                           (PENDING_LIMIT,)).fetchall()
    for store_id, raw in pending:
        root = roots.get(int(store_id))
        if root is None:
            continue
        folder = os.fsdecode(bytes(raw))
        stat = stat_log(os.path.join(root, folder, LOG_NAME))
        if stat is None:
            if not os.path.isdir(os.path.join(root, folder)):
                try_write(conn, functools.partial(_forget_pending, store_id=int(store_id), raw=bytes(raw)))
            continue
        indexer.index_folder(conn, int(store_id), root, folder, stat, best_effort=True)


def _forget_pending(conn: sqlite3.Connection, *, store_id: int, raw: bytes) -> None:
    conn.execute("DELETE FROM pending_folders WHERE store_id = ? AND folder = ?", (store_id, raw))


def checked(conn: sqlite3.Connection, indexer: Indexer, roots: Mapping[int, str], rows: list[Row]) -> list[Row]:
    """Step 4 for a plain listing: ``rows`` as their logs are now (a deleted log drops its row)."""
    changes = [(row, stat) for row in rows if changed(row, stat := stat_log(log_path(roots, row)))]
    if not changes:
        return rows
    updated = indexer.refresh(conn, roots, changes).rows
    return [r for r in (updated.get(row.rowid, row) if row.rowid in updated else row for row in rows)
            if r is not None]


def _replaced(rows: list[Row], overrides: Mapping[int, Row | None]) -> list[Row]:
    return [r for r in (overrides.get(row.rowid, row) if row.rowid in overrides else row for row in rows)
            if r is not None]


def dedupe(entries: list[CatalogEntry], limit: int) -> list[CatalogEntry]:
    """The first ``limit`` entries, each session id once (the first one seen)."""
    seen: set[str] = set()
    out: list[CatalogEntry] = []
    for entry in entries:
        if entry.session_id in seen:
            continue
        seen.add(entry.session_id)
        out.append(entry)
        if len(out) >= limit:
            break
    return out


def ranked(conn: sqlite3.Connection, indexer: Indexer, stores: Mapping[int, KnownStore], store_ids: set[int],
           target_cwd: str | None, needle: str, body_query: str | None, limit: int, exclude: Collection[str],
           unsaved: Mapping[int, Row | None] | None = None) -> list[CatalogEntry]:
    """Step 4 of a candidate query: the ranked rows of ``store_ids``, each checked against its log.

    ``unsaved`` rows (re-read, not written: the database was busy) replace their stored version, and
    join the answer when they now match."""
    if not store_ids:
        return []
    roots = {s.id: s.root for s in stores.values()}
    where = Filter(target_cwd, needle, body_query, exclude, None if len(store_ids) == len(stores) else store_ids)
    overrides: dict[int, Row | None] = dict(unsaved or {})
    rows: list[Row] = []
    for _round in range(3):
        rows = _replaced(select_rows(conn, where, limit), overrides)
        changes = [(row, stat) for row in rows if changed(row, stat := stat_log(log_path(roots, row)))]
        if not changes:
            break
        refreshed = indexer.refresh(conn, roots, changes)
        if refreshed.saved:
            if not refreshed.rows:
                break  # nothing was read again (logs that failed as they are now): the rows stand
            continue  # the next round reads the saved rows
        overrides.update(refreshed.rows)
        rows = _replaced(rows, overrides)
        break  # the database is busy: use the re-read rows as they are, without querying again
    entries = [row.entry(roots[row.store_id]) for row in rows]
    if overrides:
        # Rows re-read but not saved: drop those that no longer match, add those that now do.
        present = {row.rowid for row in rows}
        entries = [e for e in entries if body_query is not None or e.matches(needle)]
        for rowid, override in overrides.items():
            if (override is None or rowid in present or override.store_id not in store_ids
                    or override.session_id in exclude):
                continue
            entry = override.entry(roots[override.store_id])
            if entry.matches(needle):
                entries.append(entry)
        entries = dedupe(sorted(entries, key=lambda e: e.order_key(target_cwd)), limit)
    return entries
