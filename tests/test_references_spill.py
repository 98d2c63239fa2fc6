"""Spill: full transcripts of truncated sources saved beside the target, and the omission notice."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from references_helpers import (
    MemoryStore,
    append_user,
    build_projection_log,
    context_of,
    context_text,
    folder_of,
    make_resolver,
    object_size,
    omission_entries,
    prompt_data,
    spill_path,
    target_for,
)

from dsh_jupyter._json import dumps
from dsh_jupyter.references import (
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SessionReferenceError,
)
from dsh_jupyter.references import resolver as resolver_module
from dsh_jupyter.references.retention import js_utf8_length
from dsh_jupyter.references.spill import (
    RETRIEVAL_HINT,
    SpillResult,
    _encode_lines,
    _masked,
    _utf8_prefix_length,
    fragments,
    render_transcript,
    save_transcript,
)

#: Texts made of what could confuse a line split of the encoded list: quotes, commas, backslashes, newlines, controls,
#: and characters outside ASCII and the BMP.
_TRICKY = st.text(alphabet=st.sampled_from(['"', ",", "\\", "\n", "\x00", "a", " ", "界", "😀", "\u2028", "]", "["]),
                  max_size=300)


@given(_TRICKY)
def test_each_fragment_line_is_the_json_of_its_piece(text: str) -> None:
    lines = fragments(text, 7)
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    assert lines == [dumps(piece) for piece in pieces]
    assert [json.loads(line) for line in lines] == pieces


@given(st.lists(st.text(alphabet=st.sampled_from(['"', ",", "\\", "\n", "a", "界", "😀"]), max_size=4), max_size=12))
def test_fragment_lines_split_where_the_pieces_end_whatever_they_hold(pieces: list[str]) -> None:
    """A piece that is just a comma, or that ends in a quote and a comma, or in a backslash, is still its own line."""
    lines = _encode_lines(pieces).decode("utf-8").split("\n") if pieces else []
    assert lines == [dumps(piece) for piece in pieces]


@given(st.text(alphabet=st.sampled_from(["a", "\x00", "界", "😀", "\ud83d", "\ude00", "\ud800"]), max_size=60),
       st.integers(0, 70), st.integers(1, 9))
def test_the_size_of_a_kept_prefix_is_counted_a_window_at_a_time(text: str, end: int, step: int) -> None:
    """The UTF-8 size (as JavaScript counts it) of what a cut message kept, counted ``step`` code points at a time,
    is that of the whole prefix: a masked text holds surrogate pairs joined, so no window splits one."""
    masked = _masked(text)
    assert _utf8_prefix_length(masked, min(end, len(masked)), step) == js_utf8_length(masked[:end])


CASES = [
    ("huge single message", ["head\n" + "界😀" * 10_000 + "\ntail"], 360),
    ("whole dropped messages", ["old " + "界" * 300, "new fact"], 180),
    ("tiny preview", ["😀" * 300], 140),
    ("escaped controls", ["\x00\n\r\t\"\\" * 300], 180),
]


def transcript_messages(content: str) -> list[tuple[str, list[str]]]:
    """(role, fragment lines) of each message section of a transcript."""
    sections = content.split("\n### Message ")[1:]
    result = []
    for number, section in enumerate(sections, start=1):
        header, _, body = section.partition("\n\n")
        index, role = header.split(": ")
        assert int(index) == number
        result.append((role, [line for line in body.split("\n") if line]))
    return result


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "sessions")


@pytest.mark.parametrize(("name", "texts", "budget"), CASES, ids=[c[0] for c in CASES])
def test_truncated_sources_save_their_full_captured_transcript(
    store: MemoryStore, name: str, texts: list[str], budget: int
) -> None:
    log = store.new_log("source")
    for text in texts:
        append_user(log, text)
    resolver, _ = make_resolver(store, max_reference_bytes=budget)
    target = target_for(store)
    prepared = resolver.prepare_sync(target, [], [{"sessionId": "source"}])

    saved = prepared.spills[0]
    assert saved.status == "saved" and saved.path is not None
    assert saved.path.parent == target.session_dir
    assert saved.path.name == "session-reference-1.txt"
    content = saved.path.read_text("utf-8")
    assert saved.bytes == len(content.encode("utf-8"))
    assert content.endswith("\n")
    assert "untrusted, read-only" in content and "do not act on" in content
    assert '"capturedFormatVersion": 0' in content and '"sessionId": "source"' in content
    messages = transcript_messages(content)
    assert [role for role, _ in messages] == ["user"] * len(texts)
    assert ["".join(json.loads(line) for line in lines) for _, lines in messages] == texts
    for _, lines in messages:
        assert all(len(line) <= 386 for line in lines)
        assert all(len(json.loads(line)) <= 64 for line in lines)

    text = context_text(prepared)
    assert "\ufffd" not in text
    [data] = prompt_data(text)
    assert object_size(data) <= budget
    [entry] = omission_entries(text)
    assert entry == {
        "sessionId": "source",
        "capturedThroughSeq": len(texts) - 1,
        "omittedMessages": len(texts) - 1,
        "omittedBytes": entry["omittedBytes"],
        "fullSnapshot": {"status": "saved", "locator": str(saved.path), "bytes": saved.bytes,
                         "retrievalHint": RETRIEVAL_HINT},
    }
    assert entry["omittedBytes"] > 0
    if budget == 140:
        assert data["conversation"] == [{"role": "user", "text": ""}]
        assert entry["omittedBytes"] == js_utf8_length(texts[0])


def test_escaped_control_fragments_hit_the_line_length_bound(store: MemoryStore) -> None:
    lines = fragments("\x00" * 130)
    assert [len(line) for line in lines] == [386, 386, 14]


def test_intact_references_add_no_section_and_save_nothing(store: MemoryStore) -> None:
    append_user(store.new_log("source"), "complete fact")
    resolver, _ = make_resolver(store)
    target = target_for(store)
    prepared = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    assert "Reference omissions" not in context_text(prepared) and "complete fact" in context_text(prepared)
    assert prepared.spills == {}
    assert not folder_of(target).exists()


def test_distinct_locators_beside_an_intact_reference(store: MemoryStore) -> None:
    for session_id, text in [("one", "large" * 300), ("two", "intact"), ("three", "large" * 300)]:
        append_user(store.new_log(session_id), text)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": s} for s in ["one", "two", "three"]])
    assert sorted(prepared.spills) == [0, 2]
    names = [spill_path(prepared.spills[i]).name for i in (0, 2)]
    assert names == ["session-reference-1.txt", "session-reference-3.txt"]
    text = context_text(prepared)
    assert [e["sessionId"] for e in omission_entries(text)] == ["one", "three"]
    assert "intact" in text
    # The locators are part of the durable message, so a replay of the target sees them.
    assert all(str(prepared.spills[i].path) in json.dumps(prepared.additional_context) for i in (0, 2))


def test_existing_files_are_never_overwritten(store: MemoryStore) -> None:
    append_user(store.new_log("source"), "large" * 300)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    target = target_for(store)
    first = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    second = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    assert spill_path(first.spills[0]).name == "session-reference-1.txt"
    assert spill_path(second.spills[0]).name == "session-reference-1-2.txt"
    assert spill_path(first.spills[0]).read_text() == spill_path(second.spills[0]).read_text()


def test_no_session_folder_reports_storage_not_configured() -> None:
    store = MemoryStore(None)
    append_user(store.new_log("source"), "界" * 500)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": "source"}])
    text = context_text(prepared)
    assert '"status":"unavailable"' in text and "storage-not-configured" in text
    assert '"locator"' not in text and '"status":"saved"' not in text
    assert prepared.spills[0] == SpillResult.unavailable("storage-not-configured")


def test_failed_save_reports_save_failed_and_still_publishes(store: MemoryStore, tmp_path: Path) -> None:
    append_user(store.new_log("source"), "界" * 500)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    target = target_for(store)
    folder_of(target).parent.mkdir(parents=True)
    folder_of(target).write_text("a file where the folder should be")
    prepared = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    text = context_text(prepared)
    assert "save-failed" in text and '"locator"' not in text
    assert prepared.spills[0].reason == "save-failed"


def test_save_failure_removes_a_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def broken_write(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", broken_write)
    result = save_transcript(tmp_path, 0, "content")
    assert result.status == "unavailable" and result.reason == "save-failed"
    assert list(tmp_path.iterdir()) == []


def test_the_transcript_is_the_capture_even_if_the_source_changes_while_saving(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = store.add(build_projection_log())
    real_save = save_transcript

    def save_while_mutating(folder: Path | None, index: int, content: str) -> SpillResult:
        append_user(source, "later mutation must not appear")
        return real_save(folder, index, content)

    monkeypatch.setattr(resolver_module, "save_transcript", save_while_mutating)
    resolver, _ = make_resolver(store, max_reference_bytes=240)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": "source"}])
    full = spill_path(prepared.spills[0]).read_text("utf-8")
    for text in ["checkpoint", "recent user", "human steer", "visible answer"]:
        assert text in full
    for text in ["later mutation", "old user", "tool output", "private reasoning", "workspace secret",
                 "plugin steer", "unfinished answer"]:
        assert text not in full and text not in context_text(prepared)
    assert context_of(prepared)["source"]["references"][0]["capturedThroughSeq"] == 13


@pytest.mark.parametrize("timing", ["during-save", "after-save"])
def test_cancellation_during_or_after_a_save_publishes_nothing(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, timing: str
) -> None:
    append_user(store.new_log("source"), "large" * 500)
    cancel = threading.Event()
    started, finish, settled = threading.Event(), threading.Event(), threading.Event()
    real_save = save_transcript

    def slow_save(folder: Path | None, index: int, content: str) -> SpillResult:
        started.set()
        finish.wait(10)
        result = real_save(folder, index, content)
        if timing == "after-save":
            cancel.set()
        settled.set()
        return result

    monkeypatch.setattr(resolver_module, "save_transcript", slow_save)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    target = target_for(store)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(resolver.prepare_sync(target, [], [{"sessionId": "source"}], cancel))
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(5)
    if timing == "during-save":
        cancel.set()
        worker.join(2)
        assert not worker.is_alive(), "cancellation must not wait for the save"
    finish.set()
    worker.join(5)
    assert settled.wait(5)
    [error] = outcome
    assert isinstance(error, SessionReferenceError) and error.code == SESSION_REFERENCE_CANCELLED
    # The artifact may stay behind; nothing was returned to publish.
    deadline = time.monotonic() + 5
    while not (folder_of(target) / "session-reference-1.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (folder_of(target) / "session-reference-1.txt").exists()


def test_render_transcript_layout() -> None:
    data = {"sessionId": "s\ud800", "label": "L", "cwd": None, "capturedThroughSeq": 3,
            "conversation": [{"role": "user", "text": "a\nb"}, {"role": "assistant", "text": "x" * 70}]}
    content = render_transcript(data, 0)
    lines = content.split("\n")
    assert lines[0].startswith("## ") and lines[1] == ""
    assert '{\n  "sessionId": "s\\ud800",\n  "label": "L",\n  "cwd": null,\n  "capturedThroughSeq": 3,\n' \
           '  "capturedFormatVersion": 0\n}' in content
    assert content.endswith('### Message 2: assistant\n\n"' + "x" * 64 + '"\n"xxxxxx"\n')
    assert '### Message 1: user\n\n"a\\nb"\n' in content


def test_async_prepare_with_an_asyncio_event(store: MemoryStore) -> None:
    append_user(store.new_log("source"), "large" * 300)
    resolver, _ = make_resolver(store, max_reference_bytes=180)

    async def main() -> object:
        return await resolver.prepare(target_for(store), [], [{"sessionId": "source"}], asyncio.Event())

    prepared = asyncio.run(main())
    assert prepared.spills[0].status == "saved"  # type: ignore[attr-defined]


# -- the cap -------------------------------------------------------------------------------------------
def _capped_reference(store: MemoryStore, texts: list[str], cap: int,
                      budget: int = 2000) -> tuple[str, dict[str, Any]]:
    log = store.new_log("source")
    for text in texts:
        append_user(log, text)
    resolver, _ = make_resolver(store, max_reference_bytes=budget, max_spill_bytes=cap)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": "source"}])
    saved = prepared.spills[0]
    assert saved.status == "saved" and saved.path is not None
    [entry] = omission_entries(context_text(prepared))
    return saved.path.read_text("utf-8"), entry


def test_a_big_source_spills_a_capped_transcript_with_a_closing_notice(store: MemoryStore) -> None:
    texts = [f"message {i}: " + "界😀 <x> \n" * 200 for i in range(60)]  # about 200 kB of text
    cap = 16_384
    content, entry = _capped_reference(store, texts, cap)
    assert len(content.encode("utf-8")) <= cap
    assert entry["fullSnapshot"]["capped"] is True and entry["fullSnapshot"]["bytes"] == len(content.encode())
    body, _, notice = content.rstrip("\n").rpartition("\n\n")
    assert notice.startswith("[\u2026 This transcript is capped at 16384 bytes.")
    messages = transcript_messages(body + "\n")
    decoded = ["".join(json.loads(line) for line in lines) for _, lines in messages]
    whole = [t for t, original in zip(decoded, texts[: len(decoded)], strict=True) if t == original]
    assert len(whole) >= len(decoded) - 1 and decoded and texts[len(decoded) - 1].startswith(decoded[-1])
    included = sum(js_utf8_length(t) for t in decoded)
    total = sum(js_utf8_length(t) for t in texts)
    assert f"Left out: {len(texts) - len(whole)} of {len(texts)} messages" in notice
    assert f"from message {len(whole) + 1} on), {total - included} UTF-8 bytes of text" in notice
    assert '"source"' in notice and f"seq {len(texts) - 1}" in notice


def test_a_capped_transcript_of_texts_with_surrogates_counts_them_as_javascript_does(store: MemoryStore) -> None:
    """Lone surrogates stay lone in whole messages (3 bytes each, as JavaScript counts them) and are U+FFFD in the
    cut one (its first bytes, as JavaScript encodes them); a pair held as two code units is one character. The
    notice's byte count agrees with the fragments kept."""
    from dsh_jupyter._json import js_string
    from dsh_jupyter.references.utf8 import js_utf8

    texts = [js_string(f"message {i}: " + "a\ud800b\ud83d\ude00c\udfff界 " * 500) for i in range(12)]
    assert all("\ud800" in t and "😀" in t for t in texts)
    content, entry = _capped_reference(store, texts, 16_384)
    assert entry["fullSnapshot"]["capped"] is True and len(content.encode("utf-8")) <= 16_384
    body, _, notice = content.rstrip("\n").rpartition("\n\n")
    decoded = ["".join(json.loads(line) for line in lines) for _, lines in transcript_messages(body + "\n")]
    cut = js_utf8(texts[len(decoded) - 1]).decode("utf-8")
    assert decoded and decoded[:-1] == texts[: len(decoded) - 1] and cut.startswith(decoded[-1])
    whole = len(decoded) - (decoded[-1] != texts[len(decoded) - 1])
    included = sum(js_utf8_length(t) for t in decoded)
    total = sum(js_utf8_length(t) for t in texts)
    assert f"from message {whole + 1} on), {total - included} UTF-8 bytes of text" in notice


