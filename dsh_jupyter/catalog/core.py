"""The session catalog: an SQLite index of every session in every known store, kept fresh cheaply.

Where it lives: ``<DSH_HOME>/catalog.sqlite`` (WAL mode, so readers never wait for a writer), with the list
of known stores mirrored in ``<DSH_HOME>/catalog-stores.json``. It is a derived index, never the source of
truth: deleting it loses nothing, it is rebuilt from the logs.

Freshness, and what each query pays for it (the keystroke path):

1. every known store's root folder is ``stat``-ed; a changed mtime means folders were added or removed, and
   the listing is reconciled (new logs read, deleted ones dropped) within a small time budget, the rest in
   the background;
2. session folders seen without a log yet (a writer that has not flushed) are checked for one;
3. the *hot* rows, whose log changed within ``hot_window`` seconds (at most 64, newest first), are
   ``stat``-ed and re-read when their size, mtime or inode changed: a session being written right now is
   always exact;
4. the rows about to be returned are ``stat``-ed the same way (a deleted log disappears, a changed one is
   re-read, incrementally when it only grew) and the query runs again if any changed.

What this leaves: a *cold* session (unchanged for ``hot_window``) whose title changes by a program that does
not tell the catalog (``session_changed``) and which is not among the rows returned can be missed by a
filter that its new title would match, until the next background sweep (every ``sweep_interval`` seconds
while queries are made, or ``sync()``). Ranking never goes stale: it depends only on the header (id, cwd,
createdAt), which never changes. A result is never wrong, only possibly short of such a session.

Failure handling: a damaged catalog file is set aside (``catalog.sqlite.corrupt``) and rebuilt in the
background; a catalog that is locked, being rebuilt or cannot be opened never blocks a query for long: the
query falls back to reading the logs directly, bounded in time (``fallback_budget``) and cancellable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from .bodies import fts_query, texts_match
from .entries import LOG_NAME, CatalogEntry
from .fallback import ScanSource, deadline_in, scan_candidates
from .live import live_entry, live_texts
from .logs import LogFacts, LogStat, read_appended, read_full, stat_log
from .rows import ROW_COLUMNS, Row, apply_facts, delete_rows, now_ms, store_rows, transaction, upsert_store
from .search import Filter
from .search import select as select_rows
from .schema import (
    CATALOG_NAME,
    MAX_BODY_CHUNKS,
    CatalogCorrupt,
    CatalogUnavailable,
    connect,
    enc,
    ensure_schema,
    error_kind,
)

log = logging.getLogger(__name__)

#: A log changed within this many seconds is checked on every query.
HOT_WINDOW = 900.0
#: At most this many hot rows are checked per query (the most recently changed).
HOT_LIMIT = 64
#: Background sweep (stat every log of every store) at most this often while queries are made.
SWEEP_INTERVAL = 30.0
#: Busy timeout of the keystroke path and of background work (milliseconds).
FOREGROUND_BUSY_MS = 40
BACKGROUND_BUSY_MS = 2000
#: Time a keystroke may spend reconciling a store whose listing changed before handing over to the background.
LISTING_BUDGET = 0.05
#: Time a query may spend reading logs directly when the catalog cannot answer for them.
FALLBACK_BUDGET = 0.25
#: A process indexing a store in bulk holds it this long (renewed per batch), so others do not duplicate the work.
LEASE_MS = 30_000
#: Writes are committed in batches of about this long (bulk work without a deadline: longer batches, which
#: index faster; readers never wait for them, and a keystroke that needs to write meanwhile skips saving).
BATCH_SECONDS = 0.05
BULK_BATCH_SECONDS = 0.25
#: A folder mtime this close to now is not trusted (a change in the same clock tick could hide behind it).
RACY_NS = 100_000_000
#: How long after a failure to open the catalog it is tried again.
RETRY_SECONDS = 1.0
#: Folders without a log yet are checked on each query, newest first, up to this many.
PENDING_LIMIT = 64
_NO_SESSION = "\x00dsh-catalog-no-session"


@dataclass(frozen=True)
class StoreInfo:
    """A known store: its root, how many sessions it holds, and whether it is fully indexed."""

    root: str
    sessions: int
    ready: bool
    missing: bool

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "sessions": self.sessions, "ready": self.ready, "missing": self.missing}


@dataclass
class SyncReport:
    """What a :meth:`Catalog.ensure_store` / :meth:`Catalog.sync` pass did."""

    stores: int = 0
    indexed: int = 0
    removed: int = 0
    pending: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def merge(self, other: SyncReport) -> None:
        self.stores += other.stores
        self.indexed += other.indexed
        self.removed += other.removed
        self.pending = self.pending or other.pending
        self.errors.extend(other.errors)

    def to_json(self) -> dict[str, Any]:
        return {"stores": self.stores, "indexed": self.indexed, "removed": self.removed, "pending": self.pending,
                "seconds": round(self.seconds, 3), "errors": list(self.errors)}


@dataclass(frozen=True)
class _Refreshed:
    rows: dict[int, Row | None]
    saved: bool


@dataclass(frozen=True)
class _Store:
    id: int
    root: str
    dir_mtime_ns: int
    ready: bool
    missing: bool


def store_root(path: str | os.PathLike[str]) -> str:
    """The catalog's name for a store: its absolute, symlink-resolved path."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path))))


def _changed(row: Row, stat: LogStat | None) -> bool:
    return stat is None or stat != row.stat


