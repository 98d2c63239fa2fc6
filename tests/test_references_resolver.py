"""prepare(): normalisation, all-or-nothing reads, cancellation, configuration and replay independence."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import math
import threading
import time
import warnings
from typing import Any, cast

import pytest
from references_helpers import (
    MemoryStore,
    StallingQuery,
    append_user,
    context_of,
    context_text,
    make_resolver,
    prompt_data,
    target_for,
)

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import (
    MAX_REFERENCES,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    ReferenceTarget,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceResolver,
    cancellation,
)
from dsh_jupyter.session import SessionNotFoundError
from dsh_jupyter.session.messages import text_block
from dsh_jupyter.store.jsonl import JsonlStore
from dsh_jupyter.store.postgres import PostgresStore

CONTENT = [text_block("go")]


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.new_log("target")
    append_user(store.new_log("one"), "fact one")
    append_user(store.new_log("two"), "fact two")
    append_user(store.new_log("three"), "fact three")
    return store


def code_of(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SessionReferenceError) as info:
        call()
    return info.value.code


def test_no_references_returns_a_copy_of_the_content_and_no_context(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    content = [text_block("go"), {"type": "image", "data": {"nested": [1]}}]
    cancel = threading.Event()
    cancel.set()  # not consulted when there is nothing to prepare
    prepared = resolver.prepare_sync(target_for(store), content, [], cancel)
    assert prepared.content == content and prepared.additional_context is None
    assert prepared.content is not content and prepared.content[1]["data"] is not content[1]["data"]


def test_dedup_first_label_wins_then_the_cap_applies(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store, max_references=2)
    prepared = resolver.prepare_sync(target_for(store), CONTENT, [
        {"sessionId": "one", "label": "first"},
        SessionReferenceInput("one", "ignored duplicate"),
        {"sessionId": "two"},
    ])
    references = context_of(prepared)["source"]["references"]
    assert [(r["sessionId"], r["label"], r["inputIndex"]) for r in references] == \
        [("one", "first", 0), ("two", "two", 1)]
    assert [d["label"] for d in prompt_data(context_text(prepared))] == ["first", "two"]


def test_empty_labels_are_kept(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    prepared = resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one", "label": ""}])
    assert prompt_data(context_text(prepared))[0]["label"] == ""


def test_self_reference_is_checked_on_every_entry(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    target = target_for(store)
    assert code_of(lambda: resolver.prepare_sync(target, CONTENT, [{"sessionId": "target"}])) == \
        SESSION_REFERENCE_SELF_REFERENCE
    assert code_of(lambda: resolver.prepare_sync(
        target, CONTENT, [{"sessionId": "one"}, {"sessionId": "one"}, {"sessionId": "target"}]
    )) == SESSION_REFERENCE_SELF_REFERENCE


@pytest.mark.parametrize("entry", [None, 1, "one", {"sessionId": 1}, {"label": "x"}, {"sessionId": "one", "label": 5}])
def test_invalid_entries_are_rejected_before_any_read(store: MemoryStore, entry: object) -> None:
    query = StallingQuery(store)
    resolver = SessionReferenceResolver(query)
    assert code_of(lambda: resolver.prepare_sync(target_for(store), CONTENT, [entry])) == \
        SESSION_REFERENCE_INVALID_REFERENCE
    assert query.reads == []


@pytest.mark.parametrize("references", ["one", {"sessionId": "one"}, 5])
def test_references_must_be_a_list(store: MemoryStore, references: object) -> None:
    resolver, _ = make_resolver(store)
    assert code_of(lambda: resolver.prepare_sync(target_for(store), CONTENT, cast("list[Any]", references))) == \
        SESSION_REFERENCE_INVALID_REFERENCE


def test_content_must_be_a_list(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    with pytest.raises(TypeError, match="content must be a list"):
        resolver.prepare_sync(target_for(store), cast("list[Any]", "go"), [])


def test_too_many_distinct_references(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store, max_references=2)
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": s} for s in ["one", "two", "three"]])
    assert info.value.code == SESSION_REFERENCE_TOO_MANY
    assert "at most 2 sessions" in info.value.message
    resolver3, _ = make_resolver(store)
    assert code_of(lambda: resolver3.prepare_sync(
        target_for(store), CONTENT, [{"sessionId": s} for s in ["one", "two", "three", "four"]]
    )) == SESSION_REFERENCE_TOO_MANY


def test_a_missing_session_fails_the_whole_preparation(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}, {"sessionId": "missing"}])
    assert info.value.code == SESSION_REFERENCE_READ_FAILED
    assert info.value.message.startswith("failed to read referenced session: ")
    assert "missing" in info.value.message
    assert isinstance(info.value.cause, SessionNotFoundError) and info.value.__cause__ is info.value.cause


class FailingQuery(SessionQuery):
    def __init__(self, store: MemoryStore, failure: BaseException | None = None, result: object = None,
                 cancel: threading.Event | None = None) -> None:
        super().__init__(store)
        self.failure, self.result, self.cancel = failure, result, cancel

    def read_surface(self, session_id: str, **kwargs):  # type: ignore[no-untyped-def]
        if self.cancel is not None:
            self.cancel.set()
        if self.failure is not None:
            raise self.failure
        return self.result if self.result is not None else super().read_surface(session_id)


def test_read_failures_keep_their_message_and_cause(store: MemoryStore) -> None:
    failure = OSError("non-error read failure")
    resolver = SessionReferenceResolver(FailingQuery(store, failure))
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}], threading.Event())
    assert info.value.code == SESSION_REFERENCE_READ_FAILED
    assert info.value.message == "failed to read referenced session: non-error read failure"
    assert info.value.cause is failure
    # An exception without a message still says what failed.
    resolver = SessionReferenceResolver(FailingQuery(store, KeyError()))
    with pytest.raises(SessionReferenceError, match="failed to read referenced session: KeyError"):
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}])


def test_a_read_that_returns_something_else_is_a_read_failure(store: MemoryStore) -> None:
    resolver = SessionReferenceResolver(FailingQuery(store, result="non-error read failure"))
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}])
    assert info.value.code == SESSION_REFERENCE_READ_FAILED and "returned str" in info.value.message


def test_a_failed_read_after_cancellation_reports_cancelled(store: MemoryStore) -> None:
    cancel = threading.Event()
    resolver = SessionReferenceResolver(FailingQuery(store, RuntimeError("read interrupted"), cancel=cancel))
    assert code_of(lambda: resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}], cancel)) \
        == SESSION_REFERENCE_CANCELLED


def test_cancellation_after_the_reads_publishes_nothing(store: MemoryStore) -> None:
    cancel = threading.Event()
    resolver = SessionReferenceResolver(FailingQuery(store, cancel=cancel))
    assert code_of(lambda: resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}], cancel)) \
        == SESSION_REFERENCE_CANCELLED


def test_an_already_cancelled_preparation_reads_nothing(store: MemoryStore) -> None:
    query = StallingQuery(store)
    resolver = SessionReferenceResolver(query)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}], cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert query.reads == []


def test_cancel_returns_within_100ms_while_a_read_never_completes(store: MemoryStore) -> None:
    query = StallingQuery(store, stall_reads=True)
    resolver = SessionReferenceResolver(query)
    published: list[object] = []

    async def main() -> float:
        cancel = asyncio.Event()
        task = asyncio.ensure_future(resolver.prepare(target_for(store), CONTENT, [{"sessionId": "one"}], cancel))
        task.add_done_callback(lambda t: published.append(t.result()) if not t.exception() else None)
        while not query.entered.is_set():
            await asyncio.sleep(0.001)
        cancelled_at = time.perf_counter()
        cancel.set()
        with pytest.raises(SessionReferenceError) as info:
            await task
        elapsed = time.perf_counter() - cancelled_at
        assert info.value.code == SESSION_REFERENCE_CANCELLED
        return elapsed

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        elapsed = asyncio.run(main())
        assert elapsed < 0.1, f"cancellation took {elapsed * 1000:.1f} ms"
        assert published == []
        # The stalled read still finishes in the background later; its result goes nowhere.
        query.release.set()
        assert query.finished.wait(5)
        time.sleep(0.05)
        gc.collect()
    assert published == []


def test_sync_cancel_returns_promptly_while_a_read_never_completes(store: MemoryStore) -> None:
    query = StallingQuery(store, stall_reads=True)
    resolver = SessionReferenceResolver(query)
    cancel = threading.Event()
    cancelled_at: list[float] = []

    def cancel_when_stalled() -> None:
        assert query.entered.wait(5)
        cancelled_at.append(time.perf_counter())
        cancel.set()

    threading.Thread(target=cancel_when_stalled, daemon=True).start()
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}], cancel)
    elapsed = time.perf_counter() - cancelled_at[0]
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert elapsed < 0.1, f"cancellation took {elapsed * 1000:.1f} ms"
    query.release.set()


def test_prepare_sync_without_a_cancel_flag_wakes_no_thread_while_the_reads_run(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only Ctrl-C can stop such a call, and its loop awaits that: no thread polls while the reads run (each wake-up
    takes the GIL from the read; polls at 2-20 ms made a cold read of three 100 MB logs 10-15 % dearer in CPU)."""
    def no_polling() -> Any:
        raise AssertionError("a thread polled while the reads ran")

    monkeypatch.setattr(cancellation, "poll_intervals", no_polling)
    query = StallingQuery(store, stall_reads=True)
    threading.Timer(0.1, query.release.set).start()  # the read takes a while, as a big log's does
    prepared = SessionReferenceResolver(query).prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}])
    assert prepared.additional_context is not None and query.reads == ["one"]


