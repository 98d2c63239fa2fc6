"""Catalog rows: reading them into Python and writing what a log read found (inside a transaction).

Every write here runs inside a transaction the caller holds (see :func:`transaction`). Writing a row also
keeps its body-index rows and the ``is_primary`` flag in step: when the same session id is stored in
several stores (a copied folder), exactly one row per id is primary, the copy whose log changed last, so
every query shows each session once.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..conversation.spend import Spend
from ..secrets import mask_text
from .bodies import index_text, pack, unpack
from .entries import CatalogEntry
from .logs import LogRead, LogRecord, LogStat
from .schema import BODY_SHIFT, dec, enc, error_kind

T = TypeVar("T")

#: Columns of ``sessions`` read into a :class:`Row` (with ``store_id``'s root resolved separately).
ROW_COLUMNS = ("id, store_id, folder, session_id, cwd, created_at, title, readable, events, surface, user_messages, "
               "assistant_messages, size, mtime_ns, ino, committed, tail, next_seq, body_bytes, body_truncated, "
               "chunks, body_messages, spend_usd, priced_calls, unpriced_calls")


@dataclass(frozen=True)
class Row:
    """A ``sessions`` row: where the log is (store and folder), how many body rows it has, and its record."""

    rowid: int
    store_id: int
    folder: str
    chunks: int
    log: LogRecord

    @classmethod
    def from_sql(cls, r: tuple[Any, ...]) -> Row:
        record = LogRecord(dec(r[3]) or "", dec(r[4]), int(r[5]), dec(r[6]), bool(r[7]), r[8], r[9], r[10], r[11],
                           LogStat(r[12], r[13], r[14]), r[15], bytes(r[16]), r[17], r[18], bool(r[19]), int(r[21]),
                           Spend(float(r[22]), int(r[23]), int(r[24])))
        return cls(r[0], r[1], os.fsdecode(bytes(r[2])), r[20], record)

    @property
    def session_id(self) -> str:
        return self.log.session_id

    @property
    def stat(self) -> LogStat:
        return self.log.stat

    def entry(self, root: str, notebook: str | None = None) -> CatalogEntry:
        record = self.log
        return CatalogEntry(record.session_id, root, self.folder, record.cwd, record.created_at, record.title,
                            record.events, record.surface, record.user_messages, record.assistant_messages,
                            record.stat.size, record.stat.mtime_ns, record.readable, notebook,
                            body_truncated=record.body_truncated, body_messages=record.body_messages,
                            spend=record.spend)

    def with_read(self, read: LogRead) -> Row:
        """This row as it reads after ``read`` (used when the refreshed row could not be written)."""
        return Row(self.rowid, self.store_id, self.folder, self.chunks, read.record)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], *, attempts: int = 1,
                pause: float = 0.01) -> T:
    """Run ``fn`` in ``BEGIN IMMEDIATE`` … ``COMMIT``; a busy database is retried ``attempts`` times in all."""
    for attempt in range(attempts):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if error_kind(exc) == "busy" and attempt + 1 < attempts:
                time.sleep(pause * (attempt + 1))
                continue
            raise
        try:
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def upsert_store(conn: sqlite3.Connection, root: str) -> tuple[int, bool]:
    """The store's id, inserting it when new; ``True`` when it was inserted."""
    key = os.fsencode(root)
    row = conn.execute("SELECT id FROM stores WHERE root = ?", (key,)).fetchone()
    if row is not None:
        return int(row[0]), False
    cursor = conn.execute("INSERT INTO stores(root, registered_ms) VALUES(?, ?)", (key, now_ms()))
    return _inserted_id(cursor), True


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    rowid = cursor.lastrowid
    assert rowid is not None  # an INSERT that succeeded
    return int(rowid)