class Catalog:
    """The session catalog of one ``DSH_HOME`` (see the module docstring).

    Thread-safe; one instance per process is enough (:func:`open_catalog`). ``background=False`` does all
    work in the calling thread (tests, the command line).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, home: str | os.PathLike[str] | None = None,
                 hot_window: float = HOT_WINDOW, sweep_interval: float = SWEEP_INTERVAL,
                 fallback_budget: float = FALLBACK_BUDGET, listing_budget: float = LISTING_BUDGET,
                 background: bool = True) -> None:
        if path is None:
            from ..tools.home import resolve_dsh_home

            self.home = resolve_dsh_home(home)
            self.path = self.home / CATALOG_NAME
        else:
            self.path = Path(os.path.abspath(os.fspath(path)))
            self.home = self.path.parent if home is None else Path(os.path.abspath(os.fspath(home)))
        self.hot_window = float(hot_window)
        self.sweep_interval = float(sweep_interval)
        self.fallback_budget = fallback_budget
        self.listing_budget = listing_budget
        self.background = background
        self._lock = threading.RLock()  # opening, recovery and the worker; queries do not take it
        self._local = threading.local()  # one connection per thread: no thread waits for another's reads
        self._conns: list[sqlite3.Connection] = []
        self._retry_at = 0.0
        self._unavailable_reason = ""
        self._known: set[str] = set()
        self._last_sweep = time.monotonic()
        self._worker: _Worker | None = None
        self._closed = False
        #: Set when the last query had to fall back to reading logs and did not finish in time.
        self.last_query_complete = True

    def __repr__(self) -> str:
        return f"Catalog({str(self.path)!r})"

    # ------------------------------------------------------------------------------------------ connection
    def _connect(self, busy_ms: int) -> sqlite3.Connection:
        self.home.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path, busy_ms=busy_ms)
        try:
            created = ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        if created:
            self._seed_stores(conn)
        return conn

    def _seed_stores(self, conn: sqlite3.Connection) -> None:
        """A new catalog learns the stores from the registry file (they are indexed in the background)."""
        roots = _registry().read_roots(self.home)
        if not roots:
            return
        transaction(conn, lambda c: [upsert_store(c, root) for root in roots], attempts=5)
        log.info("catalog: new catalog at %s; indexing %d known store(s)", self.path, len(roots))

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection; SQLite errors become :class:`CatalogUnavailable` (and trigger recovery)."""
        if self._closed:
            raise CatalogUnavailable("the catalog was closed")
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is not None and _inode(self.path) != local.ino:
            self._drop_connection()  # the file was replaced (set aside after damage, or removed)
            conn = None
        if conn is None:
            with self._lock:
                if time.monotonic() < self._retry_at:
                    raise CatalogUnavailable(self._unavailable_reason)
                try:
                    conn = self._connect(FOREGROUND_BUSY_MS)
                except sqlite3.DatabaseError as exc:
                    self._failed(exc)
                except OSError as exc:
                    self._retry_at = time.monotonic() + RETRY_SECONDS
                    self._unavailable_reason = f"cannot create the catalog at {self.path}: {exc}"
                    raise CatalogUnavailable(self._unavailable_reason) from exc
                local.conn, local.ino = conn, _inode(self.path)
                self._conns.append(conn)
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            self._failed(exc)
        except sqlite3.ProgrammingError as exc:  # closed under us (close() at shutdown)
            self._drop_connection()
            raise CatalogUnavailable(f"the catalog {self.path} was closed: {exc}") from exc

    def _failed(self, exc: sqlite3.DatabaseError) -> NoReturn:
        """React to an SQLite error on this thread's connection, then raise :class:`CatalogUnavailable`."""
        kind = error_kind(exc)
        if kind == "busy":
            raise CatalogUnavailable(f"the catalog {self.path} is busy: {exc}") from exc
        if kind == "corrupt":
            failed_ino = getattr(self._local, "ino", None)
            self._drop_connection()
            with self._lock:
                self._recover(exc, failed_ino)
            raise CatalogCorrupt(f"the catalog {self.path} was damaged ({exc}); it is being rebuilt from the logs") \
                from exc
        self._drop_connection()
        self._retry_at = time.monotonic() + RETRY_SECONDS
        self._unavailable_reason = f"the catalog {self.path} cannot be used: {exc}"
        raise CatalogUnavailable(self._unavailable_reason) from exc

    def _drop_connection(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            with self._lock, contextlib.suppress(ValueError):
                self._conns.remove(conn)

    def _recover(self, exc: BaseException, failed_ino: int | None) -> None:
        """Set a damaged catalog aside and start again from the logs (one process does it; others wait).

        ``failed_ino`` is the inode of the file the failing connection had open: when the path now names
        another file, someone already replaced it, and there is nothing to set aside."""
        from filelock import FileLock, Timeout

        self._retry_at = time.monotonic() + 0.2
        self._unavailable_reason = f"the catalog {self.path} is being rebuilt"
        lock = FileLock(str(self.path) + ".rebuild.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return  # another process is setting it aside; we reopen once it is done
        try:
            if failed_ino is not None and _inode(self.path) not in (None, failed_ino):
                return  # someone already replaced it with a new file: just reopen
            self._set_aside()
            log.warning("catalog: %s was damaged (%s); it was moved to %s.corrupt and is rebuilt from the logs",
                        self.path, exc, self.path.name)
        finally:
            lock.release()
        self._retry_at = 0.0

    def _set_aside(self) -> None:
        aside = self.path.with_name(self.path.name + ".corrupt")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            pass
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.path) + suffix)

    def close(self) -> None:
        """Stop background work and close the database."""
        with self._lock:
            self._closed = True
            worker, self._worker = self._worker, None
            conns, self._conns = self._conns, []
        if worker is not None:
            worker.stop()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # ------------------------------------------------------------------------------------------ stores
    def register_store(self, root: str | os.PathLike[str]) -> str:
        """Make a store known (cheap; nothing is read). Returns the catalog's name for it."""
        name = store_root(root)
        if name in self._known:
            return name
        _registry().add_roots(self.home, [name])
        with contextlib.suppress(CatalogUnavailable):
            with self._db() as conn:
                transaction(conn, lambda c: upsert_store(c, name), attempts=5)
        self._known.add(name)
        return name

    def ensure_store(self, root: str | os.PathLike[str], *, budget: float | None = 0.25) -> SyncReport:
        """Register ``root`` and index its new or changed logs for up to ``budget`` seconds (``None``: all).

        What is left when the budget runs out continues in the background (or at the next call when
        ``background=False``). Cheap when nothing changed: one listing and one ``stat`` per log.
        Call it when a kernel or server starts in a folder.
        """
        name = self.register_store(root)
        return self._sync([name], budget=budget, full_stat=True)

    def register_session(self, root: str | os.PathLike[str], session_id: str, *, notebook: str | None = None) -> None:
        """A host created or opened ``session_id`` in ``root``: note its notebook and index the log if present."""
        name = self.register_store(root)
        try:
            with self._db() as conn:
                if notebook is not None:
                    transaction(conn, lambda c: c.execute(
                        "INSERT OR REPLACE INTO notebooks(session_id, notebook) VALUES(?, ?)",
                        (enc(session_id), notebook)), attempts=3)
        except CatalogUnavailable as exc:
            log.debug("catalog: could not record the notebook of %s: %s", session_id, exc)
        self.session_changed(name, session_id)

    def session_changed(self, root: str | os.PathLike[str], session_id: str) -> None:
        """A host flushed ``session_id`` in ``root``: bring its row up to date now (cheap, incremental)."""
        from ..store.paths import session_folder_name

        name = store_root(root)
        folder = session_folder_name(session_id)
        try:
            with self._db() as conn:
                store_id = self._store_id(conn, name)
                if store_id is None:
                    return
                found = conn.execute(f"SELECT {ROW_COLUMNS} FROM sessions WHERE store_id = ? AND folder = ?",
                                     (store_id, os.fsencode(folder))).fetchone()
                path = os.path.join(name, folder, LOG_NAME)
                stat = stat_log(path)
                if found is None:
                    if stat is None:
                        self._try_write(conn, lambda c: self._note_pending(c, store_id, folder))
                        return
                    facts = read_full(path, folder, stat)
                    if facts is not None:
                        transaction(conn, lambda c: apply_facts(c, store_id, folder, facts), attempts=3)
                    return
                row = Row.from_sql(found)
                if _changed(row, stat):
                    self._refresh(conn, {store_id: name}, [(row, stat)], attempts=3)
        except CatalogUnavailable as exc:
            log.debug("catalog: could not refresh %s: %s", session_id, exc)

    def forget_store(self, root: str | os.PathLike[str]) -> int:
        """Drop a store and its rows from the catalog (its logs are untouched); returns the rows dropped."""
        name = store_root(root)
        _registry().remove_roots(self.home, [name])
        self._known.discard(name)
        with self._db() as conn:
            store_id = self._store_id(conn, name)
            if store_id is None:
                return 0

            def drop(c: sqlite3.Connection) -> int:
                ids = [r[0] for r in c.execute("SELECT id FROM sessions WHERE store_id = ?", (store_id,))]
                count = delete_rows(c, ids)
                c.execute("DELETE FROM pending_folders WHERE store_id = ?", (store_id,))
                c.execute("DELETE FROM stores WHERE id = ?", (store_id,))
                return count

            return transaction(conn, drop, attempts=5)

    def stores(self) -> list[StoreInfo]:
        """Every known store."""
        with self._db() as conn:
            rows = conn.execute(
                "SELECT root, ready, missing, (SELECT count(*) FROM sessions s WHERE s.store_id = stores.id) "
                "FROM stores ORDER BY root").fetchall()
        return [StoreInfo(os.fsdecode(bytes(r[0])), int(r[3]), bool(r[1]), bool(r[2])) for r in rows]

    def sync(self, roots: Iterable[str | os.PathLike[str]] | None = None, *, budget: float | None = None) -> SyncReport:
        """Reconcile stores with their logs now (every known store by default): new, changed, deleted."""
        names = [store_root(r) for r in roots] if roots is not None else None
        if names is not None:
            for name in names:
                self.register_store(name)
        self._last_sweep = time.monotonic()
        return self._sync(names, budget=budget, full_stat=True)

    def reindex(self, roots: Iterable[str | os.PathLike[str]] | None = None) -> SyncReport:
        """Forget what the catalog knows about ``roots`` (default: every store) and index them again now."""
        started = time.monotonic()
        names = [store_root(r) for r in roots] if roots is not None else self._all_roots()
        for name in names:
            self.register_store(name)
        with self._db() as conn:
            stores = [s for s in self._load_stores(conn).values() if s.root in names]

            def forget(c: sqlite3.Connection) -> None:
                if roots is None:
                    c.execute("INSERT INTO body_index(body_index) VALUES('delete-all')")
                    c.execute("INSERT INTO meta_index(meta_index) VALUES('delete-all')")
                    c.execute("DELETE FROM bodies")
                    c.execute("DELETE FROM sessions")
                    c.execute("DELETE FROM pending_folders")
                else:
                    for store in stores:
                        ids = [r[0] for r in c.execute("SELECT id FROM sessions WHERE store_id = ?", (store.id,))]
                        delete_rows(c, ids)
                        c.execute("DELETE FROM pending_folders WHERE store_id = ?", (store.id,))
                for store in stores:
                    c.execute("UPDATE stores SET ready = 0, dir_mtime_ns = -1, lease_until_ms = 0 WHERE id = ?",
                              (store.id,))

            transaction(conn, forget, attempts=20)
        report = self._sync(names, budget=None, full_stat=True)
        report.seconds = time.monotonic() - started
        return report

    def _all_roots(self) -> list[str]:
        roots = list(_registry().read_roots(self.home))
        with contextlib.suppress(CatalogUnavailable):
            with self._db() as conn:
                for (root,) in conn.execute("SELECT root FROM stores ORDER BY id"):
                    name = os.fsdecode(bytes(root))
                    if name not in roots:
                        roots.append(name)
        for name in self._known:
            if name not in roots:
                roots.append(name)
        return roots

    def _store_id(self, conn: sqlite3.Connection, name: str) -> int | None:
        row = conn.execute("SELECT id FROM stores WHERE root = ?", (os.fsencode(name),)).fetchone()
        return None if row is None else int(row[0])

    def _load_stores(self, conn: sqlite3.Connection) -> dict[int, _Store]:
        return {
            int(r[0]): _Store(int(r[0]), os.fsdecode(bytes(r[1])), int(r[2]), bool(r[3]), bool(r[4]))
            for r in conn.execute("SELECT id, root, dir_mtime_ns, ready, missing FROM stores")
        }

    # ------------------------------------------------------------------------------------------ indexing
    def _sync(self, names: list[str] | None, *, budget: float | None, full_stat: bool) -> SyncReport:
        started = time.monotonic()
        deadline = None if budget is None else started + budget
        report = SyncReport()
        try:
            with self._db() as conn:
                stores = self._load_stores(conn)
                wanted = [s for s in stores.values() if names is None or s.root in names]
                for store in wanted:
                    part = self._index_store(conn, store, deadline=deadline, full_stat=full_stat, lease=True)
                    report.merge(part)
                    if part.pending:
                        self._submit(("index", store.id))
        except CatalogUnavailable as exc:
            report.errors.append(str(exc))
            report.pending = True
        report.seconds = time.monotonic() - started
        return report

    def _index_store(self, conn: sqlite3.Connection, store: _Store, *, deadline: float | None, full_stat: bool,
                     lease: bool, busy_attempts: int = 5) -> SyncReport:
        """Reconcile one store with its folder: new logs read, changed ones refreshed, gone ones dropped.

        Reads happen outside transactions; writes are committed in short batches. Returns a report whose
        ``pending`` is true when the deadline stopped it (or another process holds the store's lease).
        """
        report = SyncReport(stores=1)
        if lease and not store.ready and not self._take_lease(conn, store.id):
            report.pending = True
            return report
        finished = False
        try:
            try:
                listing_stat = os.stat(store.root)
                names = [e.name for e in os.scandir(store.root) if e.is_dir(follow_symlinks=False)]
            except (FileNotFoundError, NotADirectoryError):
                report.removed += self._store_missing(conn, store)
                return report
            except OSError as exc:
                report.errors.append(f"cannot list {store.root}: {exc}")
                return report
            rows = store_rows(conn, store.id)
            present = set(names)
            gone = [row.rowid for folder, row in rows.items() if folder not in present]
            if gone:
                report.removed += transaction(conn, lambda c: delete_rows(c, gone), attempts=busy_attempts)
            batch: list[tuple[str, LogFacts | None, Row | None, LogStat | None]] = []
            batch_started = time.monotonic()
            pending: list[str] = []
            for name in names:
                if deadline is not None and time.monotonic() >= deadline:
                    report.pending = True
                    break
                row = rows.get(name)
                if row is not None and not full_stat:
                    continue
                path = os.path.join(store.root, name, LOG_NAME)
                stat = stat_log(path)
                if row is None:
                    if stat is None:
                        pending.append(name)
                        continue
                    facts = read_full(path, name, stat)
                    if facts is None:
                        continue
                    batch.append((name, facts, None, stat))
                elif _changed(row, stat):
                    batch.append((name, self._reread(row, store.root, stat), row, stat))
                else:
                    continue
                if time.monotonic() - batch_started >= (BATCH_SECONDS if deadline is not None else BULK_BATCH_SECONDS):
                    report.indexed += self._write_batch(conn, store.id, batch, busy_attempts)
                    batch, batch_started = [], time.monotonic()
                    if lease and not store.ready:
                        self._renew_lease(conn, store.id)
            report.indexed += self._write_batch(conn, store.id, batch, busy_attempts)
            if pending:
                transaction(conn, lambda c: [self._note_pending(c, store.id, n) for n in pending],
                            attempts=busy_attempts)
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
                self._renew_lease(conn, store.id, release=True)
        return report

    def _write_batch(self, conn: sqlite3.Connection, store_id: int,
                     batch: list[tuple[str, LogFacts | None, Row | None, LogStat | None]], attempts: int) -> int:
        if not batch:
            return 0

        def write(c: sqlite3.Connection) -> int:
            count = 0
            for folder, facts, row, stat in batch:
                if facts is None:
                    if row is not None:
                        delete_rows(c, [row.rowid])
                    continue
                apply_facts(c, store_id, folder, facts)
                count += 1
            return count

        return transaction(conn, write, attempts=attempts)

    def _reread(self, row: Row, root: str, stat: LogStat | None) -> LogFacts | None:
        """The facts of a changed log (incremental when it only grew); ``None`` when it is gone."""
        if stat is None:
            return None
        path = os.path.join(root, row.folder, LOG_NAME)
        facts = None
        if row.chunks < MAX_BODY_CHUNKS - 1:
            facts = read_appended(path, row.previous(), stat, session_id=row.session_id, cwd=row.cwd,
                                  created_at=row.created_at)
        return facts if facts is not None else read_full(path, row.folder, stat)

    def _refresh(self, conn: sqlite3.Connection, roots: Mapping[int, str], changes: list[tuple[Row, LogStat | None]],
                 *, attempts: int = 1) -> _Refreshed:
        """Re-read changed rows and write them; returns what they now are (``None``: gone), written or not."""
        updated: dict[int, Row | None] = {}
        work: list[tuple[Row, LogFacts | None, LogStat | None]] = []
        for row, stat in changes:
            root = roots.get(row.store_id)
            facts = self._reread(row, root, stat) if root is not None else None
            work.append((row, facts, stat))
            updated[row.rowid] = row.with_facts(facts) if facts is not None else None

        def write(c: sqlite3.Connection) -> None:
            for row, facts, stat in work:
                if facts is None:
                    delete_rows(c, [row.rowid])
                elif facts.session_id != row.session_id:
                    delete_rows(c, [row.rowid])
                    apply_facts(c, row.store_id, row.folder, facts)
                else:
                    apply_facts(c, row.store_id, row.folder, facts)

        if self._try_write(conn, write, attempts=attempts):
            return _Refreshed(updated, True)
        log.debug("catalog: busy; %d refreshed row(s) are used without being saved", len(work))
        return _Refreshed(updated, False)

    @staticmethod
    def _try_write(conn: sqlite3.Connection, fn: Any, *, attempts: int = 1) -> bool:
        """Write if the database can be had within the busy timeout; ``False`` (nothing written) otherwise."""
        try:
            transaction(conn, fn, attempts=attempts)
        except sqlite3.OperationalError as exc:
            if error_kind(exc) != "busy":
                raise
            return False
        return True

    def _note_pending(self, conn: sqlite3.Connection, store_id: int, folder: str) -> None:
        conn.execute("INSERT OR REPLACE INTO pending_folders(store_id, folder, seen_ms) VALUES(?, ?, ?)",
                     (store_id, os.fsencode(folder), now_ms()))

    def _store_missing(self, conn: sqlite3.Connection, store: _Store) -> int:
        def mark(c: sqlite3.Connection) -> int:
            ids = [r[0] for r in c.execute("SELECT id FROM sessions WHERE store_id = ?", (store.id,))]
            count = delete_rows(c, ids)
            c.execute("DELETE FROM pending_folders WHERE store_id = ?", (store.id,))
            c.execute("UPDATE stores SET missing = 1, ready = 0, dir_mtime_ns = -1 WHERE id = ?", (store.id,))
            return count

        return transaction(conn, mark, attempts=3)

    def _take_lease(self, conn: sqlite3.Connection, store_id: int) -> bool:
        now = now_ms()
        cursor = transaction(conn, lambda c: c.execute(
            "UPDATE stores SET lease_until_ms = ? WHERE id = ? AND lease_until_ms < ?",
            (now + LEASE_MS, store_id, now)), attempts=3)
        return cursor.rowcount == 1

    def _renew_lease(self, conn: sqlite3.Connection, store_id: int, *, release: bool = False) -> None:
        value = 0 if release else now_ms() + LEASE_MS
        with contextlib.suppress(sqlite3.OperationalError):
            transaction(conn, lambda c: c.execute("UPDATE stores SET lease_until_ms = ? WHERE id = ?",
                                                  (value, store_id)), attempts=3)

    # ------------------------------------------------------------------------------------------ background
    def _submit(self, job: tuple[Any, ...]) -> None:
        if not self.background or self._closed:
            return
        with self._lock:
            if self._worker is None:
                self._worker = _Worker(self)
            self._worker.submit(job)

    def _run_job(self, conn: sqlite3.Connection, job: tuple[Any, ...]) -> None:
        if job[0] == "index":
            stores = self._load_stores(conn)
            store = stores.get(job[1])
            if store is not None:
                self._index_store(conn, store, deadline=None, full_stat=True, lease=True, busy_attempts=20)
        elif job[0] == "sweep":
            if not self._claim_sweep(conn):
                return
            for store in self._load_stores(conn).values():
                self._index_store(conn, store, deadline=None, full_stat=True, lease=True, busy_attempts=20)

    def _claim_sweep(self, conn: sqlite3.Connection) -> bool:
        """Across processes, one sweep per interval is enough."""
        now = now_ms()

        def claim(c: sqlite3.Connection) -> bool:
            row = c.execute("SELECT value FROM meta WHERE key = 'last_sweep_ms'").fetchone()
            if row is not None and now - int(row[0]) < self.sweep_interval * 1000:
                return False
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('last_sweep_ms', ?)", (str(now),))
            return True

        return transaction(conn, claim, attempts=20)

    def _maybe_sweep(self) -> None:
        if self.background and time.monotonic() - self._last_sweep >= self.sweep_interval:
            self._last_sweep = time.monotonic()
            self._submit(("sweep",))

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until background work is done (tests, benchmarks). ``True`` when it is."""
        worker = self._worker
        return True if worker is None else worker.wait_idle(timeout)

    # ------------------------------------------------------------------------------------------ freshness
    def _freshen(self, conn: sqlite3.Connection) -> tuple[dict[int, _Store], dict[int, Row | None]]:
        """Steps 1–3 of the module docstring; returns the stores as they are now, and the hot rows that were
        re-read but could not be saved (the database was busy), for the query to use as they are now.

        Writes here are best effort: when another process holds the database, the work is left to the
        next query or to the background (the rows about to be returned are still checked, step 4).
        """
        stores = self._load_stores(conn)
        changed = False
        for store in list(stores.values()):
            try:
                mtime = os.stat(store.root).st_mtime_ns
            except OSError:
                if not store.missing and self._best_effort(lambda: self._store_missing(conn, store)):
                    changed = True
                continue
            if mtime == store.dir_mtime_ns and not store.missing:
                continue
            if store.ready:
                deadline = time.monotonic() + self.listing_budget
                try:
                    part = self._index_store(conn, store, deadline=deadline, full_stat=False, lease=False,
                                             busy_attempts=1)
                except sqlite3.OperationalError as exc:
                    if error_kind(exc) != "busy":
                        raise
                    part = SyncReport(pending=True)
                if part.pending:
                    self._submit(("index", store.id))
                changed = True
            else:
                self._submit(("index", store.id))
        if changed:
            stores = self._load_stores(conn)
        roots = {s.id: s.root for s in stores.values()}
        pending = conn.execute("SELECT store_id, folder FROM pending_folders ORDER BY seen_ms DESC LIMIT ?",
                               (PENDING_LIMIT,)).fetchall()
        for store_id, raw in pending:
            root = roots.get(int(store_id))
            folder = os.fsdecode(bytes(raw))
            if root is None:
                continue
            path = os.path.join(root, folder, LOG_NAME)
            stat = stat_log(path)
            if stat is None:
                if not os.path.isdir(os.path.join(root, folder)):
                    self._try_write(conn, lambda c: c.execute(
                        "DELETE FROM pending_folders WHERE store_id = ? AND folder = ?", (store_id, raw)))
                continue
            facts = read_full(path, folder, stat)
            if facts is not None:
                self._try_write(conn, lambda c: apply_facts(c, int(store_id), folder, facts))
        cutoff = time.time_ns() - int(self.hot_window * 1e9)
        hot = [Row.from_sql(r) for r in conn.execute(
            f"SELECT {ROW_COLUMNS} FROM sessions WHERE mtime_ns > ? ORDER BY mtime_ns DESC LIMIT ?",
            (cutoff, HOT_LIMIT))]
        changes = [(row, stat) for row in hot if _changed(row, stat := stat_log(self._path(roots, row)))]
        unsaved: dict[int, Row | None] = {}
        if changes:
            refreshed = self._refresh(conn, roots, changes)
            if not refreshed.saved:
                unsaved = refreshed.rows
        return stores, unsaved

    @staticmethod
    def _best_effort(fn: Any) -> bool:
        """Run a write step; ``False`` when the database was busy (the step is retried later)."""
        try:
            fn()
            return True
        except sqlite3.OperationalError as exc:
            if error_kind(exc) != "busy":
                raise
            return False

    @staticmethod
    def _path(roots: Mapping[int, str], row: Row) -> str:
        return os.path.join(roots.get(row.store_id, "\x00missing"), row.folder, LOG_NAME)

    # ------------------------------------------------------------------------------------------ queries
    def candidates(self, target_id: str | None, target_cwd: str | None, text: str = "", limit: int = 50, *,
                   body: bool = False, live: Mapping[str, Any] | None = None, roots: Iterable[str] | None = None,
                   local: str | None = None, cancel: Any = None) -> list[CatalogEntry]:
        """Sessions a prompt of session ``target_id`` in ``target_cwd`` may reference, best first.

        The reference's rules: ``text`` (case-insensitive) filters on id, cwd and latest title; ranking puts
        sessions of ``target_cwd`` first, then sessions without a cwd, then the rest, each newest first
        (``createdAt`` descending, then id). ``body=True`` also matches sessions whose projected messages
        contain every word of ``text`` (see :mod:`.bodies`). ``live`` maps ids to in-memory logs that
        override the indexed ones. ``roots`` restricts the answer to those stores. ``local`` is the asking
        host's own store: when the catalog cannot answer, it is read first.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        if not isinstance(text, str):
            raise TypeError(f"the query must be a str, got {type(text).__name__}")
        needle = text.lower()
        body_query = fts_query(text) if body else None
        lives = {sid: lg for sid, lg in (live or {}).items() if sid != target_id}
        exclude = frozenset(lives) | ({target_id} if target_id is not None else frozenset())
        only = None if roots is None else {store_root(r) for r in roots}
        found: list[CatalogEntry] = []
        for sid, lg in lives.items():
            entry = live_entry(lg)
            if only is not None:
                continue
            if entry.matches(needle) or (body_query is not None and texts_match(live_texts(lg), text)):
                found.append(entry)
        scan_sources: list[ScanSource] = []
        self.last_query_complete = True
        try:
            with self._db() as conn:
                stores, unsaved = self._freshen(conn)
                wanted = {s.id for s in stores.values() if only is None or s.root in only}
                # Stores still being indexed: what is not indexed yet is read from the logs. The indexed set
                # is taken before the ranked query, so a log indexed in between is found twice, never missed.
                for store in stores.values():
                    if store.id in wanted and not store.ready and not store.missing:
                        indexed = {os.fsdecode(bytes(f)) for (f,) in conn.execute(
                            "SELECT folder FROM sessions WHERE store_id = ?", (store.id,))}
                        scan_sources.append(_unindexed(store.root, indexed))
                found.extend(self._ranked(conn, stores, wanted, target_cwd, needle, body_query, limit, exclude,
                                          unsaved))
            self._maybe_sweep()
        except CatalogUnavailable as exc:
            log.info("catalog: answering from the logs: %s", exc)
            names = self._all_roots()
            if local is not None:
                first = store_root(local)
                names = [first] + [n for n in names if n != first]
            scan_sources = [ScanSource(r) for r in names if only is None or r in only]
        if scan_sources:
            outcome = scan_candidates(scan_sources, target_id, target_cwd, needle, limit, exclude=exclude,
                                      deadline=deadline_in(self.fallback_budget), cancel=cancel)
            found.extend(outcome.entries)
            self.last_query_complete = outcome.complete
        found.sort(key=lambda e: e.order_key(target_cwd))
        unique: list[CatalogEntry] = []
        seen: set[str] = set()
        for entry in found:
            if entry.session_id not in seen:
                seen.add(entry.session_id)
                unique.append(entry)
            if len(unique) >= limit:
                break
        return unique

    def _ranked(self, conn: sqlite3.Connection, stores: Mapping[int, _Store], store_ids: set[int],
                target_cwd: str | None, needle: str, body_query: str | None, limit: int,
                exclude: frozenset[str], unsaved: Mapping[int, Row | None] | None = None) -> list[CatalogEntry]:
        """Step 4: the ranked rows of ``store_ids``, each checked against its log before it is returned.

        ``unsaved`` rows (re-read, not written: the database was busy) replace their stored version, and
        join the answer when they now match."""
        if not store_ids:
            return []
        roots = {s.id: s.root for s in stores.values()}
        where = Filter(target_cwd, needle, body_query, exclude, None if len(store_ids) == len(stores) else store_ids)
        overrides: dict[int, Row | None] = dict(unsaved or {})
        rows: list[Row] = []
        for _round in range(3):
            rows = [r for r in (overrides.get(row.rowid, row) if row.rowid in overrides else row
                                for row in select_rows(conn, where, limit)) if r is not None]
            changes = [(row, stat) for row in rows if _changed(row, stat := stat_log(self._path(roots, row)))]
            if not changes:
                break
            refreshed = self._refresh(conn, roots, changes)
            if refreshed.saved:
                continue  # the next round reads the saved rows
            overrides.update(refreshed.rows)
            rows = [r for r in (overrides.get(row.rowid, row) if row.rowid in overrides else row for row in rows)
                    if r is not None]
            break  # the database is busy: use the re-read rows as they are, without querying again
        entries = [row.entry(roots[row.store_id]) for row in rows]
        if overrides:
            # Rows re-read but not saved: drop those that no longer match, add those that now do.
            present = {row.rowid for row in rows}
            entries = [e for e in entries if body_query is not None or e.matches(needle)]
            for rowid, row in overrides.items():
                if row is None or rowid in present or row.store_id not in store_ids or row.session_id in exclude:
                    continue
                entry = row.entry(roots[row.store_id])
                if entry.matches(needle):
                    entries.append(entry)
            entries = _dedupe(sorted(entries, key=lambda e: e.order_key(target_cwd)), limit)
        return entries

    def select_candidates(self, query: Any, target: Any, needle: str, limit: int, cancel: Any = None, *,
                          body: bool = False) -> list[Any]:
        """The :class:`~dsh_jupyter.references.candidates.CandidateSource` face used by ``list_candidates``.

        ``query`` is the host's :class:`~dsh_jupyter.query.SessionQuery`: its live sessions are merged in,
        and its store is registered when it is a JSONL store the catalog did not know.
        """
        from ..references.candidates import SessionReferenceCandidate
        from ..store.jsonl import JsonlStore
        from .live import live_logs

        store = getattr(query, "store", None)
        local = None
        if isinstance(store, JsonlStore):
            local = self.register_store(store.root)
        entries = self.candidates(target.session_id, target.cwd, needle, limit, body=body, live=live_logs(query),
                                  local=local, cancel=cancel)
        if store is not None and not isinstance(store, JsonlStore):
            # A store the catalog cannot index (e.g. SQLite): merge its sessions by scanning it.
            from ..references.candidates import select_by_scanning

            for c in select_by_scanning(query, target, needle, limit, cancel):
                entries.append(CatalogEntry(c.session_id, "", "", c.cwd, c.created_at,
                                            None if c.label == c.session_id else c.label, indexed=False))
            entries = _dedupe(sorted(entries, key=lambda e: e.order_key(target.cwd)), limit)
        return [SessionReferenceCandidate(session_id=e.session_id, label=e.label, cwd=e.cwd,
                                          same_workspace=e.cwd is not None and e.cwd == target.cwd,
                                          created_at=e.created_at) for e in entries]

    def read_surface(self, query: Any, session_id: str, *, skip_data: Collection[str] = ()) -> Any:
        """Read a referenced session: from ``query`` (live or its own store), else from the store that holds it.

        ``skip_data`` is passed on (event types the caller will not look into)."""
        from ..session import SessionNotFoundError
        from ..store.jsonl import JsonlStore

        try:
            return query.read_surface(session_id, skip_data=skip_data)
        except SessionNotFoundError:
            try:
                copies = self.lookup(session_id)
            except CatalogUnavailable:
                raise SessionNotFoundError(session_id, "the catalog (unavailable right now)") from None
            for entry in copies:
                try:
                    return JsonlStore(entry.store).read_surface(session_id, skip_data=skip_data)
                except SessionNotFoundError:
                    continue
            raise

    def lookup(self, session_id: str) -> list[CatalogEntry]:
        """Every indexed copy of ``session_id`` (the primary copy first), checked against its log."""
        with self._db() as conn:
            stores, _ = self._freshen(conn)
            roots = {s.id: s.root for s in stores.values()}
            rows = [Row.from_sql(r) for r in conn.execute(
                f"SELECT {ROW_COLUMNS} FROM sessions WHERE session_id = ? ORDER BY is_primary DESC, mtime_ns DESC",
                (enc(session_id),))]
            changes = [(row, stat) for row in rows if _changed(row, stat := stat_log(self._path(roots, row)))]
            if changes:
                updated = self._refresh(conn, roots, changes).rows
                rows = [r for r in (updated.get(row.rowid, row) if row.rowid in updated else row for row in rows)
                        if r is not None]
            notebook = conn.execute("SELECT notebook FROM notebooks WHERE session_id = ?",
                                    (enc(session_id),)).fetchone()
        return [row.entry(roots[row.store_id], notebook[0] if notebook else None) for row in rows]

    def find(self, text: str) -> list[CatalogEntry]:
        """Sessions whose id is ``text`` or starts with it (primary copies; exact match alone when there is one)."""
        exact = self.lookup(text)
        if exact:
            return exact[:1]
        key = enc(text)
        with self._db() as conn:
            stores, _ = self._freshen(conn)
            roots = {s.id: s.root for s in stores.values()}
            rows = [Row.from_sql(r) for r in conn.execute(
                f"SELECT {ROW_COLUMNS} FROM sessions WHERE is_primary = 1 AND substr(session_id, 1, ?) = ? "
                "ORDER BY session_id LIMIT 20", (len(key), key))]
        return [row.entry(roots[row.store_id]) for row in rows if stat_log(self._path(roots, row)) is not None]

    def sessions(self, roots: Iterable[str] | None = None, *, limit: int | None = None) -> list[CatalogEntry]:
        """Sessions newest first (``createdAt`` descending, then id), from ``roots`` or every store.

        Copies of one session in several stores are all listed when their stores are named in ``roots``.
        """
        only = None if roots is None else [store_root(r) for r in roots]
        with self._db() as conn:
            stores, _ = self._freshen(conn)
            roots_by_id = {s.id: s.root for s in stores.values()}
            where, params = ("is_primary = 1", [])
            if only is not None:
                ids = [s.id for s in stores.values() if s.root in only]
                where = f"store_id IN ({','.join('?' * len(ids))})" if ids else "0"
                params = ids
            sql = f"SELECT {ROW_COLUMNS} FROM sessions WHERE {where} ORDER BY created_at DESC, session_id, store_id"
            if limit is not None:
                sql += f" LIMIT {int(limit)}"
            rows = [Row.from_sql(r) for r in conn.execute(sql, params)]
            changes = [(row, stat) for row in rows if _changed(row, stat := stat_log(self._path(roots_by_id, row)))]
            if changes:
                updated = self._refresh(conn, roots_by_id, changes).rows
                rows = [r for r in (updated.get(row.rowid, row) if row.rowid in updated else row for row in rows)
                        if r is not None]
            notebooks = dict(conn.execute("SELECT session_id, notebook FROM notebooks").fetchall())
        return [row.entry(roots_by_id[row.store_id], notebooks.get(enc(row.session_id))) for row in rows]

    def stats(self) -> dict[str, Any]:
        """Sizes: sessions, stores, body rows, and the catalog file's bytes (with its WAL)."""
        with self._db() as conn:
            sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
            stores = conn.execute("SELECT count(*) FROM stores").fetchone()[0]
            bodies = conn.execute("SELECT count(*) FROM bodies").fetchone()[0]
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += os.stat(str(self.path) + suffix).st_size
        return {"sessions": sessions, "stores": stores, "bodyRows": bodies, "bytes": size, "path": str(self.path)}


