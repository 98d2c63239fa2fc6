"""What sessions cost, from a shell and over REST: ``sessions list/search`` have a cost column, ``sessions
show`` the total and each turn's cost, ``GET dsh/api/sessions`` a ``cost`` per session."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from catalog_helpers import make_session
from spend_helpers import priced_session

from dsh_jupyter.catalog import Catalog
from dsh_jupyter.cli import EXIT_OK, main
from dsh_jupyter.server import sessions
from dsh_jupyter.server.boundary import Boundary
from dsh_jupyter.store import JsonlStore


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JsonlStore:
    folder = tmp_path / "project"
    store = JsonlStore(folder / ".dsh" / "sessions")
    turns: list[list[float | None]] = [[0.001, 0.0005], [None], *[[0.0001]] * 11]
    priced_session(store, "paid-1", turns, cwd=str(folder), title="Long analysis", created_at=30)
    priced_session(store, "free-1", [[0.0]], cwd=str(folder), title="Local model", created_at=20)
    make_session(store, "none-1", cwd=str(folder), created_at=10, title="No usage")
    monkeypatch.chdir(folder)
    return store


def test_list_and_search_show_a_cost_column_blank_when_unknown(project: JsonlStore) -> None:
    code, out = run("sessions", "list")
    assert code == EXIT_OK
    header, *lines = out.splitlines()
    assert "user/assistant messages  cost  title" in header
    rows = {line.split()[2]: line for line in lines}
    assert "≥ $0.0026  Long analysis" in rows["paid-1"] and "     free  Local model" in rows["free-1"]
    assert "$" not in rows["none-1"] and "free" not in rows["none-1"]
    at = rows["paid-1"].index("Long analysis")
    assert rows["none-1"].index("No usage") == at == rows["free-1"].index("Local model")  # one column wide
    records = {r["sessionId"]: r for r in json.loads(run("sessions", "list", "--json")[1])}
    assert records["paid-1"]["cost"] == {"usd": 0.0026, "pricedCalls": 13, "unpricedCalls": 1,
                                         "text": "≥ $0.0026"}
    assert "cost" not in records["none-1"]
    searched = run("sessions", "search", "analysis")[1]
    assert "≥ $0.0026" in searched


def test_show_prints_the_total_and_the_latest_turns_costs(project: JsonlStore,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run("sessions", "show", "paid-1", "--messages", "1")
    assert code == EXIT_OK
    cost = next(line for line in out.splitlines() if line.startswith("cost "))
    turns = ", ".join(f"{n} $0.0001" for n in range(4, 14))
    assert cost == f"cost      ≥ $0.0026 (13 of 14 model calls priced); by turn (the latest 10 of 12): {turns}"
    record = json.loads(run("sessions", "show", "paid-1", "--json")[1])
    assert record["cost"]["text"] == "≥ $0.0026"
    assert [(t["turn"], t["text"]) for t in record["turnCosts"]][:2] == [(1, "$0.0015"), (3, "$0.0001")]
    assert len(record["turnCosts"]) == 12  # turn 2 had no known cost: not listed
    assert "cost      free\n" in run("sessions", "show", "free-1")[1]
    shown = run("sessions", "show", "none-1")[1]
    assert "\ncost " not in shown and "turnCosts" not in run("sessions", "show", "none-1", "--json")[1]
    # A log too big to read whole for a breakdown: the catalog's total, and why there is no per-turn list.
    monkeypatch.setattr("dsh_jupyter.store.window.FULL_READ_BYTES", 100)
    cost = next(line for line in run("sessions", "show", "paid-1")[1].splitlines() if line.startswith("cost "))
    assert cost.startswith("cost      ≥ $0.0026 (13 of 14 model calls priced); by turn: not read (the log is ")


def test_the_rest_listing_carries_each_sessions_cost(project: JsonlStore, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(project.root, budget=None)  # as the server's catalog does when it opens
    listing = sessions.list_sessions(folder, "", 10, boundary=Boundary.of(tmp_path),
                                     catalog_for=lambda store: catalog)
    rows = {row["sessionId"]: row for row in listing["sessions"]}
    assert rows["paid-1"].get("cost", {}).get("text") == "≥ $0.0026"
    assert rows["free-1"].get("cost", {}).get("usd") == 0.0 and "cost" not in rows["none-1"]
    assert rows["paid-1"]["messageCounts"] == {"user": 13, "assistant": 14}
    # Without the catalog the folder's own JSONL store is scanned: no cost is known then, and none is made up.
    bare = sessions.list_sessions(folder, "", 10, boundary=Boundary.of(tmp_path), catalog_for=lambda store: None)
    assert all("cost" not in row for row in bare["sessions"])
