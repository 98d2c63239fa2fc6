"""The catalog's per-session cost: every read path (full, streamed, appended) sums the same model calls, a
compaction never lowers it, live sessions carry theirs, and a catalog of the previous schema upgrades without
losing a row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from catalog_helpers import make_session
from spend_helpers import add_priced_turn, more_turns, priced_session
from store_helpers import compact

from dsh_jupyter.catalog import Catalog, CatalogEntry
from dsh_jupyter.catalog.core import store_root
from dsh_jupyter.catalog.live import live_entry
from dsh_jupyter.catalog.logs import read_full, stat_log
from dsh_jupyter.catalog.schema import SCHEMA_VERSION
from dsh_jupyter.conversation.spend import Spend
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.references.candidates import list_candidates
from dsh_jupyter.session import SessionLog
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.paths import session_folder_name


def _catalog(tmp_path: Path, **kw: int) -> Catalog:
    return Catalog(tmp_path / "home" / "catalog.sqlite", background=False, **kw)


def _spends(catalog: Catalog, store: JsonlStore) -> dict[str, Spend]:
    report = catalog.ensure_store(store.root, budget=None)
    assert not report.pending and not report.errors
    return {e.session_id: e.spend for e in catalog.sessions([store.root])}


def _entries(catalog: Catalog, stores: list[JsonlStore]) -> dict[str, CatalogEntry]:
    for store in stores:
        assert not catalog.ensure_store(store.root, budget=None).errors
    return {e.session_id: e for e in catalog.sessions()}


def _approx(spend: Spend) -> tuple[float, int, int]:
    return round(spend.usd, 9), spend.priced, spend.unpriced


def test_each_session_gets_the_sum_of_its_model_calls_costs(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    priced_session(store, "paid", [[0.001, 0.002], [0.0005]])
    priced_session(store, "mixed", [[0.001, None], [None]])
    priced_session(store, "free", [[0.0], [0, 0.0]])
    priced_session(store, "unpriced", [[None], [None, None]])
    make_session(store, "no-usage", turns=2)  # assistant messages without any usage object
    catalog = _catalog(tmp_path)
    spends = _spends(catalog, store)
    assert {sid: _approx(s) for sid, s in spends.items()} == {
        "paid": (0.0035, 3, 0), "mixed": (0.001, 1, 2), "free": (0.0, 3, 0), "unpriced": (0.0, 0, 3),
        "no-usage": (0.0, 0, 4)}
    assert {sid: s.text() for sid, s in spends.items()} == {
        "paid": "$0.0035", "mixed": "≥ $0.0010", "free": "free", "unpriced": "", "no-usage": ""}
    records = {e.session_id: e.to_json() for e in catalog.sessions([store.root])}
    assert records["paid"]["cost"] == {"usd": 0.0035, "pricedCalls": 3, "unpricedCalls": 0, "text": "$0.0035"}
    assert "cost" not in records["unpriced"] and "cost" not in records["no-usage"]  # unknown: no field, no $0
    candidates = {c.session_id: c.to_remote_json() for c in catalog.select_candidates(
        SessionQuery(store), ReferenceTarget(None, "/work/a"), "", 10)}
    assert candidates["mixed"]["cost"]["text"] == "≥ $0.0010" and "cost" not in candidates["unpriced"]


def test_appended_streamed_and_compacted_logs_keep_the_whole_total(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    priced_session(store, "grows", [[0.001]])
    catalog = _catalog(tmp_path)
    assert _approx(_spends(catalog, store)["grows"]) == (0.001, 1, 0)
    more_turns(store, "grows", [[0.002, None]])  # read incrementally: only the appended lines
    assert _approx(_spends(catalog, store)["grows"]) == (0.003, 2, 1)
    log, writer = store.open("grows")
    with writer:
        compact(log, None)  # the summary replaces every message on the surface: the calls were still paid for
        add_priced_turn(log, 3, [0.004])
    assert _approx(_spends(catalog, store)["grows"]) == (0.007, 3, 1)
    # A log over the body cap is folded one line at a time: the same total.
    small_cap = _catalog(tmp_path / "capped", body_cap=64)
    assert _approx(_spends(small_cap, store)["grows"]) == (0.007, 3, 1)
    path = store.log_path("grows")
    stat = stat_log(path)
    assert stat is not None
    full = read_full(str(path), session_folder_name("grows"), stat)
    assert full is not None and _approx(full.record.spend) == (0.007, 3, 1)


def test_a_live_session_shows_the_cost_of_what_is_not_flushed_yet(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    stored = priced_session(store, "live", [[0.001]])
    log = SessionLog(stored.header, stored.events)  # the agent's copy, not attached to a writer
    add_priced_turn(log, 2, [0.002])  # in memory only
    assert _approx(live_entry(log).spend) == (0.003, 2, 0)
    query = SessionQuery(store)
    query.register_live(log)
    assert _approx(query.spends(["live"])["live"]) == (0.003, 2, 0)
    found = list_candidates(query, ReferenceTarget(None, "/work/a"), "", 5, source=_catalog(tmp_path))
    assert [c.to_json().get("cost", {}).get("text") for c in found] == ["$0.0030"]


def test_a_catalog_of_the_previous_schema_is_rebuilt_with_every_row_and_store(tmp_path: Path) -> None:
    stores = [JsonlStore(tmp_path / name / "sessions") for name in ("one", "two")]
    priced_session(stores[0], "a", [[0.001], [0.002]], title="Sales")
    make_session(stores[1], "b", turns=2, title="Plots")
    catalog = _catalog(tmp_path)
    before = _entries(catalog, stores)
    catalog.close()
    # What schema 5 wrote: the same tables without the cost columns.
    conn = sqlite3.connect(catalog.path)
    for column in ("spend_usd", "priced_calls", "unpriced_calls"):
        conn.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema'")
    conn.commit()
    conn.close()

    upgraded = _catalog(tmp_path)
    assert {s.root for s in upgraded.stores()} == {store_root(s.root) for s in stores}  # no store forgotten
    after = _entries(upgraded, stores)  # every row back, read from the logs again as a kernel starting does
    assert set(after) == set(before) == {"a", "b"}
    for sid, entry in after.items():
        was = before[sid]
        assert (entry.title, entry.cwd, entry.user_messages, entry.assistant_messages, entry.events) == (
            was.title, was.cwd, was.user_messages, was.assistant_messages, was.events)
    assert after["a"].spend.text() == "$0.0030" and after["b"].spend.text() == ""
    conn = sqlite3.connect(upgraded.path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == str(SCHEMA_VERSION)
    conn.close()
