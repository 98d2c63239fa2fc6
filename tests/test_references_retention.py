"""Retention: per-source byte budgets, the head/tail search, and the reference's pinned outcomes."""

from __future__ import annotations

import pytest
from references_helpers import (
    MemoryStore,
    append_assistant,
    append_user,
    build_projection_log,
    context_of,
    context_text,
    make_resolver,
    object_size,
    prompt_data,
    target_for,
)

from dsh_jupyter.references import SESSION_REFERENCE_BUDGET_EXCEEDED, SessionReferenceError
from dsh_jupyter.references.framing import tag_safe_dumps
from dsh_jupyter.references.projection import ProjectedMessage, ProjectedSession
from dsh_jupyter.references.retention import (
    js_utf8,
    js_utf8_length,
    omission_notice,
    retain_source,
    truncate_with_notice,
)
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import compaction_source, text_block


def projected(*messages: tuple[str, str] | tuple[str, str, bool], session_id: str = "source",
              cwd: str | None = None) -> ProjectedSession:
    units = tuple(ProjectedMessage(*m) for m in messages)
    return ProjectedSession(session_id, cwd, len(units) - 1 if units else None, 0, units)


def test_notice_keeps_the_reference_size() -> None:
    for omitted in (0, 7, 1026, 10**9):
        assert len(omission_notice(omitted).encode()) == 31 + len(str(omitted))
    assert "omitted" in omission_notice(5) and "5 UTF-8 bytes" in omission_notice(5)


def test_javascript_byte_counting() -> None:
    assert js_utf8_length("a界😀") == 1 + 3 + 4
    assert js_utf8_length("\ud800x") == 4  # a lone surrogate counts as U+FFFD
    assert js_utf8_length("\ud83d\ude00") == 4  # a split pair is one astral character
    assert js_utf8("\udc00") == "\ufffd".encode()


def test_truncate_keeps_head_and_tail_with_an_exact_omission_count() -> None:
    text = "HEAD-" + "x" * 1000 + "-TAIL"
    result, omitted = truncate_with_notice(text, 100)
    assert len(result.encode()) <= 100
    kept = result.split("\n[")[0]
    assert kept.startswith("HEAD-") and kept.endswith("-TAIL")
    assert omitted == len(text) - len(kept)
    assert result.endswith(omission_notice(omitted))


def test_truncate_never_splits_a_character_and_counts_cut_bytes() -> None:
    text = "界" * 100
    for limit in range(0, 120):
        result, omitted = truncate_with_notice(text, limit)
        assert len(result.encode()) <= limit
        kept = result.split("\n[")[0]
        assert set(kept) <= {"界"}
        assert omitted == 300 - len(kept.encode()) if result else omitted == 300


def test_truncate_returns_empty_when_not_even_the_notice_fits() -> None:
    assert truncate_with_notice("abcdefghijklmnopqrstuvwxyz" * 10, 20) == ("", 260)
    assert truncate_with_notice("short", 10) == ("short", 0)


def test_lone_surrogates_become_replacement_characters_only_when_cut() -> None:
    text = "\ud800" * 50 + "end"
    result, _ = truncate_with_notice(text, 60)
    assert "\ufffd" in result and not any(0xD800 <= ord(c) <= 0xDFFF for c in result)
    source = retain_source(projected(("user", "a\ud800b")), "source", 65_536)
    assert source is not None and source.data["conversation"][0]["text"] == "a\ud800b"
    assert "\\ud800" in source.serialized


def test_budget_360_keeps_checkpoint_and_the_latest_message() -> None:
    store = MemoryStore()
    log = store.add(build_projection_log(cwd=None))
    append_assistant(log, text_block("latest-" + "界" * 400), turn=3)
    resolver, _ = make_resolver(store, max_reference_bytes=360)
    prepared = resolver.prepare_sync(target_for(store), [text_block("go")], [{"sessionId": "source"}])
    text = context_text(prepared)
    [data] = prompt_data(text)
    assert object_size(data) <= 360
    assert "checkpoint" in text and "latest-" in text and "omitted" in text
    [reference] = context_of(prepared)["source"]["references"]
    assert reference["truncated"] is True and reference["compacted"] is True
    assert reference["omittedMessages"] == 3 and reference["retainedMessages"] == 2
    checkpoint, latest = (m["text"] for m in data["conversation"])
    assert checkpoint == "<compacted-summary>checkpoint</compacted-summary>" and latest.startswith("latest-")


def test_three_sources_are_each_bounded_independently() -> None:
    store = MemoryStore()
    ids = ["one", "two", "three"]
    for session_id in ids:
        log = store.new_log(session_id)
        append_user(log, f"{session_id}-" + "界" * 400, compaction_source("c"))
        append_user(log, f"{session_id}-tail")
    resolver, _ = make_resolver(store, max_reference_bytes=360)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": i} for i in ids])
    sizes = [object_size(d) for d in prompt_data(context_text(prepared))]
    assert sizes == [358, 358, 360]  # the reference's own figures
    assert all(356 < size <= 360 for size in sizes) and sum(sizes) > 720