def test_a_store_whose_reads_wait_on_a_server_reads_the_sources_side_by_side(store: MemoryStore) -> None:
    barrier = threading.Barrier(3, timeout=5)
    store.concurrent_reads = True  # as the PostgreSQL store says

    class BarrierQuery(SessionQuery):
        def read_surface(self, session_id: str, **kwargs):  # type: ignore[no-untyped-def]
            barrier.wait()  # only passes when all three reads are in flight together
            return super().read_surface(session_id)

    resolver = SessionReferenceResolver(BarrierQuery(store))
    prepared = resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": s} for s in ["one", "two", "three"]])
    assert [d["sessionId"] for d in prompt_data(context_text(prepared))] == ["one", "two", "three"]


def test_a_local_store_reads_the_sources_in_turn_in_one_thread(store: MemoryStore) -> None:
    assert not store.concurrent_reads and not JsonlStore.concurrent_reads and PostgresStore.concurrent_reads
    reads: list[tuple[str, int]] = []
    inside = threading.Semaphore(1)

    class OneAtATime(SessionQuery):
        def read_surface(self, session_id: str, **kwargs):  # type: ignore[no-untyped-def]
            assert inside.acquire(blocking=False), "two reads ran at once"
            try:
                reads.append((session_id, threading.get_ident()))
                time.sleep(0.05)  # side by side, the next read would start meanwhile
                return super().read_surface(session_id)
            finally:
                inside.release()

    resolver = SessionReferenceResolver(OneAtATime(store))
    prepared = resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": s} for s in ["one", "two", "three"]])
    assert [d["sessionId"] for d in prompt_data(context_text(prepared))] == ["one", "two", "three"]
    assert [name for name, _ in reads] == ["one", "two", "three"]
    assert len({thread for _, thread in reads}) == 1 and reads[0][1] != threading.get_ident()


