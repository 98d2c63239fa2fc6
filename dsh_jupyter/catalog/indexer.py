"""Indexing: reading logs into rows, store by store, in short write batches; one bad log costs only itself.

Reads happen outside transactions; writes are committed in batches of about :data:`BATCH_SECONDS` (bulk work
without a deadline: :data:`BULK_BATCH_SECONDS`). A process indexing a store in bulk holds a lease on it, so
other processes do not duplicate the work.

One log never stops the others: whatever reading it raises (damage no reader survives, nesting deep enough
for a ``RecursionError``, an unreadable file) and whatever SQLite refuses to store for it ("string or blob
too big") is remembered against the log's size, mtime and inode (:mod:`.failures`); the log is left out
until it changes, and every other log is indexed as usual. Message text is capped per session
(:data:`~.bodies.BODY_CAP`), so no log needs an unbounded buffer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .bodies import BODY_CAP
from .entries import LOG_NAME
from .failures import failed_stats, note_failure
from .folds import FoldCache
from .logs import LogRead, LogStat, read_appended, read_full, stat_log
from .registry import KnownStore
from .rows import Row, apply_read, delete_rows, now_ms, store_rows, transaction
from .schema import MAX_BODY_CHUNKS, error_kind

log = logging.getLogger(__name__)

#: A process indexing a store in bulk holds it this long (renewed per batch), so others do not duplicate the work.
LEASE_MS = 30_000
#: Writes are committed in batches of about this long (bulk work without a deadline: longer batches, which
#: index faster; readers never wait for them, and a keystroke that needs to write meanwhile skips saving).
BATCH_SECONDS = 0.05
BULK_BATCH_SECONDS = 0.25
#: Work with a deadline (a keystroke, a budgeted start) leaves a log needing more than this many bytes read to
#: the background, so one huge log never holds a query up.
FOREGROUND_READ_BYTES = 4 * 1024 * 1024
#: A folder mtime this close to now is not trusted (a change in the same clock tick could hide behind it).
RACY_NS = 100_000_000


@dataclass
class SyncReport:
    """What a :meth:`Catalog.ensure_store` / :meth:`Catalog.sync` pass did (``failed``: logs left out)."""

    stores: int = 0
    indexed: int = 0
    removed: int = 0
    failed: int = 0
    pending: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def merge(self, other: SyncReport) -> None:
        self.stores += other.stores
        self.indexed += other.indexed
        self.removed += other.removed
        self.failed += other.failed
        self.pending = self.pending or other.pending
        self.errors.extend(other.errors)

    def to_json(self) -> dict[str, Any]:
        return {"stores": self.stores, "indexed": self.indexed, "removed": self.removed, "failed": self.failed,
                "pending": self.pending, "seconds": round(self.seconds, 3), "errors": list(self.errors)}


@dataclass(frozen=True)
class Unindexable:
    """A log that cannot be indexed as it is now, and why (in words for the person reading the log)."""

    reason: str


#: What reading one log gave: its read, a reason it cannot be indexed, or ``None`` (it is gone).
Outcome = LogRead | Unindexable | None


@dataclass(frozen=True)
class Refreshed:
    """Changed rows as they are now (``None``: gone), by row id, and whether they were written."""

    rows: dict[int, Row | None]
    saved: bool


@dataclass(frozen=True)
class _Item:
    folder: str
    outcome: Outcome
    row: Row | None
    stat: LogStat | None


def changed(row: Row, stat: LogStat | None) -> bool:
    """The log no longer is what the row recorded (or is gone)."""
    return stat is None or stat != row.stat


def try_write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], object], *, attempts: int = 1) -> bool:
    """Write if the database can be had within the busy timeout; ``False`` (nothing written) otherwise."""
    try:
        transaction(conn, fn, attempts=attempts)
    except sqlite3.OperationalError as exc:
        if error_kind(exc) != "busy":
            raise
        return False
    return True


def note_pending(conn: sqlite3.Connection, store_id: int, folder: str) -> None:
    """A session folder without a log yet (a writer that has not flushed): checked again on each query."""
    conn.execute("INSERT OR REPLACE INTO pending_folders(store_id, folder, seen_ms) VALUES(?, ?, ?)",
                 (store_id, os.fsencode(folder), now_ms()))


class Indexer:
    """Reads logs and writes what they hold; ``body_cap`` bytes of message text at most per session."""

    def __init__(self, body_cap: int = BODY_CAP, *, folds: FoldCache | None = None) -> None:
        if body_cap < 0:
            raise ValueError(f"the body index cap must be 0 or more bytes, got {body_cap!r}")
        self.body_cap = body_cap
        #: Where a full read leaves its fold result, so the first reference to the log does not scan it again.
        self.folds = folds

    # ------------------------------------------------------------------------------------------ reading
    def read(self, root: str, folder: str, stat: LogStat, row: Row | None = None) -> LogRead | Unindexable:
        """Read the log in ``folder`` (incrementally when ``row`` saw its start and it only grew)."""
        path = os.path.join(root, folder, LOG_NAME)
        try:
            read = None
            if row is not None and row.chunks < MAX_BODY_CHUNKS - 1:
                read = read_appended(path, row.log, stat, body_cap=self.body_cap)
            if read is None:
                read = read_full(path, folder, stat, body_cap=self.body_cap, folds=self.folds)
        except Exception as exc:  # whatever one log raises, the others are still indexed
            log.warning("catalog: cannot index the session log %s (%s: %s); it is left out until it changes",
                        path, type(exc).__name__, exc)
            return Unindexable(f"reading it failed: {type(exc).__name__}: {exc}")
        if read is None:
            return Unindexable("not a session log the store lists (no valid header, or another session's)")
        return read

    def reread(self, root: str | None, row: Row, stat: LogStat | None) -> Outcome:
        """What a changed row's log holds now (``None``: gone)."""
        if stat is None or root is None:
            return None
        return self.read(root, row.folder, stat, row)

    # ------------------------------------------------------------------------------------------ writing
    def write(self, conn: sqlite3.Connection, store_id: int, items: list[_Item], attempts: int) -> tuple[int, int]:
        """Write read outcomes in one transaction; ``(indexed, failed)``.

        When SQLite refuses a value of one log (e.g. "string or blob too big"), the items are written one
        by one and each refused log is remembered as failed instead: the others are written all the same."""
        if not items:
            return 0, 0
        try:
            return transaction(conn, lambda c: self._write_items(c, store_id, items), attempts=attempts)
        except sqlite3.DatabaseError as exc:
            if error_kind(exc) != "refused":
                raise
        indexed = failed = 0
        for item in items:
            try:
                part = self._write_one(conn, store_id, item, attempts)
            except sqlite3.DatabaseError as exc:
                if error_kind(exc) != "refused":
                    raise
                log.warning("catalog: cannot index the session log in %s (%s); it is left out until it changes",
                            item.folder, exc)
                refused = _Item(item.folder, Unindexable(f"the catalog cannot store it: {exc}"), item.row, item.stat)
                part = self._write_one(conn, store_id, refused, attempts)
            indexed += part[0]
            failed += part[1]
        return indexed, failed

    def _write_one(self, conn: sqlite3.Connection, store_id: int, item: _Item, attempts: int) -> tuple[int, int]:
        return transaction(conn, lambda c: self._write_items(c, store_id, [item]), attempts=attempts)

    @staticmethod
    def _write_items(conn: sqlite3.Connection, store_id: int, items: list[_Item]) -> tuple[int, int]:
        indexed = failed = 0
        for item in items:
            outcome, row = item.outcome, item.row
            if isinstance(outcome, LogRead):
                if row is not None and outcome.record.session_id != row.session_id:
                    delete_rows(conn, [row.rowid])  # another session's log now: its row starts afresh
                apply_read(conn, store_id, item.folder, outcome)
                indexed += 1
                continue
            if row is not None:
                delete_rows(conn, [row.rowid])
            if isinstance(outcome, Unindexable) and item.stat is not None:
                note_failure(conn, store_id, item.folder, item.stat, outcome.reason)
                conn.execute("DELETE FROM pending_folders WHERE store_id = ? AND folder = ?",
                             (store_id, os.fsencode(item.folder)))
                failed += 1
        return indexed, failed

    def index_folder(self, conn: sqlite3.Connection, store_id: int, root: str, folder: str, stat: LogStat, *,
                     attempts: int = 1, best_effort: bool = False) -> None:
        """Index the log of a folder that has no row yet (unless it failed before, as it is now)."""
        if failed_stats(conn, store_id, [folder]).get(folder) == stat:
            return
        item = _Item(folder, self.read(root, folder, stat), None, stat)
        if best_effort:
            try_write(conn, lambda c: self._write_items(c, store_id, [item]), attempts=attempts)
        else:
            self.write(conn, store_id, [item], attempts)

    def refresh(self, conn: sqlite3.Connection, roots: Mapping[int, str], changes: list[tuple[Row, LogStat | None]],
                *, attempts: int = 1) -> Refreshed:
        """Re-read changed rows and write them; returns what they now are (``None``: gone), written or not.

        A row whose log failed before, as it is now, is left as it was (it is not read again)."""
        updated: dict[int, Row | None] = {}
        work: dict[int, list[_Item]] = {}
        for row, stat in changes:
            if stat is not None and failed_stats(conn, row.store_id, [row.folder]).get(row.folder) == stat:
                continue
            outcome = self.reread(roots.get(row.store_id), row, stat)
            work.setdefault(row.store_id, []).append(_Item(row.folder, outcome, row, stat))
            updated[row.rowid] = row.with_read(outcome) if isinstance(outcome, LogRead) else None
        if not work:
            return Refreshed(updated, True)

        def write(c: sqlite3.Connection) -> None:
            for store_id, items in work.items():
                self._write_items(c, store_id, items)

        try:
            saved = try_write(conn, write, attempts=attempts)
        except sqlite3.DatabaseError as exc:
            if error_kind(exc) != "refused":
                raise
            for store_id, items in work.items():  # one by one: the refused logs are remembered as failed
                self.write(conn, store_id, items, attempts)
            saved = True
        if not saved:
            log.debug("catalog: busy; %d refreshed row(s) are used without being saved", len(updated))
        return Refreshed(updated, saved)

    # ------------------------------------------------------------------------------------------ stores
    def index_store(self, conn: sqlite3.Connection, store: KnownStore, *, deadline: float | None, full_stat: bool,
                    lease: bool, busy_attempts: int = 5, defer_bytes: int | None = None) -> SyncReport:
        """Reconcile one store with its folder: new logs read, changed ones refreshed, gone ones dropped.

        Logs that need more than ``defer_bytes`` bytes read are left for later (the background). Returns a
        report whose ``pending`` is true when the deadline stopped it, a log was left for later, or another
        process holds the store's lease."""
        report = SyncReport(stores=1)
        if lease and not store.ready and not take_lease(conn, store.id):
            report.pending = True
            return report
        finished = False
        try:
            try:
                listing_stat = os.stat(store.root)
                names = [e.name for e in os.scandir(store.root) if e.is_dir(follow_symlinks=False)]
            except (FileNotFoundError, NotADirectoryError):
                report.removed += store_missing(conn, store)
                return report
            except OSError as exc:
                report.errors.append(f"cannot list {store.root}: {exc}")
                return report
            rows = store_rows(conn, store.id)
            failed = failed_stats(conn, store.id)
            present = set(names)
            gone = [row.rowid for folder, row in rows.items() if folder not in present]
            if gone:
                report.removed += transaction(conn, lambda c: delete_rows(c, gone), attempts=busy_attempts)
            batch: list[_Item] = []
            batch_started = time.monotonic()
            batch_seconds = BATCH_SECONDS if deadline is not None else BULK_BATCH_SECONDS
            pending: list[str] = []
            for name in names:
                if deadline is not None and time.monotonic() >= deadline:
                    report.pending = True
                    break
                row = rows.get(name)
                if row is not None and not full_stat:
                    continue
                stat = stat_log(os.path.join(store.root, name, LOG_NAME))
                if row is None and stat is None:
                    pending.append(name)
                    continue
                if row is not None and not changed(row, stat):
                    continue
                if stat is not None and failed.get(name) == stat:
                    continue  # it failed as it is now: not read again until it changes
                start = (row.log.committed or 0) if row is not None else 0  # where a read of it would begin
                if defer_bytes is not None and stat is not None and stat.size - start > defer_bytes:
                    report.pending = True  # too much to read now: the background does it
                    continue
                outcome = self.read(store.root, name, stat, row) if stat is not None else None
                batch.append(_Item(name, outcome, row, stat))
                if time.monotonic() - batch_started >= batch_seconds:
                    self._count(report, self.write(conn, store.id, batch, busy_attempts))
                    batch, batch_started = [], time.monotonic()
                    if lease and not store.ready:
                        renew_lease(conn, store.id)
            self._count(report, self.write(conn, store.id, batch, busy_attempts))
            if pending:
                def note_all(c: sqlite3.Connection) -> None:
                    for folder in pending:
                        note_pending(c, store.id, folder)

                transaction(conn, note_all, attempts=busy_attempts)
            if not report.pending:
                mtime = listing_stat.st_mtime_ns
                if time.time_ns() - mtime < RACY_NS:
                    mtime = -1  # could change again within the same clock tick: check next time
                transaction(conn, lambda c: c.execute(
                    "UPDATE stores SET dir_mtime_ns = ?, ready = 1, missing = 0, lease_until_ms = 0 WHERE id = ?",
                    (mtime, store.id)), attempts=busy_attempts)
                finished = True
        finally:
            if lease and not store.ready and not finished:
                renew_lease(conn, store.id, release=True)
        return report

    @staticmethod
    def _count(report: SyncReport, written: tuple[int, int]) -> None:
        report.indexed += written[0]
        report.failed += written[1]


