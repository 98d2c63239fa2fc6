"""Logs the catalog could not index, remembered by what ``stat`` says about them.

A log whose read or write failed (damage no reader survives, an unreadable file, a value SQLite refuses) is
recorded in ``failed_logs`` with its size, mtime and inode. Until one of those changes, indexing passes it
by: the same failing file is never read again in a loop, by a query, a sweep or the background worker.
Writing the log's row (it became readable) or a full reindex forgets the failure.

Every function here runs inside a transaction the caller holds, except :func:`failed_stats` (a read).
"""

from __future__ import annotations

import os
import sqlite3

from .logs import LogStat
from .rows import now_ms

#: A failure reason is kept this short (it is for people reading the catalog, e.g. ``stats``).
_REASON_CHARS = 300


def note_failure(conn: sqlite3.Connection, store_id: int, folder: str, stat: LogStat, reason: str) -> None:
    """Remember that the log in ``folder`` as it is now (``stat``) cannot be indexed, and why."""
    conn.execute(
        "INSERT OR REPLACE INTO failed_logs(store_id, folder, size, mtime_ns, ino, reason, failed_ms) "
        "VALUES(?, ?, ?, ?, ?, ?, ?)",
        (store_id, os.fsencode(folder), stat.size, stat.mtime_ns, stat.ino, reason[:_REASON_CHARS], now_ms()),
    )


def failed_stats(conn: sqlite3.Connection, store_id: int, folders: list[str] | None = None) -> dict[str, LogStat]:
    """The stat each failed log of the store had when it failed, by folder (``folders``: only those)."""
    if folders is None:
        cursor = conn.execute("SELECT folder, size, mtime_ns, ino FROM failed_logs WHERE store_id = ?", (store_id,))
        rows = cursor.fetchall()
    else:
        rows = []
        for folder in folders:
            rows.extend(conn.execute("SELECT folder, size, mtime_ns, ino FROM failed_logs "
                                     "WHERE store_id = ? AND folder = ?", (store_id, os.fsencode(folder))))
    return {os.fsdecode(bytes(r[0])): LogStat(int(r[1]), int(r[2]), int(r[3])) for r in rows}


def forget_failures(conn: sqlite3.Connection, store_id: int | None = None) -> None:
    """Forget the failures of one store (``None``: of every store), so their logs are read again."""
    if store_id is None:
        conn.execute("DELETE FROM failed_logs")
    else:
        conn.execute("DELETE FROM failed_logs WHERE store_id = ?", (store_id,))


def failure_count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM failed_logs").fetchone()[0])
