"""Projection: which surface messages a reference carries, on built logs and on the reference's fixtures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from references_helpers import (
    PROJECTION_CONVERSATION,
    MemoryStore,
    append_assistant,
    append_user,
    build_projection_log,
    context_of,
    context_text,
    make_resolver,
    prompt_data,
    target_for,
)

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver
from dsh_jupyter.references.framing import tag_safe_dumps
from dsh_jupyter.references.projection import ProjectedMessage, project_surface
from dsh_jupyter.references.retention import retain_source
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import text_block, user_message
from dsh_jupyter.store import JsonlStore, SqliteStore


def conversation(log: SessionLog) -> list[dict[str, str]]:
    projected = project_surface(log.snapshot())
    return [{"role": m.role, "text": m.text} for m in projected.messages]


def test_only_the_current_user_and_assistant_surface_is_projected() -> None:
    log = build_projection_log()
    snapshot = log.snapshot()
    assert snapshot.captured_through_seq == 13
    projected = project_surface(snapshot)
    assert [{"role": m.role, "text": m.text} for m in projected.messages] == PROJECTION_CONVERSATION
    assert projected.messages[0] == ProjectedMessage("user", PROJECTION_CONVERSATION[0]["text"], True)
    assert projected.compacted
    assert (projected.session_id, projected.cwd, projected.captured_through_seq) == ("source", "/source", 13)


def test_projection_fixture_through_prepare() -> None:
    store = MemoryStore()
    store.add(build_projection_log())
    resolver, _ = make_resolver(store)
    prepared = resolver.prepare_sync(target_for(store, cwd="/target"), [text_block("use @source")],
                                     [{"sessionId": "source", "label": "source"}])
    assert prepared.content == [text_block("use @source")]
    text = context_text(prepared)
    assert prompt_data(text) == [{"sessionId": "source", "label": "source", "cwd": "/source",
                                  "capturedThroughSeq": 13, "conversation": PROJECTION_CONVERSATION}]
    [reference] = context_of(prepared)["source"]["references"]
    assert reference["capturedThroughSeq"] == 13 and reference["compacted"] is True
    assert reference["truncated"] is False
    for hidden in ["old user", "old assistant", "workspace secret", "plugin steer", "tool output",
                   "private reasoning", "plugin-generated", "empty projected", "unfinished answer"]:
        assert hidden not in text


def test_a_nested_reference_snapshot_is_excluded() -> None:
    log = SessionLog(SessionHeader("source", 1))
    log.append("user/message", user_message("nested referenced snapshot must not propagate",
                                            {"kind": "session-reference", "form": "recall", "version": 1,
                                             "references": []}))
    append_user(log, "direct source question")
    assert conversation(log) == [{"role": "user", "text": "direct source question"}]


def test_baked_prompt_prefix_projects_only_the_display_content() -> None:
    log = SessionLog(SessionHeader("source", 1))
    direct = [text_block("direct source question")]
    log.append("user/message", user_message(
        [text_block("[earlier snapshot] secret"), text_block("\n\n## My request:\n"), *direct],
        envelope={"displayContent": direct, "prefixContexts": [{"source": {"kind": "session-reference"}}]},
    ))
    assert conversation(log) == [{"role": "user", "text": "direct source question"}]


def test_legacy_steering_context_and_system_events_are_dropped() -> None:
    log = SessionLog(SessionHeader("source", 1))
    log.append("steering/message", {"content": [text_block("legacy steer")], "source": {"kind": "user"}},
               surface_op="append", ignorable=True)
    log.append("context/message", {"content": [text_block("legacy context")], "source": {"kind": "plugin"}},
               surface_op="append", ignorable=True)
    log.append("system/message", {"content": [text_block("system prompt secret")], "role": "system"},
               surface_op="append")
    append_user(log, "kept")
    assert conversation(log) == [{"role": "user", "text": "kept"}]


def test_text_blocks_are_joined_with_newlines_and_other_blocks_ignored() -> None:
    log = SessionLog(SessionHeader("source", 1))
    append_assistant(log, text_block("a"), {"type": "tool-call", "id": "c", "name": "bash", "arguments": "{}"},
                     {"type": "image", "data": "xx"}, text_block("b"), {"type": "text", "text": 7})
    log.append("user/message", {"content": "not a list", "source": {"kind": "user"}, "role": "user", "id": "x"})
    log.append("user/message", {"source": {"kind": "user"}, "role": "user", "id": "y"})
    assert conversation(log) == [{"role": "assistant", "text": "a\nb"}]


def test_checkpoint_is_recognised_by_its_source_only() -> None:
    log = SessionLog(SessionHeader("source", 1))
    append_user(log, "<compacted-summary>looks like one</compacted-summary>", {"kind": "plugin", "plugin": "other"})
    append_user(log, "real", {"kind": "plugin", "plugin": "compact", "compactionId": "c"})
    projected = project_surface(log.snapshot())
    assert [(m.text, m.checkpoint) for m in projected.messages] == [("real", True)]


def test_an_empty_log_has_no_capture_seq() -> None:
    projected = project_surface(SessionLog(SessionHeader("empty", 1)).snapshot())
    assert projected.captured_through_seq is None and projected.messages == ()


# -- the reference's own logs, read through the real JSONL store ----------------------------------------
def install_fixture(store: JsonlStore, fixtures: Path, name: str) -> str:
    expected = json.loads((fixtures / f"{name}.expected.json").read_text("utf-8"))
    session_id = expected["header"]["id"]
    folder = store.folder(session_id)
    folder.mkdir(parents=True)
    shutil.copyfile(fixtures / f"{name}.jsonl", store.log_path(session_id))
    return str(session_id)


@pytest.mark.parametrize("name", ["plain", "compacted", "referencing", "torn"])
def test_fixture_projection_matches_the_reference(name: str, spec_fixtures: Path, tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    session_id = install_fixture(store, spec_fixtures, name)
    expected = json.loads((spec_fixtures / f"{name}.expected.json").read_text("utf-8"))["projection"]
    query = SessionQuery(store)
    projected = project_surface(query.read_surface(session_id))
    assert [{"role": m.role, "text": m.text} for m in projected.messages] == expected["conversation"]
    assert projected.compacted is expected["compacted"]
    retained = retain_source(projected, expected["label"], 65_536)
    assert retained is not None
    assert retained.data == expected["referencedSessionData"]
    stats = retained.stats.to_json()
    assert stats == expected["stats"]
    assert query.title(session_id) == expected["label"]


def test_referencing_fixture_context_array_is_rebuilt_byte_for_byte(spec_fixtures: Path, tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    source_id = install_fixture(store, spec_fixtures, "plain")
    expected = json.loads((spec_fixtures / "referencing.expected.json").read_text("utf-8"))
    pre_step = expected["preStep"]
    target_header = SessionHeader.from_json(expected["header"])
    resolver = SessionReferenceResolver(SessionQuery(store))

    from dsh_jupyter.references import parse_session_reference_text

    parsed = parse_session_reference_text(pre_step["rawPromptText"])
    assert parsed.text == pre_step["directText"]
    prepared = resolver.prepare_sync(ReferenceTarget.from_header(target_header, store),
                                     [text_block(parsed.text)], parsed.references)
    assert parsed.references[0].session_id == source_id == pre_step["referencedSession"]
    text = context_text(prepared)
    ours = text.split("<referenced-sessions>\n", 1)[1].rsplit("\n</referenced-sessions>", 1)[0]
    theirs = pre_step["contextText"].split("<referenced-sessions>\n", 1)[1].rsplit("\n</referenced-sessions>", 1)[0]
    assert ours == theirs
    assert json.loads(ours) == pre_step["referencedPayload"]
    source = context_of(prepared)["source"]
    expected_source = pre_step["contextSource"]
    # The release predates capturedFormatVersion (read as 0); we always write it, right after the label.
    expected_references = [
        {"sessionId": r["sessionId"], "label": r["label"], "capturedFormatVersion": 0,
         **{k: v for k, v in r.items() if k not in ("sessionId", "label")}}
        for r in expected_source["references"]
    ]
    assert source == {**expected_source, "references": expected_references}
    assert list(source["references"][0]) == ["sessionId", "label", "capturedFormatVersion", "capturedThroughSeq",
                                             "compacted", "originalMessages", "retainedMessages", "omittedMessages",
                                             "omittedBytes", "truncated", "inputIndex"]
    assert context_of(prepared)["role"] == "user"
    assert context_of(prepared)["id"] != pre_step["contextMessageId"]
    assert tag_safe_dumps(pre_step["referencedPayload"]) == theirs


def test_referencing_a_session_whose_log_already_holds_a_reference(spec_fixtures: Path, tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    install_fixture(store, spec_fixtures, "plain")
    referencing_id = install_fixture(store, spec_fixtures, "referencing")
    resolver = SessionReferenceResolver(SessionQuery(store))
    prepared = resolver.prepare_sync(ReferenceTarget("new-target", None), [], [{"sessionId": referencing_id}])
    text = context_text(prepared)
    [data] = prompt_data(text)
    assert len(data["conversation"]) == 2
    assert "Flaky login test race: apply" in data["conversation"][0]["text"]
    assert "The login test in tests/auth.spec.ts fails" not in text  # the earlier snapshot did not propagate


def test_sqlite_target_has_no_spill_folder(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "sessions.db")
    header = SessionHeader.new(tmp_path)
    assert ReferenceTarget.from_header(header, store).session_dir is None
    jsonl = JsonlStore(tmp_path / "jsonl")
    assert ReferenceTarget.from_header(header, jsonl).session_dir == jsonl.folder(header.id)
