"""Reading one log into catalog facts: full reads agree with the store, incremental reads with full reads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from catalog_helpers import BASE, add_turn, make_session, title_event

from dsh_jupyter._json import dumpb
from dsh_jupyter.catalog.logs import LogRead, read_appended, read_full, stat_log
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