def test_a_single_huge_message_spills_its_first_fragments(store: MemoryStore) -> None:
    text = "start " + "\x00\"\\界😀" * 100_000
    content, entry = _capped_reference(store, [text, "reply"], 20_000)
    assert len(content.encode("utf-8")) <= 20_000 and entry["fullSnapshot"]["capped"] is True
    body = content.rstrip("\n").rpartition("\n\n")[0]
    [(role, lines)] = transcript_messages(body + "\n")
    assert role == "user" and text.startswith("".join(json.loads(line) for line in lines))
    assert "Left out: 2 of 2 messages (in whole or in part, from message 1 on)" in content


def test_a_source_within_the_cap_spills_every_message_exactly(store: MemoryStore) -> None:
    texts = ["old " + "界" * 3000, "\x00\n\r\t\"\\" * 300, "new fact"]
    content, entry = _capped_reference(store, texts, 1 << 20, budget=500)
    assert "capped" not in entry["fullSnapshot"]
    assert "This transcript is capped" not in content
    messages = transcript_messages(content)
    assert ["".join(json.loads(line) for line in lines) for _, lines in messages] == texts


def test_the_capped_renderer_without_a_cap_is_the_full_transcript() -> None:
    from dsh_jupyter.references.bounded import bound_projection
    from dsh_jupyter.references.projection import ProjectedMessage, ProjectedSession
    from dsh_jupyter.references.spill import render_capped_transcript

    messages = tuple(ProjectedMessage(role, text) for role, text in
                     [("user", "a\nb"), ("assistant", ""), ("user", "x" * 130 + "\ud800"), ("assistant", "😀" * 70)])
    projection = ProjectedSession("s\ud800", "/w", 9, 0, messages)
    content, capped = render_capped_transcript(bound_projection(projection, 65_536), "L")
    assert not capped and content == render_transcript(projection.data("L"), 0)


