"""Surface folding: append, positional replace (compaction), repeated compaction, and invalid ops."""

from __future__ import annotations

from typing import Any

import pytest
from store_helpers import new_header

from dsh_jupyter.session import (
    Event,
    ReplaceOp,
    SessionFormatError,
    SessionLog,
    SurfaceFold,
    event_from_json,
    fold_surface,
)
from dsh_jupyter.session.messages import compaction_source, text_block, user_message


def say(log: SessionLog, text: str) -> int:
    return log.append("user/message", user_message(text)).seq


def checkpoint(log: SessionLog, start: int, end: int, shadowed: list[int], name: str = "c") -> int:
    begin = log.append("compaction/start", {"compactionId": name, "turn": None}).seq
    summary = log.append("compaction/summary", {"compactionId": name, "summary": name}).seq
    seq = log.append("user/message", user_message([text_block(name)], compaction_source(name)),
                     surface_op=ReplaceOp(start, end), source_event_seqs=[begin, summary, *shadowed]).seq
    log.append("compaction/end", {"compactionId": name, "turn": None})
    return seq


def texts(log: SessionLog) -> list[str]:
    return [e.data["content"][0]["text"] for e in log.surface()]


def test_append_only_surface_keeps_every_message_in_order() -> None:
    log = SessionLog(new_header())
    seqs = [say(log, t) for t in "abc"]
    log.append("turn/start", {"turn": 1})  # log-only events never reach the surface
    assert [e.seq for e in log.surface()] == seqs
    assert log.snapshot().captured_through_seq == 3


def test_compaction_shadows_exactly_the_replaced_run() -> None:
    log = SessionLog(new_header())
    a, b, c, d, e = (say(log, t) for t in "abcde")
    fold = SurfaceFold()
    for seq in (a, b, c, d, e):
        fold.apply(seq, "append")
    shadowed = fold.apply(99, ReplaceOp(b, d), [b, c, d])
    assert shadowed == [b, c, d]
    assert fold.seqs == [a, 99, e]

    x = checkpoint(log, b, d, [b, c, d], "X")
    assert texts(log) == ["a", "X", "e"]
    assert [ev.seq for ev in log.surface()] == [a, x, e]
    assert len(log.events) == x + 2, "shadowed messages stay in the log"


def test_events_after_compaction_follow_the_checkpoint() -> None:
    log = SessionLog(new_header())
    first = [say(log, t) for t in "ab"]
    checkpoint(log, first[0], first[-1], first, "X")
    say(log, "c")
    say(log, "d")
    assert texts(log) == ["X", "c", "d"]


def test_repeated_compaction_with_a_positional_range() -> None:
    """As in ``compacted.jsonl``: the second range starts at the first checkpoint, whose seq is larger
    than the seq of the range's last node."""
    log = SessionLog(new_header())
    turn1 = [say(log, t) for t in ("t1a", "t1b")]
    turn2 = [say(log, t) for t in ("t2a", "t2b")]
    c1 = checkpoint(log, turn1[0], turn1[-1], turn1, "C1")
    assert texts(log) == ["C1", "t2a", "t2b"]
    say(log, "t3")
    c2 = checkpoint(log, c1, turn2[-1], [c1, *turn2], "C2")
    assert c1 > turn2[-1]
    assert texts(log) == ["C2", "t3"]
    say(log, "t4")
    assert texts(log) == ["C2", "t3", "t4"]
    # Only the latest lineage is left: nothing shadowed by C1 or C2 comes back.
    assert not {*turn1, *turn2, c1} & {e.seq for e in log.surface()}
    assert [e.seq for e in fold_surface(log.events)] == [e.seq for e in log.surface()]
    assert c2 in [e.seq for e in log.surface()]


@pytest.mark.parametrize(
    ("op", "cited", "needle"),
    [
        (ReplaceOp(0, 7), [0, 1, 2], "not on the current surface"),  # 7 is not a surface node
        (ReplaceOp(2, 0), [0, 1, 2], "backwards"),
        (ReplaceOp(0, 2), [0, 2], "must cite every shadowed seq"),
        (ReplaceOp(0, 2), None, "must cite every shadowed seq"),
    ],
)
def test_invalid_replace_ops_are_rejected(op: ReplaceOp, cited: list[int] | None, needle: str) -> None:
    log = SessionLog(new_header())
    for t in "abc":
        say(log, t)
    before = [e.seq for e in log.surface()]
    with pytest.raises(SessionFormatError, match=needle):
        log.append("user/message", user_message("x"), surface_op=op, source_event_seqs=cited)
    assert [e.seq for e in log.surface()] == before and len(log) == 3


def test_replacing_a_shadowed_seq_is_rejected() -> None:
    log = SessionLog(new_header())
    a, b, c = (say(log, t) for t in "abc")
    checkpoint(log, a, b, [a, b], "X")
    with pytest.raises(SessionFormatError, match="not on the current surface"):
        log.append("user/message", user_message("y"), surface_op=ReplaceOp(a, c), source_event_seqs=[a, c])


def test_citing_a_later_seq_is_rejected() -> None:
    log = SessionLog(new_header())
    say(log, "a")
    with pytest.raises(SessionFormatError, match="later seq"):
        log.append("user/message", user_message("b"), source_event_seqs=[5])


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ({"type": "user/message", "seq": 0, "time": 1, "data": {}}, "need a surfaceOp"),
        ({"type": "turn/start", "seq": 0, "time": 1, "data": {}, "surfaceOp": "append"}, "cannot carry"),
        ({"type": "user/message", "seq": 0, "time": 1, "data": {}, "surfaceOp": "prepend"}, "invalid surfaceOp"),
        ({"type": "user/message", "seq": 0, "time": 1, "data": {},
          "surfaceOp": {"op": "replace", "start": -1, "end": 0}}, "invalid surfaceOp"),
        ({"type": "user/message", "seq": 0, "time": 1, "data": {}, "surfaceOp": "append",
          "sourceEventSeqs": ["1"]}, "sourceEventSeqs"),
        ({"type": "user/message", "seq": 0, "time": 1, "data": {}, "surfaceOp": "append", "extra": 1},
         "unknown key"),
    ],
)
def test_invalid_surface_envelopes_are_rejected(record: dict[str, Any], needle: str) -> None:
    with pytest.raises(SessionFormatError, match=needle):
        event_from_json(record)


def test_later_spelling_of_replace_ranges_is_read() -> None:
    event = event_from_json({"type": "user/message", "seq": 3, "time": 1, "data": {},
                             "surfaceOp": {"op": "replace", "startSeq": 0, "endSeq": 2},
                             "sourceEventSeqs": [0, 1, 2]})
    assert event.surface_op == ReplaceOp(0, 2)
    assert isinstance(event, Event)
