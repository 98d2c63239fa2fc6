"""The SQLite store keeps each session's cost in its row: every flush adds its model calls, a database of
the previous generation still reads (showing no cost) and its first writer upgrades it, filling the cost of
every session already stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spend_helpers import more_turns, priced_session

from dsh_jupyter.catalog import Catalog
from dsh_jupyter.conversation.spend import Spend
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.references.candidates import list_candidates
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.sqlite import SCHEMA_VERSION, SqliteStore


def _approx(spends: dict[str, Spend]) -> dict[str, tuple[float, int, int]]:
    return {sid: (round(s.usd, 9), s.priced, s.unpriced) for sid, s in spends.items()}


def test_each_flush_adds_its_model_calls_to_the_session_row(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "sessions.db")
    priced_session(store, "paid", [[0.001], [0.002, None]], title="Sales")
    priced_session(store, "unpriced", [[None]])
    more_turns(store, "paid", [[0.0005]])
    assert _approx(store.spends(["paid", "unpriced", "missing"])) == {"paid": (0.0035, 3, 1)}
    found = list_candidates(SessionQuery(store), ReferenceTarget(None, "/work/a"), "", 10)
    costs = {c.session_id: c.to_remote_json().get("cost") for c in found}
    assert costs["unpriced"] is None and costs["paid"] is not None and costs["paid"]["text"] == "≥ $0.0035"
    assert [c.label for c in found if c.session_id == "paid"] == ["Sales"]
    assert JsonlStore(tmp_path / "j").spends(["paid"]) == {}  # the JSONL store's costs are the catalog's
    # With the catalog on (the default), a SQLite store's sessions are merged into its answer: costs kept.
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    merged = catalog.select_candidates(SessionQuery(store), ReferenceTarget(None, "/work/a"), "", 10)
    assert {c.session_id: (c.cost or {}).get("text") for c in merged} == {"paid": "≥ $0.0035", "unpriced": None}


def _as_generation_one(path: Path) -> None:
    conn = sqlite3.connect(path)
    for column in ("spend_usd", "priced_calls", "unpriced_calls"):
        conn.execute(f"ALTER TABLE dsh_sessions DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_a_database_of_the_previous_generation_reads_then_upgrades_with_its_costs(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    writer_store = SqliteStore(path)
    priced_session(writer_store, "old", [[0.001], [0.002]], title="Old one")
    priced_session(writer_store, "other", [[None], [0.0]])
    writer_store.close()
    _as_generation_one(path)

    reader = SqliteStore(path)
    assert sorted(h.id for h in reader.list_headers()) == ["old", "other"]  # still read as it is
    assert reader.read_title("old") == {"title": "Old one", "messageSeqs": [], "source": {"kind": "user"}}
    assert reader.spends(["old", "other"]) == {}  # no cost columns yet: no cost shown, no error
    reader.close()

    more_turns(SqliteStore(path), "old", [[0.004]])  # the first writer upgrades the file
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    upgraded = SqliteStore(path)
    assert _approx(upgraded.spends(["old", "other"])) == {"old": (0.007, 3, 0), "other": (0.0, 1, 1)}
    assert len(upgraded.load("old").events) > 0 and upgraded.spends(["other"])["other"].text() == "≥ $0"
