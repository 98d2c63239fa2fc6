"""Reading one log into catalog facts: full reads agree with the store, incremental reads with full reads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from catalog_helpers import BASE, add_turn, make_session, title_event

from dsh_jupyter._json import dumpb
from dsh_jupyter.catalog import logs
from dsh_jupyter.catalog.bodies import body_cost
from dsh_jupyter.catalog.logs import LogRead, LogStat, read_appended, read_full, stat_log
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references.projection import project_surface
from dsh_jupyter.session import ReplaceOp
from dsh_jupyter.session.messages import user_message
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.paths import session_folder_name

FIXTURES = ["plain", "compacted", "referencing", "torn", "corrupt"]


def facts_of(store: JsonlStore, session_id: str) -> LogRead:
    path = str(store.log_path(session_id))
    stat = stat_log(path)
    assert stat is not None
    facts = read_full(path, session_folder_name(session_id), stat)
    assert facts is not None
    return facts


def continued(store: JsonlStore, session_id: str, before: LogRead) -> LogRead | None:
    path = str(store.log_path(session_id))
    stat = stat_log(path)
    assert stat is not None
    return read_appended(path, before.record, stat)


def same_state(a: LogRead, b: LogRead) -> None:
    assert a.record == b.record


@pytest.mark.parametrize("name", FIXTURES)
def test_full_reads_of_the_reference_fixtures_agree_with_the_store(tmp_path: Path, spec_fixtures: Path,
                                                                   name: str) -> None:
    expected = json.loads((spec_fixtures / f"{name}.expected.json").read_text())
    session_id = expected["header"]["id"]
    store = JsonlStore(tmp_path)
    store.folder(session_id).mkdir(parents=True)
    shutil.copy(spec_fixtures / f"{name}.jsonl", store.log_path(session_id))
    facts = facts_of(store, session_id)
    query = SessionQuery(store)
    assert facts.record.session_id == session_id and facts.record.cwd == expected["header"]["cwd"]
    if expected.get("rejected"):
        with pytest.raises(ValueError):
            query.title(session_id)
        record = facts.record
        assert record.title is None and not record.readable and record.committed is None and facts.bodies == []
        return
    assert facts.record.title == query.title(session_id) == expected["latestTitle"]["title"]
    assert facts.record.events == expected["rawEventCount"] and facts.record.committed == expected["committedBytes"]
    projected = project_surface(store.read_surface(session_id))
    assert facts.bodies == [m.text for m in projected.messages]
    assert facts.bodies == [m["text"] for m in expected["projection"]["conversation"]]
    assert facts.record.user_messages + facts.record.assistant_messages == len(expected["projection"]["conversation"])
    assert facts.record.surface == len(expected["surface"])


def test_logs_the_store_would_not_list_are_not_indexed(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "real")
    path = str(store.log_path("real"))
    stat = stat_log(path)
    assert stat is not None
    assert read_full(path, "not-its-folder", stat) is None  # copied into the wrong folder
    assert read_full(str(tmp_path / "missing" / "session.jsonl"), "missing", stat) is None
    assert stat_log(tmp_path / "missing" / "session.jsonl") is None
    (tmp_path / "headerless").mkdir()
    (tmp_path / "headerless" / "session.jsonl").write_bytes(b'{"type":"session"')
    assert read_full(str(tmp_path / "headerless" / "session.jsonl"), "headerless", stat) is None


def test_a_title_that_is_not_text_reads_as_no_title(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "odd", title="first")
    log, writer = store.open("odd")
    with writer:
        title_event(log, ["not", "a", "string"])
    assert facts_of(store, "odd").record.title is None is SessionQuery(store).title("odd")


def test_appended_turns_continue_the_previous_read(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "grow", title="first")
    before = facts_of(store, "grow")
    log, writer = store.open("grow")
    with writer:
        add_turn(log, 2, prompt="second prompt about tensors", answer="second answer")
        log.append("turn/start", {"turn": 3}, ignorable=False)
        log.append("x-future/event", {"anything": 1}, ignorable=True)  # readers that do not know it skip it
        title_event(log, "second title")
        log.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    after = continued(store, "grow", before)
    assert after is not None and not after.full
    same_state(after, facts_of(store, "grow"))
    assert after.record.title == "second title" and after.bodies == ["second prompt about tensors", "Let me look.",
                                                              "second answer"]


def test_a_torn_tail_is_left_for_later(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "torn", title="first")
    before = facts_of(store, "torn")
    record = {"type": "session/title", "seq": before.record.next_seq, "time": BASE,
              "data": {"title": "half written", "messageSeqs": [], "source": {"kind": "user"}}}
    line = dumpb(record)
    with open(store.log_path("torn"), "ab") as fh:
        fh.write(line[:20])
    mid = continued(store, "torn", before)
    assert mid is not None and mid.record.title == "first" and mid.record.committed == before.record.committed
    same_state(mid, facts_of(store, "torn"))
    with open(store.log_path("torn"), "ab") as fh:
        fh.write(line[20:] + b"\n")
    done = continued(store, "torn", mid)
    assert done is not None and done.record.title == "half written"
    same_state(done, facts_of(store, "torn"))


def rewrite(store: JsonlStore, session_id: str, change: str) -> None:
    path = store.log_path(session_id)
    data = path.read_bytes()
    if change == "replaced":  # same bytes, new file (new inode)
        os.unlink(path)
        path.write_bytes(data)
    elif change == "cut":
        path.write_bytes(data[: len(data) // 2])
    elif change == "edited":  # same length, an earlier byte changed
        at = data.rindex(b'"answer 1"')
        path.write_bytes(data[:at] + b'"ANSWER 1"' + data[at + 10 :])
    elif change == "bad-line":
        path.write_bytes(data + b'{"type":"turn/start","seq":999,"time":1,"data":{}}\n')
    elif change == "unknown-type":
        seq = facts_of(store, session_id).record.next_seq
        path.write_bytes(data + dumpb({"type": "x/new", "seq": seq, "time": 1, "data": {}}) + b"\n")
    elif change == "compaction":
        log, writer = store.open(session_id)
        with writer:
            surface = [e.seq for e in log.surface()]
            log.append("user/message", user_message("checkpoint", {"kind": "plugin", "plugin": "compact",
                                                                   "compactionId": "c"}),
                       surface_op=ReplaceOp(surface[0], surface[-1]), source_event_seqs=surface)


@pytest.mark.parametrize("change", ["replaced", "cut", "edited", "bad-line", "unknown-type", "compaction"])
def test_changes_an_incremental_read_cannot_follow_need_a_full_read(tmp_path: Path, change: str) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "s", turns=2, title="t")
    before = facts_of(store, "s")
    rewrite(store, "s", change)
    assert continued(store, "s", before) is None


def test_an_unreadable_log_is_never_continued(tmp_path: Path, spec_fixtures: Path) -> None:
    expected = json.loads((spec_fixtures / "corrupt.expected.json").read_text())
    store = JsonlStore(tmp_path)
    session_id = expected["header"]["id"]
    store.folder(session_id).mkdir(parents=True)
    shutil.copy(spec_fixtures / "corrupt.jsonl", store.log_path(session_id))
    before = facts_of(store, session_id)
    with open(store.log_path(session_id), "ab") as fh:
        fh.write(b"\n")
    assert continued(store, session_id, before) is None


def compacted_session(store: JsonlStore, session_id: str) -> None:
    """Turns with big tool output (a log far bigger than its text), then a compaction over most of them."""
    make_session(store, session_id, turns=1, title="t")
    log, writer = store.open(session_id)
    with writer:
        for turn in range(2, 7):
            add_turn(log, turn, prompt=f"prompt {turn} about tensors", tool_output="x" * 20_000)
        surface = [e.seq for e in log.surface()]
        log.append("user/message", user_message("checkpoint of the story", {"kind": "plugin", "plugin": "compact",
                                                                          "compactionId": "c"}),
                   surface_op=ReplaceOp(surface[0], surface[-4]), source_event_seqs=surface[:-3])
        add_turn(log, 7, prompt="after the compaction")


def test_a_log_bigger_than_the_cap_is_folded_line_by_line_to_the_same_facts(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonlStore(tmp_path)
    compacted_session(store, "big")
    whole = facts_of(store, "big")  # the default cap: the surface is decoded at once
    path = str(store.log_path("big"))
    stat = stat_log(path)
    assert stat is not None and stat.size > 100_000
    asked: list[bool] = []
    original = logs.scan_surface

    def spying(*args: Any, **kw: Any) -> Any:
        asked.append(bool(kw.get("want_surface", True)))
        return original(*args, **kw)

    monkeypatch.setattr(logs, "scan_surface", spying)
    folded = read_full(path, session_folder_name("big"), stat, body_cap=50_000)
    assert folded is not None and asked == [False]  # the surface is never held in memory at once
    assert folded.record == whole.record and folded.bodies == whole.bodies
    assert "checkpoint of the story" in folded.bodies and "prompt 2 about tensors" not in folded.bodies


@pytest.mark.parametrize("cap", [0, 5, 40, 100])
def test_the_cap_bounds_the_text_of_both_ways_of_reading(tmp_path: Path, cap: int) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "s", turns=4, title="t")
    path = str(store.log_path("s"))
    stat = stat_log(path)
    assert stat is not None
    small = read_full(path, "s", stat, body_cap=10**9)
    assert small is not None
    for read in (read_full(path, "s", stat, body_cap=cap), _streamed(path, stat, cap)):
        assert read is not None
        assert sum(body_cost(t) for t in read.bodies) == read.record.body_bytes <= cap
        assert read.record.body_truncated
        assert read.record.user_messages == small.record.user_messages  # counts never depend on the cap
        joined = "\n\n".join(small.bodies)
        assert "\n\n".join(read.bodies) == joined[: len("\n\n".join(read.bodies))]  # a prefix of the text


def _streamed(path: str, stat: LogStat, cap: int) -> LogRead | None:
    """``read_full`` forced onto the line-by-line path (a log reported bigger than the cap)."""
    return read_full(path, "s", LogStat(cap + 10**9, stat.mtime_ns, stat.ino), body_cap=cap)


def test_appended_text_stops_at_the_cap(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    make_session(store, "grow", title="first")
    first = facts_of(store, "grow")
    cap = first.record.body_bytes + 20
    log, writer = store.open("grow")
    with writer:
        add_turn(log, 2, prompt="a prompt longer than twenty bytes", answer="never indexed")
    path = str(store.log_path("grow"))
    stat = stat_log(path)
    assert stat is not None
    after = read_appended(path, first.record, stat, body_cap=cap)
    assert after is not None and after.record.body_truncated and after.record.body_bytes <= cap
    assert after.bodies == ["a prompt longer th"]  # 20 bytes: 18 of text and the blank line before it
    assert after.record.user_messages == 2 and after.record.assistant_messages == 4