def test_a_spill_cap_below_the_minimum_is_refused(store: MemoryStore) -> None:
    with pytest.raises(SessionReferenceError) as info:
        make_resolver(store, max_spill_bytes=1000)
    assert info.value.code == SESSION_REFERENCE_INVALID_CONFIG
    assert "max_spill_bytes" in info.value.message and "16384" in info.value.message


def test_the_cap_holds_with_a_long_session_id(store: MemoryStore) -> None:
    source_id = "s" + "界" * 1500
    log = store.new_log(source_id)
    for i in range(40):
        append_user(log, f"message {i} " + "x" * 3000)
    resolver, _ = make_resolver(store, max_reference_bytes=20_000, max_spill_bytes=16_384)
    prepared = resolver.prepare_sync(target_for(store), [], [{"sessionId": source_id}])
    content = spill_path(prepared.spills[0]).read_text("utf-8")
    assert len(content.encode("utf-8")) <= 16_384 and "This transcript is capped" in content


def test_a_transcript_is_written_in_few_large_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of fragment pieces go out in writes of about WRITE_BYTES each, the file byte for byte the same."""
    from dsh_jupyter.references import spill as spill_module

    monkeypatch.setattr(spill_module, "WRITE_BYTES", 1000)
    pieces = [f"piece {i}\n".encode() for i in range(2000)] + [b"x" * 5000, b"tail"]
    writes: list[int] = []
    real = spill_module.write_all

    def counting(fd: int, data: bytes) -> None:
        writes.append(len(data))
        real(fd, data)

    monkeypatch.setattr(spill_module, "write_all", counting)
    result = spill_module.save_transcript(tmp_path, 0, pieces)
    assert result.path is not None and result.path.read_bytes() == b"".join(pieces)
    assert result.bytes == sum(map(len, pieces))
    assert len(writes) < len(pieces) // 50 and max(writes) == 5000 and all(size <= 1000 for size in writes[:-2])


def test_the_full_snapshots_are_written_in_turn_in_one_helper_thread(store: MemoryStore,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Side by side, their encoding fights over one interpreter lock (about a tenth more CPU for three)."""
    for name in ("one", "two", "three"):
        append_user(store.new_log(name), f"large {name} " * 300)
    saved: list[tuple[int, int]] = []
    real_save = save_transcript

    def recording_save(folder: Path | None, index: int, content: str) -> SpillResult:
        saved.append((index, threading.get_ident()))
        return real_save(folder, index, content)

    monkeypatch.setattr(resolver_module, "save_transcript", recording_save)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    target = target_for(store)
    prepared = resolver.prepare_sync(target, [], [{"sessionId": s} for s in ("one", "two", "three")])
    assert [index for index, _ in saved] == [0, 1, 2]
    assert len({thread for _, thread in saved}) == 1 and saved[0][1] != threading.get_ident()
    assert sorted(prepared.spills) == [0, 1, 2]
    assert all(spill.status == "saved" for spill in prepared.spills.values())


def test_a_cancel_between_snapshots_writes_no_more_of_them(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("one", "two", "three"):
        append_user(store.new_log(name), f"large {name} " * 300)
    cancel = threading.Event()
    real_save = save_transcript

    def cancelling_save(folder: Path | None, index: int, content: str) -> SpillResult:
        cancel.set()
        return real_save(folder, index, content)

    monkeypatch.setattr(resolver_module, "save_transcript", cancelling_save)
    resolver, _ = make_resolver(store, max_reference_bytes=180)
    target = target_for(store)
    with pytest.raises(SessionReferenceError) as info:
        resolver.prepare_sync(target, [], [{"sessionId": s} for s in ("one", "two", "three")], cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    time.sleep(0.1)  # a snapshot still being written in the helper thread would be there by now
    assert sorted(p.name for p in folder_of(target).glob("session-reference-*.txt")) == ["session-reference-1.txt"]