def _unindexed(root: str, indexed: set[str]) -> ScanSource:
    try:
        names = {e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)}
    except OSError:
        names = set()
    return ScanSource(root, frozenset(names - indexed))


def _dedupe(entries: list[CatalogEntry], limit: int) -> list[CatalogEntry]:
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


def _registry() -> Any:
    """The known-stores file module (imported on first use: it brings in filelock)."""
    from . import registry

    return registry


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class _Worker:
    """One daemon thread doing background indexing with its own connection; jobs are deduplicated."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._jobs: dict[tuple[Any, ...], None] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="dsh-catalog-indexer", daemon=True)
        self._thread.start()

    def submit(self, job: tuple[Any, ...]) -> None:
        with self._cond:
            self._jobs[job] = None
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._jobs.clear()
            self._cond.notify_all()
        self._thread.join(timeout=5)

    def wait_idle(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        conn_ino: int | None = None
        try:
            while True:
                with self._cond:
                    while not self._jobs and not self._stopped:
                        self._cond.wait()
                    if self._stopped:
                        return
                    job = next(iter(self._jobs))
                    del self._jobs[job]
                    self._busy = True
                try:
                    if conn is not None and _inode(self.catalog.path) != conn_ino:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                        conn = None
                    if conn is None:
                        conn = self.catalog._connect(BACKGROUND_BUSY_MS)
                        conn_ino = _inode(self.catalog.path)
                    self.catalog._run_job(conn, job)
                except sqlite3.DatabaseError as exc:
                    log.warning("catalog: background indexing failed (%s); it is retried at the next query", exc)
                    if conn is not None:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                    conn = None
                    if error_kind(exc) == "corrupt":
                        with self.catalog._lock:
                            self.catalog._recover(exc, conn_ino)
                except Exception:  # noqa: BLE001 - background work must never kill the thread silently
                    log.exception("catalog: background job %r failed", job)
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()


_CATALOGS: dict[Path, Catalog] = {}
_CATALOGS_LOCK = threading.Lock()


def open_catalog(home: str | os.PathLike[str] | None = None) -> Catalog:
    """The process-wide catalog of ``home`` (default: ``DSH_HOME``, else ``~/.dsh``). Opening is lazy."""
    from ..tools.home import resolve_dsh_home

    path = resolve_dsh_home(home) / CATALOG_NAME
    with _CATALOGS_LOCK:
        catalog = _CATALOGS.get(path)
        if catalog is None or catalog._closed:
            catalog = Catalog(path)
            _CATALOGS[path] = catalog
        return catalog


__all__ = ["Catalog", "CatalogCorrupt", "CatalogUnavailable", "StoreInfo", "SyncReport", "open_catalog", "store_root"]
