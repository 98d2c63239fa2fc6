"""The catalog database: file location, connection settings, tables, and what an SQLite error means.

The catalog is a derived index: every table can be rebuilt from the session logs (plus the list of known
stores, which is mirrored in :mod:`.registry`). A schema from another version is therefore never migrated:
it is dropped and rebuilt.

Text that may hold lone UTF-16 surrogates (session ids, cwds, titles: the log format allows them) is stored
as UTF-8 ``BLOB`` with surrogates passed through (:func:`enc`). Byte order of that encoding is code-point
order, so ``ORDER BY session_id`` sorts exactly like Python's ``str`` comparison, and ``instr`` on the
lowercased blobs is exactly Python's ``needle in text.lower()`` (UTF-8 is self-synchronising).

``meta_index`` is a trigram index over the same lowercased id, cwd and title (inserted as those very bytes),
so a needle of three or more characters finds its rows without reading every row; ``body_index`` indexes
the projected message text (see :mod:`.bodies`), at most a fixed number of bytes per session
(``sessions.body_truncated`` says when text was left out). ``failed_logs`` remembers logs that could not be
indexed, by their size, mtime and inode, so the same failing file is not read again until it changes.
Both indexes are contentless: taking a row out needs the values it was indexed with, which the ``sessions``
row (``*_lc``) and ``bodies.text_z`` keep.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

#: Bumped whenever a table changes; a catalog of another version is rebuilt from the logs.
SCHEMA_VERSION = 6  # 3: NUL indexed as U+0001 in meta_index; 4: capped body index, failed_logs; 5: body_messages;
# 6: spend_usd, priced_calls, unpriced_calls

#: File name of the catalog inside ``DSH_HOME``.
CATALOG_NAME = "catalog.sqlite"

#: Body rows of one session have ids ``session_row << BODY_SHIFT | n`` (so the session is ``id >> BODY_SHIFT``).
BODY_SHIFT = 20
MAX_BODY_CHUNKS = (1 << BODY_SHIFT) - 1

_TABLES = f"""
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS stores(
    id INTEGER PRIMARY KEY,
    root BLOB NOT NULL UNIQUE,            -- os.fsencode(realpath of the store root)
    dir_mtime_ns INTEGER NOT NULL DEFAULT -1,  -- root folder mtime when its listing was last reconciled
    ready INTEGER NOT NULL DEFAULT 0,     -- 1 once every log of the store was indexed
    missing INTEGER NOT NULL DEFAULT 0,   -- 1 while the root folder does not exist
    lease_until_ms INTEGER NOT NULL DEFAULT 0,  -- a process indexing the store in bulk holds it until then
    registered_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions(
    id INTEGER PRIMARY KEY,
    store_id INTEGER NOT NULL,
    folder BLOB NOT NULL,                 -- os.fsencode(session folder name)
    session_id BLOB NOT NULL,
    cwd BLOB,
    created_at INTEGER NOT NULL,
    title BLOB,
    id_lc BLOB NOT NULL,
    cwd_lc BLOB,
    title_lc BLOB,
    readable INTEGER NOT NULL,
    events INTEGER NOT NULL,
    surface INTEGER NOT NULL,
    user_messages INTEGER NOT NULL,
    assistant_messages INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    committed INTEGER,
    tail BLOB NOT NULL,
    next_seq INTEGER NOT NULL,
    body_bytes INTEGER NOT NULL DEFAULT 0,   -- bytes of message text in the body index
    body_truncated INTEGER NOT NULL DEFAULT 0,  -- 1 when text was left out of the body index (the cap)
    body_messages INTEGER NOT NULL DEFAULT 0,  -- messages whose text (or start of it) the body index holds
    chunks INTEGER NOT NULL DEFAULT 0,
    spend_usd REAL NOT NULL DEFAULT 0,      -- summed cost of the model calls that had one (conversation.spend)
    priced_calls INTEGER NOT NULL DEFAULT 0,    -- model calls with a cost
    unpriced_calls INTEGER NOT NULL DEFAULT 0,  -- model calls without one
    is_primary INTEGER NOT NULL DEFAULT 1,
    indexed_ms INTEGER NOT NULL,
    UNIQUE(store_id, folder)
);
CREATE INDEX IF NOT EXISTS sessions_by_time ON sessions(is_primary, created_at DESC, session_id);
CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions(is_primary, cwd, created_at DESC, session_id);
CREATE INDEX IF NOT EXISTS sessions_by_id ON sessions(session_id);
CREATE INDEX IF NOT EXISTS sessions_by_mtime ON sessions(mtime_ns);
CREATE TABLE IF NOT EXISTS notebooks(
    session_id BLOB PRIMARY KEY,
    notebook TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pending_folders(
    store_id INTEGER NOT NULL,
    folder BLOB NOT NULL,
    seen_ms INTEGER NOT NULL,
    PRIMARY KEY(store_id, folder)
);
CREATE TABLE IF NOT EXISTS failed_logs(
    store_id INTEGER NOT NULL,
    folder BLOB NOT NULL,
    size INTEGER NOT NULL,                -- the log as it was when it failed: it is read again once it changes
    mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    reason TEXT NOT NULL,
    failed_ms INTEGER NOT NULL,
    PRIMARY KEY(store_id, folder)
);
CREATE TABLE IF NOT EXISTS bodies(
    id INTEGER PRIMARY KEY,               -- session row << {BODY_SHIFT} | chunk number
    text_z BLOB NOT NULL                  -- zlib of the indexed text (needed to take it out of the index)
);
CREATE VIRTUAL TABLE IF NOT EXISTS body_index USING fts5(
    text, content='', tokenize='unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS meta_index USING fts5(
    sid, cwd, title, content='', tokenize='trigram case_sensitive 1'
);
"""

_DROP = """
DROP TABLE IF EXISTS meta_index;
DROP TABLE IF EXISTS body_index;
DROP TABLE IF EXISTS bodies;
DROP TABLE IF EXISTS failed_logs;
DROP TABLE IF EXISTS pending_folders;
DROP TABLE IF EXISTS notebooks;
DROP TABLE IF EXISTS sessions;
DROP TABLE IF EXISTS stores;
DROP TABLE IF EXISTS meta;
"""

# Primary result codes (``sqlite3.Error.sqlite_errorcode & 0xFF``).
_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_REFUSED = {18, 20, 25}  # SQLITE_TOOBIG, SQLITE_MISMATCH, SQLITE_RANGE: a value of one row, not the database


class CatalogUnavailable(RuntimeError):
    """The catalog cannot answer right now (locked, being rebuilt, or its folder is not writable)."""


class CatalogCorrupt(CatalogUnavailable):
    """The catalog file is damaged; it is set aside and rebuilt from the logs."""


def enc(text: str) -> bytes:
    """Text as stored in the catalog (UTF-8, lone surrogates passed through)."""
    return text.encode("utf-8", "surrogatepass")


def dec(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


def error_kind(exc: BaseException) -> str:
    """``"busy"``, ``"corrupt"``, ``"refused"`` (a value SQLite will not store, e.g. "string or blob too
    big": a problem of one row, never of the database) or ``"other"`` for an SQLite error."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        primary = code & 0xFF
        if primary in _BUSY:
            return "busy"
        if primary in _CORRUPT:
            return "corrupt"
        if primary in _REFUSED:
            return "refused"
        return "other"
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return "busy"
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return "corrupt"
    if "too big" in text or isinstance(exc, sqlite3.DataError):
        return "refused"
    return "other"


def connect(path: Path, *, busy_ms: int) -> sqlite3.Connection:
    """Open the catalog with the settings every connection uses (WAL, short busy timeout, autocommit)."""
    conn = sqlite3.connect(os.fspath(path), timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            # Another connection holds the file in a mode we cannot change now; reads still work.
            pass
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-16000")
    except BaseException:
        conn.close()
        raise
    return conn


def set_busy(conn: sqlite3.Connection, busy_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")


def ensure_schema(conn: sqlite3.Connection) -> bool:
    """Create the tables (or rebuild them when the version differs). ``True`` when they were (re)created."""
    version = _read_version(conn)
    if version == SCHEMA_VERSION:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _read_version(conn)  # another process may have created it meanwhile
        if version == SCHEMA_VERSION:
            conn.execute("COMMIT")
            return False
        for statement in (_DROP if version is not None else "").split(";") + _TABLES.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema', ?)", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return True


def _read_version(conn: sqlite3.Connection) -> int | None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    if row is None:
        return None
    try:
        return int(row[0])
    except ValueError:
        return -1
