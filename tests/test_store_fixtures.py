"""Logs written by the reference implementation read back through our store and query exactly as the
reference's own reader read them (``tests/fixtures/reference``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.session import Event, SessionCorruptError
from dsh_jupyter.session.messages import blocks_text, is_checkpoint_source, is_direct_user_source
from dsh_jupyter.store import JsonlStore, encode_segment

READABLE = ["plain", "torn", "compacted", "referencing"]


def install(fixtures: Path, name: str, root: Path) -> tuple[JsonlStore, dict[str, Any]]:
    """Copy one fixture into a store root at ``<root>/<encode_segment(id)>/session.jsonl``."""
    expected = json.loads((fixtures / f"{name}.expected.json").read_text(encoding="utf-8"))
    target = root / encode_segment(expected["header"]["id"]) / "session.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copyfile(fixtures / f"{name}.jsonl", target)
    return JsonlStore(root), expected


def describe(event: Event) -> dict[str, Any]:
    """One surface node the way ``*.expected.json`` records it."""
    message = event.message or {}
    source = message.get("source") or {}
    blocks = message.get("content") or []
    text = blocks_text(blocks[0].get("content") or []) if event.type == "tool/result" else blocks_text(blocks)
    entry: dict[str, Any] = {
        "seq": event.seq,
        "type": event.type,
        "role": message.get("role"),
        "sourceKind": source.get("kind"),
        "surfaceOp": event.surface_op if event.surface_op == "append" else event.surface_op.to_json(),
        "blocks": [b.get("type") for b in blocks],
        "text": text,
    }
    if source.get("kind") == "plugin":
        entry["sourcePlugin"] = source.get("plugin")
    if is_checkpoint_source(source):
        entry["checkpoint"] = True
        match = re.search(r"<compacted-summary>\n?(.*?)\n?</compacted-summary>", text, re.S)
        entry["summary"] = match.group(1) if match else None
    return entry


def conversation(events: list[Event]) -> list[dict[str, str]]:
    """The projection filter of §9: direct user prompts, checkpoints and non-empty assistant text."""
    out: list[dict[str, str]] = []
    for event in events:
        message = event.message or {}
        source = message.get("source")
        if event.type == "user/message" and (is_direct_user_source(source) or is_checkpoint_source(source)):
            out.append({"role": "user", "text": blocks_text(message.get("content") or [])})
        elif event.type == "assistant/message":
            text = blocks_text(message.get("content") or [])
            if text:
                out.append({"role": "assistant", "text": text})
    return out


@pytest.mark.parametrize("name", READABLE)
def test_fixture_reads_like_the_reference(spec_fixtures: Path, tmp_path: Path, name: str) -> None:
    store, expected = install(spec_fixtures, name, tmp_path / "sessions")
    session_id = expected["header"]["id"]
    query = SessionQuery(store)

    snapshot = query.read_surface(session_id)
    assert snapshot.header.to_json() == expected["header"]
    assert snapshot.captured_through_seq == expected["capturedThroughSeq"]
    got = [describe(e) for e in snapshot.events]
    want = [{k: v for k, v in entry.items()} for entry in expected["surface"]]
    assert [g["seq"] for g in got] == [w["seq"] for w in want]
    assert got == want

    title = expected["latestTitle"]
    assert query.title(session_id) == title["title"]
    record = query.title_record(session_id)
    assert record == {"title": title["title"], "messageSeqs": title["messageSeqs"], "source": title["source"]}

    log = store.load(session_id)
    assert len(log) == expected["rawEventCount"]
    counts: dict[str, int] = {}
    for event in log.events:
        counts[event.type] = counts.get(event.type, 0) + 1
    assert counts == expected["eventTypeCounts"]
    assert log.surface() == snapshot.events, "the fast surface read agrees with the full load"
    last = log.event(title["eventSeq"])
    assert last.type == "session/title" and last.time == title["updatedAt"]

    replaced = [e for e in log.events if e.surface_op not in (None, "append")]
    assert [{"seq": e.seq, "start": e.surface_op.start, "end": e.surface_op.end} for e in replaced] == [
        {k: r[k] for k in ("seq", "start", "end")} for r in expected["replacements"]
    ]

    projection = expected["projection"]
    assert conversation(snapshot.events) == projection["conversation"]
    compacted = any(is_checkpoint_source((e.message or {}).get("source")) for e in snapshot.events)
    assert compacted == projection["compacted"]
    data = projection["referencedSessionData"]
    assert (data["sessionId"], data["cwd"], data["capturedThroughSeq"]) == (
        session_id, snapshot.header.cwd, snapshot.captured_through_seq)

    assert [r.id for r in query.list_sessions()] == [session_id]


def test_replacements_shadow_what_the_reference_says(spec_fixtures: Path, tmp_path: Path) -> None:
    store, expected = install(spec_fixtures, "compacted", tmp_path / "sessions")
    log = store.load(expected["header"]["id"])
    from dsh_jupyter.session import SurfaceFold

    fold = SurfaceFold()
    for event in log.events:
        if event.surface_op is not None:
            shadowed = fold.apply(event.seq, event.surface_op, event.source_event_seqs)
            if shadowed:
                entry = next(r for r in expected["replacements"] if r["seq"] == event.seq)
                assert shadowed == entry["shadowedSeqs"]


def test_torn_fixture_keeps_seq_0_to_99_and_reopens(spec_fixtures: Path, tmp_path: Path) -> None:
    store, expected = install(spec_fixtures, "torn", tmp_path / "sessions")
    session_id = expected["header"]["id"]
    path = store.log_path(session_id)
    assert path.stat().st_size == expected["fileBytes"]
    log = store.load(session_id)
    assert [e.seq for e in log.events] == list(range(100))
    log, writer = store.open(session_id)
    with writer:
        assert len(log) == expected["torn"]["keptEvents"]  # the last turn is closed: no closers
        assert path.stat().st_size == expected["committedBytes"]
        log.append("turn/start", {"turn": 3})
        log.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    assert [e.seq for e in store.load(session_id).events] == list(range(102))


def test_corrupt_fixture_is_rejected_at_line_17(spec_fixtures: Path, tmp_path: Path) -> None:
    store, expected = install(spec_fixtures, "corrupt", tmp_path / "sessions")
    session_id = expected["header"]["id"]
    before = store.log_path(session_id).read_bytes()
    query = SessionQuery(store)
    for read in (store.load, query.read_surface, query.title, store.open):
        with pytest.raises(SessionCorruptError) as info:
            read(session_id)
        assert info.value.line == expected["badEventLine"] == 17
        assert "line 17" in str(info.value) and str(store.log_path(session_id)) in str(info.value)
    assert store.log_path(session_id).read_bytes() == before, "a rejected log is never modified"
    # Its header is still listed: the session exists, it is just damaged.
    assert [h.id for h in store.list_headers()] == [session_id]
