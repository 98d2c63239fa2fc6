"""The background indexer: one daemon thread per catalog, with its own connection; jobs are deduplicated.

A job is a tuple (``("index", store_id)`` or ``("sweep",)``) run by the callable the catalog gives. A job
that fails is logged and dropped (the next query or sweep submits it again); the logs that made it fail are
remembered as failed by the indexer, so a failing log is never retried in a loop.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from .connection import Connections, inode
from .schema import error_kind

log = logging.getLogger(__name__)

#: Busy timeout of background work (milliseconds): it may wait for other writers, a keystroke may not.
BACKGROUND_BUSY_MS = 2000

Job = tuple[object, ...]


class Worker:
    """Runs submitted jobs one at a time in a daemon thread (see the module docstring)."""

    def __init__(self, connections: Connections, run: Callable[[sqlite3.Connection, Job], None]) -> None:
        self.connections = connections
        self.run = run
        self._jobs: dict[Job, None] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="dsh-catalog-indexer", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
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

    def _next(self) -> Job | None:
        with self._cond:
            while not self._jobs and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return None
            job = next(iter(self._jobs))
            del self._jobs[job]
            self._busy = True
            return job

    def _loop(self) -> None:
        conn: sqlite3.Connection | None = None
        conn_ino: int | None = None
        path = self.connections.path
        try:
            while (job := self._next()) is not None:
                try:
                    if conn is not None and inode(path) != conn_ino:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                        conn = None
                    if conn is None:
                        conn = self.connections.connect(BACKGROUND_BUSY_MS)
                        conn_ino = inode(path)
                    self.run(conn, job)
                except sqlite3.DatabaseError as exc:
                    log.warning("catalog: background indexing failed (%s); it is retried at the next query", exc)
                    if conn is not None:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                    conn = None
                    if error_kind(exc) == "corrupt":
                        with self.connections.lock:
                            self.connections.recover(exc, conn_ino)
                except Exception:  # background work must never kill the thread silently
                    log.exception("catalog: background job %r failed", job)
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