def apply_read(conn: sqlite3.Connection, store_id: int, folder: str, read: LogRead) -> int:
    """Write what a read of the log in ``folder`` found; returns the row id.

    The title and body text are masked (:mod:`dsh_jupyter.secrets`): a log written before masking existed, or
    where other keys were set, must not be copied whole into the catalog in ``DSH_HOME``."""
    facts = read.record
    title = mask_text(facts.title) if facts.title is not None else None
    values = (
        enc(facts.session_id), enc(facts.cwd) if facts.cwd is not None else None, facts.created_at,
        enc(title) if title is not None else None, enc(facts.session_id.lower()),
        enc(facts.cwd.lower()) if facts.cwd is not None else None,
        enc(title.lower()) if title is not None else None, int(facts.readable), facts.events, facts.surface,
        facts.user_messages, facts.assistant_messages, facts.stat.size, facts.stat.mtime_ns, facts.stat.ino,
        facts.committed, facts.tail, facts.next_seq, facts.body_bytes, int(facts.body_truncated), now_ms(),
        facts.body_messages, facts.spend.usd, facts.spend.priced, facts.spend.unpriced,
    )
    key = os.fsencode(folder)
    found = conn.execute("SELECT id, chunks, session_id, id_lc, cwd_lc, title_lc FROM sessions "
                         "WHERE store_id = ? AND folder = ?", (store_id, key)).fetchone()
    if found is None:
        cursor = conn.execute(
            "INSERT INTO sessions(session_id, cwd, created_at, title, id_lc, cwd_lc, title_lc, readable, events, "
            "surface, user_messages, assistant_messages, size, mtime_ns, ino, committed, tail, next_seq, body_bytes, "
            "body_truncated, indexed_ms, body_messages, spend_usd, priced_calls, unpriced_calls, store_id, folder, "
            f"chunks) VALUES({'?,' * 27}0)",
            (*values, store_id, key),
        )
        rowid, chunks, previous_id = _inserted_id(cursor), 0, None
    else:
        rowid, chunks, previous_id = int(found[0]), int(found[1]), bytes(found[2])
        _unindex_meta(conn, rowid, found[3], found[4], found[5])
        conn.execute(
            "UPDATE sessions SET session_id=?, cwd=?, created_at=?, title=?, id_lc=?, cwd_lc=?, title_lc=?, "
            "readable=?, events=?, surface=?, user_messages=?, assistant_messages=?, size=?, mtime_ns=?, ino=?, "
            "committed=?, tail=?, next_seq=?, body_bytes=?, body_truncated=?, indexed_ms=?, body_messages=?, "
            "spend_usd=?, priced_calls=?, unpriced_calls=? WHERE id=?",
            (*values, rowid),
        )
    conn.execute(_META_INSERT, (rowid, meta_text(values[4]), meta_text(values[5]), meta_text(values[6])))
    if read.full:
        _drop_bodies(conn, rowid, chunks)
        chunks = 0
    if read.bodies:
        text = mask_text(index_text(read.bodies))
        body_id = (rowid << BODY_SHIFT) | chunks
        conn.execute("INSERT INTO bodies(id, text_z) VALUES(?, ?)", (body_id, pack(text)))
        conn.execute("INSERT INTO body_index(rowid, text) VALUES(?, ?)", (body_id, text))
        chunks += 1
    conn.execute("UPDATE sessions SET chunks = ? WHERE id = ?", (chunks, rowid))
    conn.execute("DELETE FROM pending_folders WHERE store_id = ? AND folder = ?", (store_id, key))
    conn.execute("DELETE FROM failed_logs WHERE store_id = ? AND folder = ?", (store_id, key))
    sid = enc(facts.session_id)
    recompute_primary(conn, sid)
    if previous_id is not None and previous_id != sid:
        recompute_primary(conn, previous_id)
    return rowid


def meta_text(value: bytes | None) -> bytes | None:
    """What the trigram index is given for a lowercased field. FTS5 stops reading text at a NUL, so NUL
    is indexed as U+0001 instead; needles holding either character never use the index
    (:func:`.search.trigram_query`), so no other needle can tell the two apart."""
    return value.replace(b"\x00", b"\x01") if value is not None else None


_META_INSERT = ("INSERT INTO meta_index(rowid, sid, cwd, title) "
                "VALUES(?, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT))")


def _unindex_meta(conn: sqlite3.Connection, rowid: int, id_lc: bytes, cwd_lc: bytes | None,
                  title_lc: bytes | None) -> None:
    conn.execute("INSERT INTO meta_index(meta_index, rowid, sid, cwd, title) "
                 "VALUES('delete', ?, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT))",
                 (rowid, meta_text(id_lc), meta_text(cwd_lc), meta_text(title_lc)))


def _drop_bodies(conn: sqlite3.Connection, rowid: int, chunks: int) -> None:
    if chunks <= 0:
        return
    low = rowid << BODY_SHIFT
    high = low | ((1 << BODY_SHIFT) - 1)
    rows = conn.execute("SELECT id, text_z FROM bodies WHERE id BETWEEN ? AND ?", (low, high)).fetchall()
    for body_id, text_z in rows:
        conn.execute("INSERT INTO body_index(body_index, rowid, text) VALUES('delete', ?, ?)",
                     (body_id, unpack(bytes(text_z))))
    conn.execute("DELETE FROM bodies WHERE id BETWEEN ? AND ?", (low, high))


def delete_rows(conn: sqlite3.Connection, rowids: Iterable[int]) -> int:
    """Remove rows (and their body rows); returns how many existed."""
    removed = 0
    touched: set[bytes] = set()
    for rowid in rowids:
        found = conn.execute("SELECT chunks, session_id, id_lc, cwd_lc, title_lc FROM sessions WHERE id = ?",
                             (rowid,)).fetchone()
        if found is None:
            continue
        _drop_bodies(conn, rowid, int(found[0]))
        _unindex_meta(conn, rowid, found[2], found[3], found[4])
        conn.execute("DELETE FROM sessions WHERE id = ?", (rowid,))
        touched.add(bytes(found[1]))
        removed += 1
    for sid in touched:
        recompute_primary(conn, sid)
    return removed


def recompute_primary(conn: sqlite3.Connection, sid: bytes) -> None:
    """Mark the one primary copy of session ``sid``: the log changed last, then the lowest store id."""
    conn.execute(
        "UPDATE sessions SET is_primary = (id = (SELECT id FROM sessions WHERE session_id = ?1 "
        "ORDER BY mtime_ns DESC, store_id ASC, id ASC LIMIT 1)) WHERE session_id = ?1",
        (sid,),
    )


def store_rows(conn: sqlite3.Connection, store_id: int) -> dict[str, Row]:
    """Every row of one store by folder name."""
    cursor = conn.execute(f"SELECT {ROW_COLUMNS} FROM sessions WHERE store_id = ?", (store_id,))
    return {row.folder: row for row in map(Row.from_sql, cursor.fetchall())}
