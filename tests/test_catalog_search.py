"""The ranked SQL query against a plain Python statement of the reference's rules, for any text."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_jupyter.catalog import search
from dsh_jupyter.catalog.entries import workspace_rank
from dsh_jupyter.catalog.logs import LogRead, LogRecord, LogStat
from dsh_jupyter.catalog.rows import apply_read, transaction, upsert_store
from dsh_jupyter.catalog.schema import connect, ensure_schema
from dsh_jupyter.catalog.search import Filter, select, trigram_query

ALPHABET = [*"aAbB é\"'*-.:/\x00数İßςΣ\u0301", "\ud800", "\udfff", "😀"]
TEXT = st.lists(st.sampled_from(ALPHABET), max_size=7).map("".join)
SESSION = st.tuples(TEXT.filter(bool), st.none() | TEXT, st.integers(0, 3), st.none() | TEXT)


def facts(session_id: str, cwd: str | None, created: int, title: str | None) -> LogRead:
    return LogRead(LogRecord(session_id, cwd, created, title, True, 1, 1, 0, 0, LogStat(1, 1, 1), 10, b"x"), True)


def expected(sessions: dict[str, tuple], where: Filter, limit: int) -> list[str]:
    kept = []
    for sid, (cwd, created, title) in sessions.items():
        if sid in where.exclude:
            continue
        label = title if title is not None else sid
        needle = where.needle
        if needle and not (needle in sid.lower() or (cwd is not None and needle in cwd.lower())
                           or needle in label.lower()):
            continue
        kept.append((workspace_rank(cwd, where.target_cwd), -created, sid))
    return [sid for _, _, sid in sorted(kept)[:limit]]


def database(sessions: dict[str, tuple], folder: Path) -> sqlite3.Connection:
    conn = connect(folder / "c.sqlite", busy_ms=1000)
    ensure_schema(conn)

    def fill(c: sqlite3.Connection) -> None:
        store_id, _ = upsert_store(c, str(folder))
        for n, (sid, (cwd, created, title)) in enumerate(sessions.items()):
            apply_read(c, store_id, f"f{n}", facts(sid, cwd, created, title))

    transaction(conn, fill)
    return conn


def test_a_title_with_nul_is_found_by_text_after_the_nul(tmp_path: Path) -> None:
    sessions = {"aa": ("a", 0, "aa\x00aab"), "b": (None, 0, "x\x01aab")}
    conn = database(sessions, tmp_path)
    where = Filter(None, "aab", None, frozenset(), None)
    original = search.DENSE
    search.DENSE = 1000  # the indexed plan
    try:
        got = [row.session_id for row in select(conn, where, 5)]
    finally:
        search.DENSE = original
        conn.close()
    assert got == expected(sessions, where, 5) == ["b", "aa"]  # cwd-less first when the target has none


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(SESSION, min_size=0, max_size=12, unique_by=lambda s: s[0]), st.data(), st.none() | TEXT,
       st.integers(1, 6), st.sampled_from([0, 2, 1000]))
def test_the_query_follows_the_rules_for_any_text(rows: list[tuple], data: st.DataObject, target_cwd: str | None,
                                                  limit: int, dense: int) -> None:
    sessions = {sid: (cwd, created, title) for sid, cwd, created, title in rows}
    fields = [f for row in rows for f in (row[0], row[1], row[3]) if f]
    if fields and data.draw(st.booleans()):
        field = data.draw(st.sampled_from(fields))  # a needle cut from a real field: it matches something
        start = data.draw(st.integers(0, len(field) - 1))
        needle = field[start : data.draw(st.integers(start + 1, len(field)))]
    else:
        needle = data.draw(TEXT)
    exclude = frozenset([rows[0][0]]) if rows else frozenset()
    where = Filter(target_cwd, needle.lower(), None, exclude, None)
    with tempfile.TemporaryDirectory() as folder:  # one database per example (hypothesis: no tmp_path)
        conn = database(sessions, Path(folder))
        original = search.DENSE
        search.DENSE = dense  # 0 and 2 force the walk, 1000 the indexed plan
        try:
            got = [row.session_id for row in select(conn, where, limit)]
        finally:
            search.DENSE = original
            conn.close()
    assert got == expected(sessions, where, limit)


def test_trigram_queries_are_used_only_when_exact() -> None:
    assert trigram_query("ab") is None and trigram_query("a\x00bc") is None and trigram_query("a\x01bc") is None
    assert trigram_query('ab"c') == '"ab""c"'


def test_store_filter_and_updates_keep_the_indexes_in_step(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.sqlite", busy_ms=1000)
    ensure_schema(conn)

    def fill(c: sqlite3.Connection) -> tuple[int, int]:
        a, _ = upsert_store(c, "/a")
        b, _ = upsert_store(c, "/b")
        apply_read(c, a, "x", facts("one", "/w", 1, "first title"))
        apply_read(c, b, "y", facts("two", "/w", 2, "second title"))
        return a, b

    a, _b = transaction(conn, fill)
    titles = Filter("/w", "title", None, frozenset(), None)
    assert [r.session_id for r in select(conn, titles, 10)] == ["two", "one"]
    assert [r.session_id for r in select(conn, Filter("/w", "title", None, frozenset(), {a}), 10)] == ["one"]
    transaction(conn, lambda c: apply_read(c, a, "x", facts("one", "/w", 1, "renamed")))
    assert [r.session_id for r in select(conn, titles, 10)] == ["two"]
    assert [r.session_id for r in select(conn, Filter("/w", "renamed", None, frozenset(), None), 10)] == ["one"]
    assert select(conn, Filter("/w", "first", None, frozenset(), None), 10) == []


def test_a_body_query_the_index_refuses_is_a_clear_error(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.sqlite", busy_ms=1000)
    ensure_schema(conn)
    with pytest.raises(ValueError, match="cannot search message bodies"):
        select(conn, Filter(None, "x", "AND AND (", frozenset(), None), 5)
