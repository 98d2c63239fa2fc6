"""The catalog file: opening it (one connection per thread), its schema, and recovery when it is damaged.

A damaged catalog file is set aside (``catalog.sqlite.corrupt``) and rebuilt from the logs; one process does
it (a file lock), the others reopen once it is done. A catalog that is locked, being rebuilt or cannot be
opened raises :class:`~.schema.CatalogUnavailable` at once (and is not tried again for a moment), so a query
can fall back to reading the logs instead of waiting.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from filelock import FileLock, Timeout

from .registry import read_roots
from .rows import transaction, upsert_store
from .schema import CatalogCorrupt, CatalogUnavailable, connect, ensure_schema, error_kind

log = logging.getLogger(__name__)

#: How long after a failure to open the catalog it is tried again.
RETRY_SECONDS = 1.0


def inode(path: Path) -> int | None:
    """The inode ``path`` names now (``None``: nothing there): a changed one means the file was replaced."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class Connections:
    """The connections of one process to one catalog file (thread-safe).

    ``lock`` serialises opening, recovery and the background worker's start; queries never take it once
    their thread has a connection.
    """

    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.home = home
        self.lock = threading.RLock()
        self.closed = False
        self._local = threading.local()  # one connection per thread: no thread waits for another's reads
        self._conns: list[sqlite3.Connection] = []
        self._retry_at = 0.0
        self._unavailable_reason = ""

    def connect(self, busy_ms: int) -> sqlite3.Connection:
        """A new connection with the schema in place (a new catalog learns the stores from the registry file)."""
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
        roots = read_roots(self.home)
        if not roots:
            return
        transaction(conn, lambda c: [upsert_store(c, root) for root in roots], attempts=5)
        log.info("catalog: new catalog at %s; indexing %d known store(s)", self.path, len(roots))

    @contextlib.contextmanager
    def db(self, busy_ms: int) -> Iterator[sqlite3.Connection]:
        """This thread's connection; SQLite errors become :class:`CatalogUnavailable` (and trigger recovery)."""
        if self.closed:
            raise CatalogUnavailable("the catalog was closed")
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is not None and inode(self.path) != local.ino:
            self.drop()  # the file was replaced (set aside after damage, or removed)
            conn = None
        if conn is None:
            with self.lock:
                if time.monotonic() < self._retry_at:
                    raise CatalogUnavailable(self._unavailable_reason)
                try:
                    conn = self.connect(busy_ms)
                except sqlite3.DatabaseError as exc:
                    self.failed(exc)
                except OSError as exc:
                    self._retry_at = time.monotonic() + RETRY_SECONDS
                    self._unavailable_reason = f"cannot create the catalog at {self.path}: {exc}"
                    raise CatalogUnavailable(self._unavailable_reason) from exc
                local.conn, local.ino = conn, inode(self.path)
                self._conns.append(conn)
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            self.failed(exc)
        except sqlite3.ProgrammingError as exc:  # closed under us (close() at shutdown)
            self.drop()
            raise CatalogUnavailable(f"the catalog {self.path} was closed: {exc}") from exc

    def failed(self, exc: sqlite3.DatabaseError) -> NoReturn:
        """React to an SQLite error on this thread's connection, then raise :class:`CatalogUnavailable`."""
        kind = error_kind(exc)
        if kind == "busy":
            raise CatalogUnavailable(f"the catalog {self.path} is busy: {exc}") from exc
        if kind == "corrupt":
            failed_ino = getattr(self._local, "ino", None)
            self.drop()
            with self.lock:
                self.recover(exc, failed_ino)
            raise CatalogCorrupt(f"the catalog {self.path} was damaged ({exc}); it is being rebuilt from the logs") \
                from exc
        self.drop()
        self._retry_at = time.monotonic() + RETRY_SECONDS
        self._unavailable_reason = f"the catalog {self.path} cannot be used: {exc}"
        raise CatalogUnavailable(self._unavailable_reason) from exc

    def drop(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            with self.lock, contextlib.suppress(ValueError):
                self._conns.remove(conn)

    def recover(self, exc: BaseException, failed_ino: int | None) -> None:
        """Set a damaged catalog aside and start again from the logs (one process does it; others wait).

        ``failed_ino`` is the inode of the file the failing connection had open: when the path now names
        another file, someone already replaced it, and there is nothing to set aside."""
        self._retry_at = time.monotonic() + 0.2
        self._unavailable_reason = f"the catalog {self.path} is being rebuilt"
        lock = FileLock(str(self.path) + ".rebuild.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return  # another process is setting it aside; we reopen once it is done
        try:
            if failed_ino is not None and inode(self.path) not in (None, failed_ino):
                return  # someone already replaced it with a new file: just reopen
            self._set_aside()
            log.warning("catalog: %s was damaged (%s); it was moved to %s.corrupt and is rebuilt from the logs",
                        self.path, exc, self.path.name)
        finally:
            lock.release()
        self._retry_at = 0.0

    def _set_aside(self) -> None:
        aside = self.path.with_name(self.path.name + ".corrupt")
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.path) + suffix)

    def close(self) -> None:
        """Close every connection (the caller stopped the background work first)."""
        with self.lock:
            self.closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
