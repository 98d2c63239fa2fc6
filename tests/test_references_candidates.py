"""Candidate discovery: filter, workspace ranking, labels from titles, limits and cancellation."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from references_helpers import MemoryStore, StallingQuery, make_resolver, target_for

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.ranking import workspace_rank
from dsh_jupyter.references import (
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_REFERENCE,
    ReferenceTarget,
    SessionReferenceError,
    SessionReferenceResolver,
    decode_session_reference_uri,
    parse_session_reference_text,
)
from dsh_jupyter.session import SessionHeader, SessionLog


def title(log: SessionLog, text: str) -> None:
    log.append("session/title", {"title": text, "messageSeqs": [], "source": {"kind": "fallback"}})


@pytest.fixture
def ranked_store() -> MemoryStore:
    store = MemoryStore()
    store.new_log("target", cwd="/same", created_at=10)
    store.new_log("other", cwd="/else", created_at=40)
    store.new_log("none", created_at=30)
    store.new_log("same", cwd="/same", created_at=20)
    title(store.new_log("same-later", cwd="/same", created_at=25), "Latest title")
    return store


def as_json(candidates: list[Any]) -> list[dict[str, Any]]:
    return [c.to_json() for c in candidates]


def test_ranking_same_workspace_then_cwd_less_then_others(ranked_store: MemoryStore) -> None:
    resolver, _ = make_resolver(ranked_store)
    target = target_for(ranked_store)
    assert as_json(resolver.list_candidates(target)) == [
        {"sessionId": "same-later", "label": "Latest title", "cwd": "/same", "sameWorkspace": True, "createdAt": 25},
        {"sessionId": "same", "label": "same", "cwd": "/same", "sameWorkspace": True, "createdAt": 20},
        {"sessionId": "none", "label": "none", "sameWorkspace": False, "createdAt": 30},
        {"sessionId": "other", "label": "other", "cwd": "/else", "sameWorkspace": False, "createdAt": 40},
    ]


def test_query_filters_on_cwd_and_title_case_insensitively(ranked_store: MemoryStore) -> None:
    resolver, _ = make_resolver(ranked_store)
    target = target_for(ranked_store)
    assert as_json(resolver.list_candidates(target, "els", 1)) == [
        {"sessionId": "other", "label": "other", "cwd": "/else", "sameWorkspace": False, "createdAt": 40}
    ]
    assert [c.session_id for c in resolver.list_candidates(target, "LATEST", 1)] == ["same-later"]
    assert [c.session_id for c in resolver.list_candidates(target, "SAME")] == ["same-later", "same"]
    assert resolver.list_candidates(target, "nothing matches") == []


def test_message_bodies_are_never_searched(ranked_store: MemoryStore) -> None:
    ranked_store.logs["other"].append("user/message", {"content": [{"type": "text", "text": "needle"}],
                                                       "source": {"kind": "user"}, "role": "user", "id": "m"})
    resolver, _ = make_resolver(ranked_store)
    assert resolver.list_candidates(target_for(ranked_store), "needle") == []


def test_limit_zero_and_other_bad_limits_are_invalid_references(ranked_store: MemoryStore) -> None:
    resolver, _ = make_resolver(ranked_store)
    target = target_for(ranked_store)
    for limit in (0, -1, 1.5, 2.0, True, "3", 2**53):
        with pytest.raises(SessionReferenceError) as info:
            resolver.list_candidates(target, "", limit)  # type: ignore[arg-type]
        assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
        assert "candidate limit must be a positive safe integer" in info.value.message


def test_default_limit_is_the_configured_candidate_limit(ranked_store: MemoryStore) -> None:
    resolver, _ = make_resolver(ranked_store, candidate_limit=2)
    assert len(resolver.list_candidates(target_for(ranked_store))) == 2


def test_a_rejected_title_read_falls_back_to_the_id() -> None:
    store = MemoryStore()
    store.new_log("target")
    title(store.new_log("source"), "Secret title")
    store.title_failures.add("source")
    resolver, _ = make_resolver(store)
    assert as_json(resolver.list_candidates(target_for(store), "source")) == [
        {"sessionId": "source", "label": "source", "sameWorkspace": False, "createdAt": 1}
    ]


def test_target_without_cwd_ranks_cwd_less_sessions_first() -> None:
    assert workspace_rank(None, None) == 1
    assert workspace_rank("/a", None) == 2
    assert workspace_rank("/a", "/a") == 0
    store = MemoryStore()
    store.new_log("target")
    store.new_log("with-cwd", cwd="/x", created_at=5)
    store.new_log("without", created_at=2)
    resolver, _ = make_resolver(store)
    candidates = resolver.list_candidates(target_for(store))
    assert [(c.session_id, c.same_workspace) for c in candidates] == [("without", False), ("with-cwd", False)]


def test_only_the_selected_titles_are_read_for_an_empty_query() -> None:
    store = MemoryStore()
    store.new_log("target")
    for i in range(20):
        store.new_log(f"s{i}", created_at=i)

    class Counting(SessionQuery):
        calls = 0

        def title(self, session_id: str) -> str | None:
            Counting.calls += 1
            return super().title(session_id)

    resolver = SessionReferenceResolver(Counting(store))
    assert len(resolver.list_candidates(target_for(store), "", 3)) == 3
    assert Counting.calls == 3


def test_remote_face_adds_the_canonical_mention() -> None:
    store = MemoryStore()
    store.new_log("target")
    store.new_log("source]", cwd="/w")
    resolver, _ = make_resolver(store)
    [remote] = resolver.remote_candidates(target_for(store))
    assert remote["sessionId"] == "source]"
    assert remote["mention"].startswith("@[source\\]](dsh-session:")
    uri = remote["mention"].split("](", 1)[1][:-1]
    assert decode_session_reference_uri(uri) == "source]"
    assert parse_session_reference_text(remote["mention"]).references[0].session_id == "source]"
    assert list(remote) == ["sessionId", "label", "cwd", "sameWorkspace", "createdAt", "mention"]


def test_live_sessions_are_listed_with_their_current_title() -> None:
    store = MemoryStore()
    store.new_log("target")
    query = SessionQuery(store)
    live = SessionLog(SessionHeader("live", 99, "/w"))
    title(live, "Live title")
    query.register_live(live)
    resolver = SessionReferenceResolver(query)
    assert [(c.session_id, c.label) for c in resolver.list_candidates(ReferenceTarget("target", None))] == [
        ("live", "Live title")
    ]


@pytest.mark.parametrize("stall", ["stall_list", "stall_titles"])
def test_cancelling_a_stalled_listing_or_title_batch(stall: str) -> None:
    store = MemoryStore()
    store.new_log("target")
    store.new_log("source")
    query = StallingQuery(store, **{stall: True})
    resolver = SessionReferenceResolver(query)
    cancel = threading.Event()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            resolver.list_candidates(ReferenceTarget("target", None), "source", None, cancel)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert query.entered.wait(5)
    cancelled_at = time.monotonic()
    cancel.set()
    worker.join(5)
    elapsed = time.monotonic() - cancelled_at
    query.release.set()
    assert outcome and isinstance(outcome[0], SessionReferenceError)
    assert outcome[0].code == SESSION_REFERENCE_CANCELLED
    assert elapsed < 0.5


def test_an_already_cancelled_flag_fails_before_listing(ranked_store: MemoryStore) -> None:
    resolver, _ = make_resolver(ranked_store)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        resolver.list_candidates(target_for(ranked_store), cancel=cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED


def test_query_must_be_a_string(ranked_store: MemoryStore) -> None:
    resolver, _ = make_resolver(ranked_store)
    with pytest.raises(SessionReferenceError):
        resolver.list_candidates(target_for(ranked_store), None)  # type: ignore[arg-type]
