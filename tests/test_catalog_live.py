"""Live sessions: read from the query's registry, titled and projected from memory."""

from __future__ import annotations

from catalog_helpers import add_turn, title_event

from dsh_jupyter.catalog.live import live_entry, live_logs, live_texts
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.store import JsonlStore


def test_live_logs_come_from_the_query(tmp_path) -> None:
    query = SessionQuery(JsonlStore(tmp_path))
    busy = SessionLog(SessionHeader("busy", 5, "/w"))
    add_turn(busy, 1, prompt="hello live")
    title_event(busy, "Live title")
    query.register_live(busy)
    query.register_live(SessionLog(SessionHeader("empty", 6, "/w")))
    logs = live_logs(query)
    assert list(logs) == ["busy"]
    entry = live_entry(logs["busy"])
    assert entry.live and entry.title == "Live title" and entry.cwd == "/w" and entry.created_at == 5
    assert live_texts(logs["busy"]) == ["hello live", "Let me look.", "answer 1"]


def test_a_query_may_offer_its_own_accessor() -> None:
    log = SessionLog(SessionHeader("x", 1))
    add_turn(log, 1)

    class Offering:
        def live_logs(self) -> dict:
            return {"x": log}

    assert live_logs(Offering()) == {"x": log}
    assert live_logs(object()) == {}
    title_event(log, 7)
    assert live_entry(log).title is None