def store_missing(conn: sqlite3.Connection, store: KnownStore) -> int:
    """The store's root is gone: drop its rows (they come back when it does); returns how many."""
    def mark(c: sqlite3.Connection) -> int:
        ids = [r[0] for r in c.execute("SELECT id FROM sessions WHERE store_id = ?", (store.id,))]
        count = delete_rows(c, ids)
        c.execute("DELETE FROM pending_folders WHERE store_id = ?", (store.id,))
        c.execute("DELETE FROM failed_logs WHERE store_id = ?", (store.id,))
        c.execute("UPDATE stores SET missing = 1, ready = 0, dir_mtime_ns = -1 WHERE id = ?", (store.id,))
        return count

    return transaction(conn, mark, attempts=3)


def take_lease(conn: sqlite3.Connection, store_id: int) -> bool:
    now = now_ms()
    cursor = transaction(conn, lambda c: c.execute(
        "UPDATE stores SET lease_until_ms = ? WHERE id = ? AND lease_until_ms < ?",
        (now + LEASE_MS, store_id, now)), attempts=3)
    return cursor.rowcount == 1


def renew_lease(conn: sqlite3.Connection, store_id: int, *, release: bool = False) -> None:
    value = 0 if release else now_ms() + LEASE_MS
    with contextlib.suppress(sqlite3.OperationalError):
        transaction(conn, lambda c: c.execute("UPDATE stores SET lease_until_ms = ? WHERE id = ?",
                                              (value, store_id)), attempts=3)
