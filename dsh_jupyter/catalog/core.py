"""The session catalog: an SQLite index of every session in every known store, kept fresh cheaply.

Where it lives: ``<DSH_HOME>/catalog.sqlite`` (WAL mode, so readers never wait for a writer), with the list
of known stores mirrored in ``<DSH_HOME>/catalog-stores.json``. It is a derived index, never the source of
truth: deleting it loses nothing, it is rebuilt from the logs.

Freshness, and what each query pays for it (the keystroke path):

1. every known store's root folder is ``stat``-ed; a changed mtime means folders were added or removed, and
   the listing is reconciled (new logs read, deleted ones dropped) within a small time budget, the rest in
   the background (a new log too big to read within a keystroke is always left to the background);
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

Big and bad logs: at most ``body_cap`` bytes of message text are indexed per session (the entry says
``body_truncated`` when more was left out), and a log that cannot be read or stored is left out and
remembered until it changes (:mod:`.indexer`): one log never makes the catalog unavailable or hides others.

Where the code is: :mod:`.connection` (opening, schema, recovery), :mod:`.registry` (known stores),
:mod:`.indexer` and :mod:`.worker` (reading logs into rows, in the foreground or a background thread),
:mod:`.freshness` (what a query checks) and :mod:`.search` (the ranked SQL); this module ties them together.

Failure handling: a damaged catalog file is set aside (``catalog.sqlite.corrupt``) and rebuilt in the
background; a catalog that is locked, being rebuilt or cannot be opened never blocks a query for long: the
query falls back to reading the logs directly, bounded in time (``fallback_budget``) and cancellable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..conversation.spend import Spend
from ..home import resolve_dsh_home
from ..session import SessionNotFoundError
from ..store.jsonl import JsonlStore
from ..store.paths import session_folder_name
from .bodies import BODY_CAP, fts_query, texts_match
from .connection import Connections
from .entries import LOG_NAME, CatalogEntry
from .failures import failure_count, forget_failures
from .fallback import ScanSource, deadline_in, scan_candidates
from .folds import FoldCache
from .freshness import HOT_WINDOW, LISTING_BUDGET, checked, dedupe, freshen, log_path, ranked
from .indexer import FOREGROUND_READ_BYTES, Indexer, SyncReport, changed, note_pending, try_write
from .live import live_entry, live_logs, live_texts
from .logs import stat_log
from .registry import (
    KnownStore,
    StoreInfo,
    add_roots,
    came_back,
    load_stores,
    read_roots,
    remove_roots,
    store_id,
    store_infos,
    store_root,
)
from .rows import ROW_COLUMNS, Row, delete_rows, now_ms, transaction, upsert_store
from .schema import CATALOG_NAME, CatalogCorrupt, CatalogUnavailable, enc
from .worker import Job, Worker

log = logging.getLogger(__name__)

#: Background sweep (stat every log of every store) at most this often while queries are made.
SWEEP_INTERVAL = 30.0
#: Busy timeout of the keystroke path (milliseconds).
FOREGROUND_BUSY_MS = 40
#: Time a query may spend reading logs directly when the catalog cannot answer for them.
FALLBACK_BUDGET = 0.25


class Catalog:
    """The session catalog of one ``DSH_HOME`` (see the module docstring).

    Thread-safe; one instance per process is enough (:func:`open_catalog`). ``background=False`` does all
    work in the calling thread (tests, the command line). ``body_cap`` is the most message text (bytes)
    indexed per session.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, home: str | os.PathLike[str] | None = None,
                 hot_window: float = HOT_WINDOW, sweep_interval: float = SWEEP_INTERVAL,
                 fallback_budget: float = FALLBACK_BUDGET, listing_budget: float = LISTING_BUDGET,
                 background: bool = True, body_cap: int = BODY_CAP) -> None:
        if path is None:
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
        self._connections = Connections(self.path, self.home)
        #: Fold results of the logs indexed or read for references (:mod:`.folds`).
        self.folds = FoldCache()
        self._indexer = Indexer(body_cap, folds=self.folds)
        self._known: set[str] = set()
        self._last_sweep = time.monotonic()
        self._worker: Worker | None = None
        #: Set when the last query had to fall back to reading logs and did not finish in time.
        self.last_query_complete = True

    def __repr__(self) -> str:
        return f"Catalog({str(self.path)!r})"

    @property
    def closed(self) -> bool:
        return self._connections.closed

    @property
    def body_cap(self) -> int:
        """The most message text (UTF-8 bytes) the body index holds per session."""
        return self._indexer.body_cap

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._connections.db(FOREGROUND_BUSY_MS) as conn:
            yield conn

    def close(self) -> None:
        """Stop background work and close the database."""
        with self._connections.lock:
            self._connections.closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()
        self._connections.close()

    # ------------------------------------------------------------------------------------------ stores
    def register_store(self, root: str | os.PathLike[str]) -> str:
        """Make a store known (cheap; nothing is read). Returns the catalog's name for it."""
        name = store_root(root)
        if name in self._known:
            return name
        add_roots(self.home, [name])
        with contextlib.suppress(CatalogUnavailable), self._db() as conn:
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
        return self._sync([name], budget=budget)

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
        """A host flushed ``session_id`` in ``root``: bring its row up to date now (cheap, incremental; a read
        of more than a few MB is handed to the background instead)."""
        name = store_root(root)
        folder = session_folder_name(session_id)
        try:
            with self._db() as conn:
                sid = store_id(conn, name)
                if sid is None:
                    return
                found = conn.execute(f"SELECT {ROW_COLUMNS} FROM sessions WHERE store_id = ? AND folder = ?",
                                     (sid, os.fsencode(folder))).fetchone()
                stat = stat_log(os.path.join(name, folder, LOG_NAME))
                row = None if found is None else Row.from_sql(found)
                defer = self._defer_bytes(True)
                start = 0 if row is None else (row.log.committed or 0)
                if stat is not None and defer is not None and stat.size - start > defer:
                    self._submit(("index", sid))  # too much to read on the caller's thread
                    return
                if row is None:
                    if stat is None:
                        try_write(conn, lambda c: note_pending(c, sid, folder))
                    else:
                        self._indexer.index_folder(conn, sid, name, folder, stat, attempts=3)
                    return
                if changed(row, stat):
                    self._indexer.refresh(conn, {sid: name}, [(row, stat)], attempts=3)
        except CatalogUnavailable as exc:
            log.debug("catalog: could not refresh %s: %s", session_id, exc)

    def forget_store(self, root: str | os.PathLike[str]) -> int:
        """Drop a store and its rows from the catalog (its logs are untouched); returns the rows dropped."""
        name = store_root(root)
        remove_roots(self.home, [name])
        self._known.discard(name)
        with self._db() as conn:
            sid = store_id(conn, name)
            if sid is None:
                return 0

            def drop(c: sqlite3.Connection) -> int:
                ids = [r[0] for r in c.execute("SELECT id FROM sessions WHERE store_id = ?", (sid,))]
                count = delete_rows(c, ids)
                c.execute("DELETE FROM pending_folders WHERE store_id = ?", (sid,))
                forget_failures(c, sid)
                c.execute("DELETE FROM stores WHERE id = ?", (sid,))
                return count

            return transaction(conn, drop, attempts=5)

    def stores(self) -> list[StoreInfo]:
        """Every known store; one marked missing whose folder is there again (:func:`.registry.came_back`) reads
        as a store still being indexed."""
        with self._db() as conn:
            infos = store_infos(conn)
        return [dataclasses.replace(info, missing=False) if came_back(info) else info for info in infos]

    def sync(self, roots: Iterable[str | os.PathLike[str]] | None = None, *, budget: float | None = None) -> SyncReport:
        """Reconcile stores with their logs now (every known store by default): new, changed, deleted."""
        names = [store_root(r) for r in roots] if roots is not None else None
        if names is not None:
            for name in names:
                self.register_store(name)
        self._last_sweep = time.monotonic()
        return self._sync(names, budget=budget)

    def reindex(self, roots: Iterable[str | os.PathLike[str]] | None = None) -> SyncReport:
        """Forget what the catalog knows about ``roots`` (default: every store) and index them again now.

        Logs that failed before are read again too, and every fold result kept for references is dropped."""
        started = time.monotonic()
        self.folds.clear()
        names = [store_root(r) for r in roots] if roots is not None else self._all_roots()
        for name in names:
            self.register_store(name)
        with self._db() as conn:
            stores = [s for s in load_stores(conn).values() if s.root in names]

            def forget(c: sqlite3.Connection) -> None:
                if roots is None:
                    c.execute("INSERT INTO body_index(body_index) VALUES('delete-all')")
                    c.execute("INSERT INTO meta_index(meta_index) VALUES('delete-all')")
                    c.execute("DELETE FROM bodies")
                    c.execute("DELETE FROM sessions")
                    c.execute("DELETE FROM pending_folders")
                    forget_failures(c)
                else:
                    for store in stores:
                        ids = [r[0] for r in c.execute("SELECT id FROM sessions WHERE store_id = ?", (store.id,))]
                        delete_rows(c, ids)
                        c.execute("DELETE FROM pending_folders WHERE store_id = ?", (store.id,))
                        forget_failures(c, store.id)
                for store in stores:
                    c.execute("UPDATE stores SET ready = 0, dir_mtime_ns = -1, lease_until_ms = 0 WHERE id = ?",
                              (store.id,))

            transaction(conn, forget, attempts=20)
        report = self._sync(names, budget=None)
        report.seconds = time.monotonic() - started
        return report

    def _all_roots(self) -> list[str]:
        roots = list(read_roots(self.home))
        with contextlib.suppress(CatalogUnavailable), self._db() as conn:
            for (root,) in conn.execute("SELECT root FROM stores ORDER BY id"):
                name = os.fsdecode(bytes(root))
                if name not in roots:
                    roots.append(name)
        for name in self._known:
            if name not in roots:
                roots.append(name)
        return roots

    # ------------------------------------------------------------------------------------------ indexing
    def _sync(self, names: list[str] | None, *, budget: float | None) -> SyncReport:
        started = time.monotonic()
        deadline = None if budget is None else started + budget
        report = SyncReport()
        try:
            with self._db() as conn:
                stores = load_stores(conn)
                wanted = [s for s in stores.values() if names is None or s.root in names]
                for store in wanted:
                    part = self._indexer.index_store(conn, store, deadline=deadline, full_stat=True, lease=True,
                                                     defer_bytes=self._defer_bytes(deadline is not None))
                    report.merge(part)
                    if part.pending:
                        self._submit(("index", store.id))
        except CatalogUnavailable as exc:
            report.errors.append(str(exc))
            report.pending = True
        report.seconds = time.monotonic() - started
        return report

    # ------------------------------------------------------------------------------------------ background
    def _submit(self, job: Job) -> None:
        if not self.background or self.closed:
            return
        with self._connections.lock:
            if self._worker is None:
                self._worker = Worker(self._connections, self._run_job)
            self._worker.submit(job)

    def _run_job(self, conn: sqlite3.Connection, job: Job) -> None:
        indexer = self._indexer
        if job[0] == "index" and isinstance(job[1], int):
            store = load_stores(conn).get(job[1])
            if store is not None:
                indexer.index_store(conn, store, deadline=None, full_stat=True, lease=True, busy_attempts=20)
        elif job[0] == "sweep":
            if not self._claim_sweep(conn):
                return
            for store in load_stores(conn).values():
                indexer.index_store(conn, store, deadline=None, full_stat=True, lease=True, busy_attempts=20)

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

    def _freshen(self, conn: sqlite3.Connection) -> tuple[dict[int, KnownStore], dict[int, Row | None]]:
        return freshen(conn, self._indexer, self._submit, hot_window=self.hot_window,
                       listing_budget=self.listing_budget, defer_bytes=self._defer_bytes(True))

    def _defer_bytes(self, hurried: bool) -> int | None:
        """Work with a deadline leaves huge logs to the background (when there is one to leave them to)."""
        return FOREGROUND_READ_BYTES if hurried and self.background else None

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
        for lg in lives.values():
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
                found.extend(ranked(conn, self._indexer, stores, wanted, target_cwd, needle, body_query, limit,
                                    exclude, unsaved))
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
        return self._with_notebooks(dedupe(sorted(found, key=lambda e: e.order_key(target_cwd)), limit))

    def _with_notebooks(self, entries: list[CatalogEntry]) -> list[CatalogEntry]:
        """``entries`` with the notebook each session was registered from (lists show it beside the title)."""
        missing = [e.session_id for e in entries if e.notebook is None]
        if not missing:
            return entries
        try:
            with self._db() as conn:
                found = dict(conn.execute(
                    f"SELECT session_id, notebook FROM notebooks WHERE session_id IN ({','.join('?' * len(missing))})",
                    [enc(sid) for sid in missing]).fetchall())
        except CatalogUnavailable:
            return entries
        return [dataclasses.replace(e, notebook=found[enc(e.session_id)])
                if e.notebook is None and enc(e.session_id) in found else e for e in entries]

    def select_candidates(self, query: Any, target: Any, needle: str, limit: int, cancel: Any = None, *,
                          body: bool = False) -> list[Any]:
        """The :class:`~dsh_jupyter.references.candidates.CandidateSource` face used by ``list_candidates``.

        ``query`` is the host's :class:`~dsh_jupyter.query.SessionQuery`: its live sessions are merged in,
        and its store is registered when it is a JSONL store the catalog did not know.
        """
        store = getattr(query, "store", None)
        local = None
        if isinstance(store, JsonlStore):
            local = self.register_store(store.root)
        entries = self.candidates(target.session_id, target.cwd, needle, limit, body=body, live=live_logs(query),
                                  local=local, cancel=cancel)
        if store is not None and not isinstance(store, JsonlStore):
            # A store the catalog cannot index (e.g. SQLite): merge its sessions by scanning it. Imported here:
            # the references package would add about 100 ms to every fresh process that opens the catalog.
            from ..references.candidates import select_by_scanning

            for c in select_by_scanning(query, target, needle, limit, cancel):
                entries.append(CatalogEntry(c.session_id, "", "", c.cwd, c.created_at,
                                            None if c.label == c.session_id else c.label, indexed=False,
                                            spend=Spend.from_json(c.cost)))
            entries = dedupe(sorted(entries, key=lambda e: e.order_key(target.cwd)), limit)
        return [e.candidate(target.cwd) for e in entries]

    def read_surface(self, query: Any, session_id: str, *, skip_data: Collection[str] = ()) -> Any:
        """Read a referenced session: from ``query`` (live or its own store), else from the store that holds it.

        ``skip_data`` is passed on (event types the caller will not look into). Logs of JSONL stores are read
        through the fold cache (:mod:`.folds`): a log that has not changed since the last read is not scanned
        again, one that only grew is scanned from where the last read stopped."""
        store = getattr(query, "store", None)
        try:
            if isinstance(store, JsonlStore) and session_id not in live_logs(query):
                return self.folds.read_surface(store, session_id, skip_data=skip_data)
            return query.read_surface(session_id, skip_data=skip_data)
        except SessionNotFoundError:
            try:
                copies = self.lookup(session_id)
            except CatalogUnavailable:
                raise SessionNotFoundError(session_id, "the catalog (unavailable right now)") from None
            for entry in copies:
                try:
                    return self.folds.read_surface(JsonlStore(entry.store), session_id, skip_data=skip_data)
                except SessionNotFoundError:
                    continue
            raise

    def indexed(self, root: str | os.PathLike[str], session_id: str) -> CatalogEntry | None:
        """``session_id`` of the store ``root`` as it was last indexed, or ``None`` (not indexed, or the catalog
        cannot answer). Nothing is read or refreshed: compare the entry's ``size`` and ``mtime_ns`` with the log
        to know whether its counts are still those of the log."""
        name = store_root(root)
        try:
            with self._db() as conn:
                sid = store_id(conn, name)
                found = None if sid is None else conn.execute(
                    f"SELECT {ROW_COLUMNS} FROM sessions WHERE store_id = ? AND folder = ?",
                    (sid, os.fsencode(session_folder_name(session_id)))).fetchone()
        except (CatalogUnavailable, sqlite3.Error):
            return None
        return None if found is None else Row.from_sql(found).entry(name)

    def lookup(self, session_id: str) -> list[CatalogEntry]:
        """Every indexed copy of ``session_id`` (the primary copy first), checked against its log."""
        with self._db() as conn:
            stores, _ = self._freshen(conn)
            roots = {s.id: s.root for s in stores.values()}
            rows = [Row.from_sql(r) for r in conn.execute(
                f"SELECT {ROW_COLUMNS} FROM sessions WHERE session_id = ? ORDER BY is_primary DESC, mtime_ns DESC",
                (enc(session_id),))]
            rows = checked(conn, self._indexer, roots, rows)
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
        return [row.entry(roots[row.store_id]) for row in rows if stat_log(log_path(roots, row)) is not None]

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
            rows = checked(conn, self._indexer, roots_by_id, rows)
            notebooks = dict(conn.execute("SELECT session_id, notebook FROM notebooks").fetchall())
        return [row.entry(roots_by_id[row.store_id], notebooks.get(enc(row.session_id))) for row in rows]

    def stats(self) -> dict[str, Any]:
        """Sizes: sessions, stores, body rows, sessions whose body index was cut at the cap, logs left out
        (failed), and the catalog file's bytes (with its WAL)."""
        with self._db() as conn:
            sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
            stores = conn.execute("SELECT count(*) FROM stores").fetchone()[0]
            bodies = conn.execute("SELECT count(*) FROM bodies").fetchone()[0]
            truncated = conn.execute("SELECT count(*) FROM sessions WHERE body_truncated = 1").fetchone()[0]
            failed = failure_count(conn)
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += os.stat(str(self.path) + suffix).st_size
        return {"sessions": sessions, "stores": stores, "bodyRows": bodies, "bodyIndexTruncated": truncated,
                "failedLogs": failed, "bodyCap": self.body_cap, "bytes": size, "path": str(self.path)}


def _unindexed(root: str, indexed: set[str]) -> ScanSource:
    try:
        names = {e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)}
    except OSError:
        names = set()
    return ScanSource(root, frozenset(names - indexed))


_CATALOGS: dict[Path, Catalog] = {}
_CATALOGS_LOCK = threading.Lock()


def open_catalog(home: str | os.PathLike[str] | None = None) -> Catalog:
    """The process-wide catalog of ``home`` (default: ``DSH_HOME``, else ``~/.dsh``). Opening is lazy."""
    path = resolve_dsh_home(home) / CATALOG_NAME
    with _CATALOGS_LOCK:
        catalog = _CATALOGS.get(path)
        if catalog is None or catalog.closed:
            catalog = Catalog(path)
            _CATALOGS[path] = catalog
        return catalog


__all__ = ["Catalog", "CatalogCorrupt", "CatalogUnavailable", "StoreInfo", "SyncReport", "open_catalog", "store_root"]
