"""The PostgreSQL store keeps each session's cost in its row (schema 3): candidates, ``postgres list`` and
``postgres show`` carry it, and ``postgres init`` over a schema-2 database fills it for every stored session."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from spend_helpers import more_turns, priced_session
from store_helpers import pg_exec

from dsh_jupyter.catalog.postgres import PostgresCatalog
from dsh_jupyter.cli import EXIT_OK, main
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.store.postgres import PostgresStore
from dsh_jupyter.store.postgres_schema import SCHEMA_VERSION, installed_version


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


@pytest.fixture
def store(pg_database: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_database)
    yield store
    store.close()


def test_costs_reach_the_candidates_and_the_postgres_commands(store: PostgresStore, pg_database: str) -> None:
    priced_session(store, "paid", [[0.001, 0.002], [None]], title="Sales", created_at=2000)
    priced_session(store, "free", [[0.0]], created_at=1000)
    priced_session(store, "unpriced", [[None]], created_at=500)
    more_turns(store, "paid", [[0.0005]])
    found = {f.header.id: f.spend.text() for f in PostgresCatalog(store).search(None, None, "", 10)}
    assert found == {"paid": "≥ $0.0035", "free": "free", "unpriced": ""}
    candidates = PostgresCatalog(store).select_candidates(SessionQuery(store), ReferenceTarget(None, "/work/a"), "",
                                                          10)
    assert {c.session_id: (c.cost or {}).get("text") for c in candidates} == {
        "paid": "≥ $0.0035", "free": "free", "unpriced": None}

    code, out = cli("postgres", "list", "--dsn", pg_database)
    assert code == EXIT_OK
    lines = {line.split()[2]: line for line in out.splitlines()}
    assert "≥ $0.0035  Sales" in lines["paid"] and "free  (untitled)" in lines["free"]
    assert "$" not in lines["unpriced"] and "free" not in lines["unpriced"]
    records = {r["sessionId"]: r for r in json.loads(cli("postgres", "list", "--dsn", pg_database, "--json")[1])}
    assert records["paid"]["cost"]["pricedCalls"] == 3 and "cost" not in records["unpriced"]

    code, out = cli("postgres", "show", "paid", "--dsn", pg_database)
    assert code == EXIT_OK
    assert ("cost        ≥ $0.0035 (3 of 4 model calls priced); by turn: 1 $0.0030, 3 $0.0005\n") in out
    shown = json.loads(cli("postgres", "show", "paid", "--dsn", pg_database, "--json")[1])
    assert [(t["turn"], t["text"]) for t in shown["turnCosts"]] == [(1, "$0.0030"), (3, "$0.0005")]
    assert "cost" not in cli("postgres", "show", "unpriced", "--dsn", pg_database, "--json")[1]


def test_init_over_a_schema_2_database_fills_the_cost_of_every_stored_session(store: PostgresStore,
                                                                              pg_database: str) -> None:
    priced_session(store, "old", [[0.001], [0.002, None]], title="Before the upgrade")
    priced_session(store, "none", [[None]])
    store.close()
    for column in ("spend_usd", "priced_calls", "unpriced_calls"):  # what schema 2 had
        pg_exec(store, f"ALTER TABLE dsh.sessions DROP COLUMN {column}")
    pg_exec(store, "UPDATE dsh.meta SET value = '2' WHERE name = 'schema_version'")

    reader = PostgresStore(pg_database, create_schema=False)  # an older schema reads as it is
    try:
        assert sorted(f.header.id for f in PostgresCatalog(reader).search(None, None, "", 10)) == ["none", "old"]
        assert reader.spends(["old"]) == {}
    finally:
        reader.close()

    code, out = cli("postgres", "init", "--dsn", pg_database)
    assert code == EXIT_OK and out.startswith("created")
    upgraded = PostgresStore(pg_database)
    try:
        with upgraded.connection() as conn:
            assert installed_version(conn) == SCHEMA_VERSION
        assert {sid: s.text() for sid, s in upgraded.spends(["old", "none"]).items()} == {"old": "≥ $0.0030"}
        assert upgraded.read_title("old") == {"title": "Before the upgrade", "messageSeqs": [],
                                              "source": {"kind": "user"}}
        more_turns(upgraded, "old", [[0.001]])  # and the writer adds to the filled total
        assert upgraded.spends(["old"])["old"].text() == "≥ $0.0040"
    finally:
        upgraded.close()
