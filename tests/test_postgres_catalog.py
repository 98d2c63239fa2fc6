"""Candidates and body search of a PostgreSQL store, answered in SQL, against the rules' own Python path.

The scanning path (:func:`dsh_jupyter.references.candidates.select_by_scanning`) and the body rule
(:func:`dsh_jupyter.catalog.bodies.texts_match` over projected messages) are the reference: the database's
answers must be the same lists, in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store_helpers import append_turn, compact, write_session

from dsh_jupyter.catalog.bodies import texts_match
from dsh_jupyter.catalog.postgres import PostgresCatalog, body_tsquery, body_words
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references.candidates import select_by_scanning
from dsh_jupyter.references.projection import project_surface
from dsh_jupyter.references.target import ReferenceTarget
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store.postgres import PostgresStore

HERE = "/home/dev/project"


@pytest.fixture
def store(pg_database: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_database)
    yield store
    store.close()


def _chat(store: PostgresStore, session_id: str, cwd: str | None, created_at: int, prompt: str, answer: str,
          title: str | None = None) -> None:
    header = SessionHeader(id=session_id, created_at=created_at, cwd=cwd)
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        log.append("turn/start", {"turn": 1}, time=created_at)
        seq = log.append("user/message", user_message(prompt), time=created_at).seq
        if title is not None:
            log.append("session/title", {"title": title, "messageSeqs": [seq], "source": {"kind": "user"}},
                       time=created_at)
        log.append("assistant/message", {"turn": 1, "step": 1, "message": assistant_message(
            [text_block(answer)], {"kind": "model", "provider": "p", "model": "m"})}, source_event_seqs=[],
            time=created_at)
        log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, time=created_at)


def _populate(store: PostgresStore) -> None:
    rows = [
        ("here-old", HERE, 1000, "load the sales data", "Loaded 12 rows", "Sales data"),
        ("here-new", HERE, 3000, "plot the café prices", "Plotted prices", None),
        ("none-a", None, 2000, "what is a tsvector", "A sorted list of lexemes", "Postgres notes"),
        ("none-b", None, 2000, "same time as none-a", "tie broken by id", None),
        ("other-1", "/srv/other", 5000, "deploy the project", "Deployed", "Deploy PROJECT"),
        ("other-2", "/home/dev/project-two", 4000, "clean the data", "Cleaned", None),
        ("Mixed-Case", "/tmp/X", 4500, "Ünïcödé prompt", "naïve answer", "Émoji 😀 title"),
        ("odd_%id\\x", "/tmp/a_b", 4600, "wildcards", "literal", "100% sure"),
    ]
    for session_id, cwd, created, prompt, answer, title in rows:
        _chat(store, session_id, cwd, created, prompt, answer, title)


NEEDLES = ["", "here", "project", "sales", "data", "none", "-", "x", "émoji", "😀", "nothing-at-all", "/home",
           "%", "_", "a_b", "\\", "d_%", "0% s"]


@pytest.mark.parametrize("target", [ReferenceTarget(None, HERE), ReferenceTarget("here-old", HERE),
                                    ReferenceTarget(None, None), ReferenceTarget("none-a", "/srv/other")],
                         ids=["no-session", "self-excluded", "no-cwd", "other-cwd"])
def test_candidates_are_the_scanning_paths_answer(store: PostgresStore, target: ReferenceTarget) -> None:
    _populate(store)
    query = SessionQuery(store)
    catalog = PostgresCatalog(store)
    for needle in NEEDLES:
        for limit in (1, 3, 50):
            expected = select_by_scanning(query, target, needle.lower(), limit, None)
            got = catalog.select_candidates(query, target, needle.lower(), limit)
            assert got == expected, (needle, limit)


def test_live_sessions_are_merged_over_the_database(store: PostgresStore) -> None:
    _populate(store)
    query = SessionQuery(store)
    live = SessionLog(SessionHeader(id="live-1", created_at=9000, cwd=HERE))
    live.append("user/message", user_message("unsaved thoughts about sales"))
    query.register_live(live)
    got = PostgresCatalog(store).select_candidates(query, ReferenceTarget(None, HERE), "sales", 10, body=True)
    assert [c.session_id for c in got] == ["live-1", "here-old"]


BODY_QUERIES = ["sales", "SALES", "sal", "sal ", "sales data", "cafe", "café", "lexemes sorted", "naive",
                "unicode", "rows 12", "12", "alpha", "deployed", "deploy", "plotted prices", "no-such-word", "tie id"]


def test_body_search_follows_the_body_rule(store: PostgresStore) -> None:
    _populate(store)
    write_session(store, "with-tools", turns=2, created_at=500)  # tool output holds words like "alpha"
    query = SessionQuery(store)
    target = ReferenceTarget(None, HERE)
    texts = {h.id: [m.text for m in project_surface(store.read_surface(h.id)).messages] for h in store.list_headers()}
    catalog = PostgresCatalog(store)
    scanned = select_by_scanning(query, target, "", 100, None)
    for text in BODY_QUERIES:
        needle = text.lower()
        expected = [c.session_id for c in scanned
                    if texts_match(texts[c.session_id], needle) or c in select_by_scanning(query, target, needle,
                                                                                          100, None)]
        got = [c.session_id for c in catalog.select_candidates(query, target, needle, 100, body=True)]
        assert got == expected, text
    assert "with-tools" not in [c.session_id for c in catalog.select_candidates(query, target, "alpha", 10,
                                                                                 body=True)]


def test_compaction_recomputes_the_words_from_the_surface(store: PostgresStore) -> None:
    header = SessionHeader(id="compacted", created_at=1, cwd=HERE)
    log = SessionLog(header)
    catalog = PostgresCatalog(store)
    with store.create(header) as writer:
        writer.attach(log)
        log.append("user/message", user_message("zebra facts"))
        writer.flush()
        assert [f.header.id for f in catalog.search(None, HERE, "zebra", 5, body=True)] == ["compacted"]
        compact(log, None, "a summary about giraffes")
        writer.flush()
    assert catalog.search(None, HERE, "zebra", 5, body=True) == []
    assert [f.header.id for f in catalog.search(None, HERE, "giraffes", 5, body=True)] == ["compacted"]


def test_a_copied_session_is_indexed_without_a_log_attached(store: PostgresStore) -> None:
    header = SessionHeader(id="copied", created_at=1, cwd=HERE)
    log = SessionLog(header)
    append_turn(log, 1)
    compact(log, None, "a summary about otters")
    with store.create(header) as writer:
        writer.append(log.events)
    assert [f.header.id for f in PostgresCatalog(store).search(None, HERE, "otters", 5, body=True)] == ["copied"]


def test_words_and_queries_are_exact_lexemes() -> None:
    assert body_words(["Café, crème!", "it's o'clock"]) == ["cafe", "clock", "creme", "it", "o", "s"]
    assert body_tsquery("it's cafe") == "'it' & 's' & 'cafe':*"
    assert body_tsquery("done ") == "'done'"
    assert body_tsquery("  ,, ") is None
