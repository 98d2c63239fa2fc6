"""Bounded projection: a source is measured as it streams in and only what a reference can use is held."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from references_helpers import append_assistant, append_user, context_text, prompt_data, whole_text_retention

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import (
    SESSION_REFERENCE_READ_FAILED,
    ReferenceTarget,
    SessionReferenceError,
    SessionReferenceResolver,
)
from dsh_jupyter.references.bounded import CLIP_SLACK, BoundedProjection, bound_projection
from dsh_jupyter.references.framing import tag_safe_string_size
from dsh_jupyter.references.projection import PROJECTION_SKIPS, ProjectedMessage, ProjectedSession, project_surface
from dsh_jupyter.references.retention import retain_source
from dsh_jupyter.references.utf8 import js_utf8_length
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import text_block
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.scan import STREAM_SURFACE

_PIECES = ["plain words ", "<tag>", '"quoted"', "\\", "\n", "\x01", "界", "😀", "naïve ", "\ud800"]


def random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(size))


def random_source(rng: random.Random, count: int, big: int) -> ProjectedSession:
    messages = []
    for index in range(count):
        length = rng.choice([0, 3, 40, 300, big])
        checkpoint = index > 0 and rng.random() < 0.1
        messages.append(ProjectedMessage("user" if checkpoint or rng.random() < 0.5 else "assistant",
                                         random_text(rng, length) or "x", checkpoint))
    return ProjectedSession("source", "/w", count + 3, 0, tuple(messages))


def held_bytes(projection: BoundedProjection) -> int:
    return sum(js_utf8_length(h.text) if h.text is not None else len(h.head) + len(h.tail)
               for h in projection.held.values())


@pytest.mark.parametrize("seed", range(40))
def test_retention_of_a_bounded_projection_matches_whole_text_retention(seed: int) -> None:
    rng = random.Random(seed)
    source = random_source(rng, rng.randint(1, 30), rng.choice([500, 3000]))
    budget = rng.choice([200, 400, 900, 2500, 8000])
    bounded = bound_projection(source, budget, spill_bytes=rng.choice([None, 1000]))
    got = retain_source(bounded, "label", budget)
    expected = whole_text_retention([(m.role, m.text, m.checkpoint) for m in source.messages],
                                    lambda pairs: source.data("label", pairs), budget)
    if expected is None:
        assert got is None
        return
    assert got is not None
    data, (retained, omitted_messages, omitted_bytes) = expected
    assert got.data == data
    assert (got.stats.retained_messages, got.stats.omitted_messages, got.stats.omitted_bytes) == \
        (retained, omitted_messages, omitted_bytes)
    assert got.stats.original_messages == len(source.messages)


def test_only_the_messages_retention_could_keep_are_held() -> None:
    budget = 4096
    rng = random.Random(7)
    bounded = BoundedProjection("s", None, 0, 0, budget=budget, spill_bytes=2048)
    for index in range(2000):
        bounded.add(ProjectedMessage("user" if index % 2 else "assistant", random_text(rng, 100)))
        # the newest message plus at most a budget of earlier ones; never more than about twice the budget
        assert held_bytes(bounded) <= 2 * budget + 2 * CLIP_SLACK
    assert len(bounded) == 2000 and len(bounded.held) < 60
    assert sum(js_utf8_length(p.text) for p in bounded.spill) <= 2048 and not bounded.spill_complete
    assert bounded.total_text_bytes == sum(bounded.text_bytes)


@pytest.mark.parametrize("budget", [300, 1000, 65_536])
def test_a_huge_message_is_clipped_as_it_arrives(budget: int) -> None:
    text = "head " + "界😀<\n" * 300_000 + " tail"
    bounded = BoundedProjection("s", None, 1, 0, budget=budget, spill_bytes=20_000)
    bounded.add(ProjectedMessage("user", text))
    held = bounded.held[0]
    assert held.text is None and held.utf8_bytes == js_utf8_length(text)
    assert len(held.head) == len(held.tail) == budget // 2 + CLIP_SLACK  # never the whole text
    bounded.add(ProjectedMessage("assistant", "short answer"))
    assert list(bounded.held) == [1]  # an older message larger than the budget is always dropped
    [part, *rest] = bounded.spill
    assert not rest and not part.whole and text.startswith(part.text)
    assert 20_000 - 4 < js_utf8_length(part.text) <= 20_000
    retained = retain_source(bounded, "L", budget)
    expected = whole_text_retention([("user", text, False), ("assistant", "short answer", False)],
                                    lambda pairs: bounded.data("L", pairs), budget)
    assert retained is not None and expected is not None
    assert retained.data == expected[0]
    assert retained.stats.omitted_bytes == expected[1][2]


def test_a_projection_bounded_for_a_smaller_budget_is_refused() -> None:
    bounded = BoundedProjection("s", None, None, 0, budget=100, spill_bytes=None)
    with pytest.raises(ValueError):
        retain_source(bounded, "L", 200)


# -- read through the real JSONL store ------------------------------------------------------------------
def jsonl_source(tmp_path: Path, texts: list[str]) -> JsonlStore:
    store = JsonlStore(tmp_path / "sessions")
    log = SessionLog(SessionHeader("source", 1, "/source"))
    with store.create(log.header) as writer:
        writer.attach(log)
        for index, text in enumerate(texts):
            if index % 2:
                append_assistant(log, text_block(text))
            else:
                append_user(log, text)
        writer.flush()
    return store


def test_a_streamed_surface_decodes_the_same_events_one_at_a_time(tmp_path: Path) -> None:
    store = jsonl_source(tmp_path, [f"message {i} " * 50 for i in range(12)])
    eager = store.read_surface("source", skip_data=PROJECTION_SKIPS)
    lazy = store.read_surface("source", skip_data=PROJECTION_SKIPS | {STREAM_SURFACE})
    assert isinstance(eager.events, list) and not isinstance(lazy.events, list)
    assert len(lazy.events) == len(eager.events) == 12
    assert list(lazy.events) == eager.events
    assert lazy.events[3] == eager.events[3] and lazy.events[-2:] == eager.events[-2:]
    assert project_surface(lazy) == project_surface(eager)


def test_prepare_over_a_jsonl_store_matches_the_in_memory_read(tmp_path: Path) -> None:
    texts = [f"turn {i}: " + "words <and> 😀 " * (40 + i * 30) for i in range(30)]
    store = jsonl_source(tmp_path, texts)
    resolver = SessionReferenceResolver(SessionQuery(store), max_reference_bytes=5000)
    target = ReferenceTarget("target", None, tmp_path / "target")
    prepared = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    [data] = prompt_data(context_text(prepared))
    expected = retain_source(project_surface(store.read_surface("source")), "source", 5000)
    assert expected is not None and data == expected.data


def test_damage_inside_a_streamed_line_is_a_read_failure(tmp_path: Path) -> None:
    store = jsonl_source(tmp_path, ["first " * 20, "answer " * 20, "second " * 20])
    path = store.log_path("source")
    raw = path.read_bytes()
    damaged = raw.replace(b"second second", b"second\" second", 1)  # the line's envelope stays intact
    assert damaged != raw
    path.write_bytes(damaged)
    resolver = SessionReferenceResolver(SessionQuery(store))
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(ReferenceTarget("target", None, tmp_path / "t"), [], [{"sessionId": "source"}])
    assert info.value.code == SESSION_REFERENCE_READ_FAILED
    assert "line" in info.value.message


def test_a_streamed_read_leaves_no_descriptor_open(tmp_path: Path) -> None:
    import gc
    import os

    store = jsonl_source(tmp_path, [f"message {i}" for i in range(6)])
    resolver = SessionReferenceResolver(SessionQuery(store))
    target = ReferenceTarget("target", None, tmp_path / "target")
    resolver.prepare_sync(target, [], [{"sessionId": "source"}])  # warm-up (threads, imports)
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    lazy = store.read_surface("source", skip_data=PROJECTION_SKIPS | {STREAM_SURFACE})
    assert len(os.listdir("/proc/self/fd")) == before + 1  # the unread surface keeps its own descriptor
    del lazy
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("seed", range(10))
def test_long_texts_measured_slice_by_slice_give_the_same_result(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.references import bounded as bounded_module

    rng = random.Random(100 + seed)
    drawn = random_source(rng, rng.randint(1, 12), 3000)
    source = ProjectedSession("source", "/w", 9, 0, tuple(  # no lone surrogates: those are measured whole
        ProjectedMessage(m.role, m.text.replace("\ud800", "é"), m.checkpoint) for m in drawn.messages))
    budget = rng.choice([300, 900, 4000])
    whole = retain_source(bound_projection(source, budget, spill_bytes=500), "L", budget)
    monkeypatch.setattr(bounded_module, "MEASURE_SLICE", 7)
    sliced_projection = bound_projection(source, budget, spill_bytes=500)
    sliced = retain_source(sliced_projection, "L", budget)
    assert (whole is None) == (sliced is None)
    if whole is not None and sliced is not None:
        assert sliced.data == whole.data and sliced.stats == whole.stats
    assert list(sliced_projection.json_sizes) == [tag_safe_string_size(m.text) for m in source.messages]


def test_a_cancelled_preparation_stops_reading_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from dsh_jupyter.references import SESSION_REFERENCE_CANCELLED
    from dsh_jupyter.references import bounded as bounded_module
    from dsh_jupyter.session import Event

    store = jsonl_source(tmp_path, [f"message {i}" for i in range(400)])
    cancel = threading.Event()
    seen: list[int] = []
    from dsh_jupyter.references.projection import project_event as real_project

    def project(event: Event) -> ProjectedMessage | None:
        seen.append(1)
        if len(seen) == 20:
            cancel.set()
        return real_project(event)

    monkeypatch.setattr(bounded_module, "project_event", project)
    resolver = SessionReferenceResolver(SessionQuery(store))
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(ReferenceTarget("target", None, tmp_path / "t"), [], [{"sessionId": "source"}], cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    time.sleep(0.3)  # give an abandoned read the time to go on, if it would
    assert len(seen) == 20  # the read stopped at the next event instead of decoding all 400