def test_a_cancel_between_reads_in_turn_stops_before_the_next_source(store: MemoryStore) -> None:
    cancel = threading.Event()
    read: list[str] = []

    class CancelAfterFirst(SessionQuery):
        def read_surface(self, session_id: str, **kwargs):  # type: ignore[no-untyped-def]
            read.append(session_id)
            cancel.set()
            return super().read_surface(session_id)

    resolver = SessionReferenceResolver(CancelAfterFirst(store))
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": s} for s in ["one", "two", "three"]],
                              cancel=cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    time.sleep(0.1)  # a read still running in the helper thread would have added its source by now
    assert read == ["one"]


def test_prepare_sync_works_inside_a_running_event_loop(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)

    async def main() -> object:
        return resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one"}])

    prepared = asyncio.run(main())
    assert "fact one" in context_text(prepared)


def test_context_message_shape(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    prepared = resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one", "label": "One"}])
    message = context_of(prepared)
    assert list(message) == ["content", "source", "role", "id"]
    assert message["role"] == "user" and isinstance(message["id"], str) and len(message["id"]) == 36
    assert message["source"] == {
        "kind": "session-reference", "form": "recall", "version": 1,
        "references": [{"sessionId": "one", "label": "One", "capturedFormatVersion": 0, "capturedThroughSeq": 0,
                        "compacted": False, "originalMessages": 1, "retainedMessages": 1, "omittedMessages": 0,
                        "omittedBytes": 0, "truncated": False, "inputIndex": 0}],
    }
    again = resolver.prepare_sync(target_for(store), CONTENT, [{"sessionId": "one", "label": "One"}])
    assert context_of(again)["id"] != message["id"]


def test_replay_independence_after_source_mutation_and_deletion(store: MemoryStore) -> None:
    resolver, _ = make_resolver(store)
    target = target_for(store)
    prepared = resolver.prepare_sync(target, [text_block("use @one")], [{"sessionId": "one"}])
    frozen = copy.deepcopy(prepared.additional_context)
    serialized = json.dumps(prepared.additional_context)

    append_user(store.logs["one"], "later source mutation")
    store.delete("one")
    assert prepared.additional_context == frozen
    assert json.dumps(prepared.additional_context) == serialized
    assert "fact one" in serialized and "later source mutation" not in serialized
    assert code_of(lambda: resolver.prepare_sync(target, CONTENT, [{"sessionId": "one"}])) == \
        SESSION_REFERENCE_READ_FAILED


def test_live_sessions_are_read_from_memory(store: MemoryStore) -> None:
    from dsh_jupyter.session import SessionHeader, SessionLog

    query = SessionQuery(store)
    live = SessionLog(SessionHeader("live", 3, "/w"))
    append_user(live, "unflushed live fact")
    query.register_live(live)
    prepared = SessionReferenceResolver(query).prepare_sync(ReferenceTarget("target", None), [],
                                                            [{"sessionId": "live"}])
    assert "unflushed live fact" in context_text(prepared)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"max_references": 0}, "max_references must be a positive safe integer"),
        ({"max_references": 4}, "max_references must not exceed 3"),
        ({"max_references": True}, "max_references must be a positive safe integer"),
        ({"candidate_limit": 0}, "candidate_limit must be a positive safe integer"),
        ({"candidate_limit": 2.0}, "candidate_limit must be a positive safe integer"),
        ({"max_reference_bytes": 0}, "max_reference_bytes must be a positive safe integer"),
        ({"max_reference_bytes": 2**53}, "max_reference_bytes must be a positive safe integer"),
        ({"reference_context_fraction": -0.1}, "between zero and one"),
        ({"reference_context_fraction": 1.1}, "between zero and one"),
        ({"reference_context_fraction": math.nan}, "between zero and one"),
        ({"reference_context_fraction": math.inf}, "between zero and one"),
        ({"reference_context_fraction": "0.2"}, "between zero and one"),
    ],
)
def test_invalid_configuration_is_rejected(store: MemoryStore, config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SessionReferenceError) as info:
        SessionReferenceResolver(SessionQuery(store), **config)
    assert info.value.code == SESSION_REFERENCE_INVALID_CONFIG
    assert fragment in info.value.message


def test_defaults(store: MemoryStore) -> None:
    resolver = SessionReferenceResolver(SessionQuery(store))
    assert (resolver.max_references, resolver.candidate_limit, resolver.max_reference_bytes) == \
        (MAX_REFERENCES, 50, None)
    assert resolver.reference_context_fraction == 0.2
    assert SessionReferenceResolver(SessionQuery(store), reference_context_fraction=0).reference_context_fraction == 0
    assert resolver.budget_for(ReferenceTarget("t", None)) == 65_536