def test_budget_16_fails_without_a_partial_context() -> None:
    store = MemoryStore()
    store.new_log("source")
    resolver, _ = make_resolver(store, max_reference_bytes=16)
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), [text_block("go")], [{"sessionId": "source"}])
    assert info.value.code == SESSION_REFERENCE_BUDGET_EXCEEDED
    assert "16-byte" in info.value.message and "max_reference_bytes" in info.value.message
    assert retain_source(projected(), "source", 16) is None


def test_one_oversized_source_fails_the_whole_preparation() -> None:
    store = MemoryStore()
    append_user(store.new_log("small"), "fits")
    store.new_log("x" * 400)
    resolver, _ = make_resolver(store, max_reference_bytes=300)
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target_for(store), [], [{"sessionId": "small"}, {"sessionId": "x" * 400}])
    assert info.value.code == SESSION_REFERENCE_BUDGET_EXCEEDED


def test_phase_one_drops_oldest_non_checkpoint_messages_first() -> None:
    source = projected(("user", "a" * 50), ("user", "checkpoint " * 3, True), ("assistant", "b" * 50),
                       ("user", "c" * 50), ("assistant", "newest"))
    retained = retain_source(source, "source", 200)
    assert retained is not None
    texts = [m["text"] for m in retained.data["conversation"]]
    assert texts[0] == "checkpoint " * 3 and texts[-1] == "newest"
    assert retained.stats.omitted_messages >= 2
    assert retained.stats.omitted_bytes >= 100
    assert retained.stats.retained_messages == len(texts)
    assert retained.size <= 200


def test_phase_two_cuts_the_longest_text_earliest_first_on_ties() -> None:
    source = projected(("user", "p" * 300, True), ("user", "q" * 300, True), ("assistant", "z"))
    retained = retain_source(source, "source", 750)
    assert retained is not None
    first, second, last = (m["text"] for m in retained.data["conversation"])
    assert last == "z"
    # Round 1 cut the earliest of the tied texts; the escaped "\n" of its notice left the object one
    # byte over, so the next rounds trimmed the now-longest second text a little (twice, for the same reason).
    assert first.startswith("p") and first.endswith(" UTF-8 bytes omitted \u2026]")
    assert second.startswith("q") and len(first) < len(second) < 300
    assert 746 < retained.size <= 750
    # With less room the first text is emptied (its notice alone no longer fits) before the second is cut.
    tighter = retain_source(source, "source", 500)
    assert tighter is not None and tighter.data["conversation"][0]["text"] == ""
    assert tighter.data["conversation"][1]["text"] == "q" * 300


def test_size_bookkeeping_matches_the_serialised_object() -> None:
    for budget in (150, 200, 260, 400, 1000, 65_536):
        source = projected(("user", "<tag> & \"quote\" \x01 界😀 " * 20), ("assistant", "\\" * 40 + "\ud800"),
                           ("user", "tail"), cwd="/w")
        retained = retain_source(source, "label<", budget)
        if retained is None:
            continue
        assert retained.size == len(tag_safe_dumps(retained.data).encode())
        assert retained.size <= budget


def test_text_that_grows_when_escaped_can_be_emptied_while_budget_remains() -> None:
    store = MemoryStore()
    log = SessionLog(SessionHeader("source", 1, "/source"))
    store.add(log)
    append_assistant(log, text_block("<" * 1000))
    resolver, _ = make_resolver(store, max_reference_bytes=500)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": "source"}])
    [data] = prompt_data(context_text(prepared))
    assert data["conversation"] == [{"role": "assistant", "text": ""}]
    assert object_size(data) == 126
    [reference] = context_of(prepared)["source"]["references"]
    assert reference["omittedBytes"] == 1000


@pytest.mark.parametrize(
    ("text", "budget"),
    [("😀" * 300, 140), ("\x00\n\r\t\"\\" * 300, 180)],
)
def test_pinned_cases_that_end_with_an_empty_text(text: str, budget: int) -> None:
    retained = retain_source(projected(("user", text)), "source", budget)
    assert retained is not None
    assert retained.data["conversation"][0]["text"] == ""
    assert retained.stats.omitted_bytes == js_utf8_length(text)
    assert retained.size <= budget


def test_stats_of_an_untouched_source() -> None:
    retained = retain_source(projected(("user", "a"), ("assistant", "b")), "L", 65_536)
    assert retained is not None
    assert retained.stats.to_json() == {"compacted": False, "originalMessages": 2, "retainedMessages": 2,
                                        "omittedMessages": 0, "omittedBytes": 0, "truncated": False}
    assert retained.full_data == retained.data


def test_truncate_search_result_is_exact() -> None:
    # r = 7 is the largest retained count whose result fits: ceil(7/2) head bytes, floor(7/2) tail bytes.
    assert truncate_with_notice("0123456789" * 10, 40) == ("0123789\n[\u2026 93 UTF-8 bytes omitted \u2026]", 93)
