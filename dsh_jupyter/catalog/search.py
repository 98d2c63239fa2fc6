"""The ranked candidate query: the reference's filter and ranking as SQL over the ``sessions`` table.

Order: workspace rank (same cwd as the target, then no cwd, then the rest), then ``created_at`` descending,
then ``session_id`` (byte order of the stored UTF-8, which is Python's ``str`` order). Only primary rows
count (one per session id), minus the excluded ids (the target and the live sessions).

Two plans, chosen per query:

- *walk*: each rank in turn, in index order, filtering each row until ``limit`` rows are found. Cheap when
  many rows match (the walk stops early); used for an empty needle, a needle of one or two characters,
  and any needle that matches many rows;
- *hits*: when the trigram index (needles of three or more characters) and, with ``body``, the body index
  yield at most :data:`DENSE` rows, only those rows are read and sorted. A needle that matches few or no
  rows thus never reads the whole table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from dataclasses import dataclass

from .rows import ROW_COLUMNS, Row
from .schema import BODY_SHIFT, enc, error_kind

#: Above this many matching rows the walk is cheaper than reading and sorting every match.
DENSE = 1000


@dataclass(frozen=True)
class Filter:
    """What one candidate query asks for. ``needle`` is lowercased; ``body_query`` is an FTS5 query or ``None``."""

    target_cwd: str | None
    needle: str
    body_query: str | None
    exclude: Collection[str]
    store_ids: Collection[int] | None  # None: every store


def trigram_query(needle: str) -> str | None:
    """The trigram-index phrase for ``needle`` (``None`` when the index cannot answer it exactly)."""
    if len(needle) < 3 or "\x00" in needle or "\x01" in needle:  # see rows.meta_text
        return None
    return '"' + needle.replace('"', '""') + '"'


def _meta_ids(conn: sqlite3.Connection, phrase: str) -> list[int] | None:
    """Row ids whose id, cwd or title contain the phrase; ``None`` when there are more than :data:`DENSE`."""
    ids = [r[0] for r in conn.execute(
        f"SELECT rowid FROM meta_index WHERE meta_index MATCH CAST(? AS TEXT) LIMIT {DENSE + 1}", (enc(phrase),))]
    return None if len(ids) > DENSE else ids


def _body_hits(conn: sqlite3.Connection, body_query: str) -> int:
    """Put the sessions whose body matches into ``temp.hits``; returns how many."""
    try:
        cursor = conn.execute(f"INSERT OR IGNORE INTO temp.hits(id) SELECT rowid >> {BODY_SHIFT} FROM body_index "
                              "WHERE body_index MATCH ?", (body_query,))
    except sqlite3.OperationalError as exc:
        if error_kind(exc) != "other":
            raise
        raise ValueError(f"cannot search message bodies for {body_query!r}: {exc}") from exc
    return max(0, cursor.rowcount)


def select(conn: sqlite3.Connection, where: Filter, limit: int) -> list[Row]:
    """The first ``limit`` rows by the reference's rules (see the module docstring)."""
    phrase = trigram_query(where.needle) if where.needle else None
    meta_ids = _meta_ids(conn, phrase) if phrase is not None else None
    if where.body_query is None and meta_ids is None:
        return _walk(conn, where, limit, body=False)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS hits(id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.hits")
    body_count = _body_hits(conn, where.body_query) if where.body_query is not None else 0
    if meta_ids is not None and body_count <= DENSE:
        conn.executemany("INSERT OR IGNORE INTO temp.hits(id) VALUES(?)", [(i,) for i in meta_ids])
        return _sorted_hits(conn, where, limit)
    return _walk(conn, where, limit, body=where.body_query is not None)


def _common(where: Filter) -> tuple[list[str], list[object]]:
    clauses = ["is_primary = 1"]
    params: list[object] = []
    if where.exclude:
        clauses.append(f"session_id NOT IN ({','.join('?' * len(where.exclude))})")
        params.extend(enc(s) for s in where.exclude)
    if where.store_ids is not None:
        ids = sorted(where.store_ids)
        clauses.append(f"store_id IN ({','.join('?' * len(ids))})" if ids else "0")
        params.extend(ids)
    return clauses, params


def _sorted_hits(conn: sqlite3.Connection, where: Filter, limit: int) -> list[Row]:
    clauses, params = _common(where)
    if where.target_cwd is not None:
        rank = "CASE WHEN cwd = ? THEN 0 WHEN cwd IS NULL THEN 1 ELSE 2 END"
        rank_params: list[object] = [enc(where.target_cwd)]
    else:
        rank = "CASE WHEN cwd IS NULL THEN 1 ELSE 2 END"
        rank_params = []
    # CROSS JOIN keeps SQLite from walking the whole table: it reads just the hit rows by id.
    columns = ", ".join(f"sessions.{c.strip()}" for c in ROW_COLUMNS.split(","))
    sql = (f"SELECT {columns} FROM temp.hits CROSS JOIN sessions ON sessions.id = hits.id "
           f"WHERE {' AND '.join(clauses)} ORDER BY {rank}, created_at DESC, session_id LIMIT ?")
    return [Row.from_sql(r) for r in conn.execute(sql, params + rank_params + [limit])]


def _walk(conn: sqlite3.Connection, where: Filter, limit: int, *, body: bool) -> list[Row]:
    clauses, params = _common(where)
    if where.needle:
        key = enc(where.needle)
        match = "instr(id_lc, ?) > 0 OR instr(cwd_lc, ?) > 0 OR instr(title_lc, ?) > 0"
        params.extend((key, key, key))
        clauses.append(f"({match} OR id IN temp.hits)" if body else f"({match})")
    elif body:
        clauses.append("id IN temp.hits")
    tail = " AND ".join(clauses) + " ORDER BY created_at DESC, session_id LIMIT ?"
    arms: list[tuple[str, list[object]]] = []
    if where.target_cwd is not None:
        cwd_key = enc(where.target_cwd)
        arms.append(("INDEXED BY sessions_by_cwd WHERE cwd = ? AND ", [cwd_key]))
        arms.append(("INDEXED BY sessions_by_cwd WHERE cwd IS NULL AND ", []))
        arms.append(("INDEXED BY sessions_by_time WHERE cwd IS NOT NULL AND cwd != ? AND ", [cwd_key]))
    else:
        arms.append(("INDEXED BY sessions_by_cwd WHERE cwd IS NULL AND ", []))
        arms.append(("INDEXED BY sessions_by_time WHERE cwd IS NOT NULL AND ", []))
    rows: list[Row] = []
    for head, head_params in arms:
        want = limit - len(rows)
        if want <= 0:
            break
        cursor = conn.execute(f"SELECT {ROW_COLUMNS} FROM sessions {head}{tail}", head_params + params + [want])
        rows.extend(Row.from_sql(r) for r in cursor)
    return rows
