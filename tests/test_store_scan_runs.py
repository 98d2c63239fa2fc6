"""The surface read's cheaper steps: surviving lines read in runs, marker lines proven by their own pattern,
and lists of seqs checked in bulk. Each must give exactly the verdicts of the step it replaced."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from store_helpers import append_turn, compact, new_header, raw_lines

from dsh_jupyter._json import dumpb
from dsh_jupyter.session import SessionCorruptError, SessionFormatError, SessionLog, fold_surface
from dsh_jupyter.session.events import event_from_json
from dsh_jupyter.session.header import is_safe_nonnegative_int, safe_nonnegative_ints
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store import scan as scan_module
from dsh_jupyter.store.scan import STREAM_SURFACE, fold_lines, scan_events, scan_surface, surface_of


class _Int(int):
    pass


_SEQ_LISTS: list[list[Any]] = [
    [], [0], [1, 2, 3], [2**53 - 1], [2**53], [-1], [0, -1], [True], [1, False], [3.0], [1, 2.0],
    [-0.0], [0.0], [1.5], [math.inf], [math.nan], ["1"], [None], [[1]], [_Int(4)], [2**53 - 1, 0, 7],
    list(range(10_000)), [*range(100), -5],
]


@pytest.mark.parametrize("values", _SEQ_LISTS, ids=repr)
def test_a_list_of_seqs_gets_the_verdict_of_checking_each_item(values: list[Any]) -> None:
    expected = tuple(int(v) for v in values) if all(is_safe_nonnegative_int(v) for v in values) else None
    got = safe_nonnegative_ints(values)
    assert got == expected
    assert got is None or all(type(v) is int for v in got)


@pytest.mark.parametrize("values", _SEQ_LISTS, ids=repr)
def test_an_event_refuses_the_same_cited_lists_as_before(values: list[Any]) -> None:
    record = {"type": "user/message", "seq": 2**53 - 1, "time": 1, "data": {}, "surfaceOp": "append",
              "sourceEventSeqs": values}
    valid = all(is_safe_nonnegative_int(v) for v in values)
    if valid:
        assert event_from_json(record).source_event_seqs == tuple(int(v) for v in values)
    else:
        with pytest.raises(SessionFormatError, match="sourceEventSeqs"):
            event_from_json(record)


def test_a_cited_value_that_is_not_a_list_is_refused() -> None:
    for raw in ({"a": 1}, "1,2", 3, None):
        with pytest.raises(SessionFormatError, match="sourceEventSeqs"):
            event_from_json({"type": "user/message", "seq": 1, "time": 1, "data": {}, "surfaceOp": "append",
                             "sourceEventSeqs": raw})


# -- surviving lines read in runs ----------------------------------------------------------------------------
def _long_session(tmp_path: Path, turns: int = 12) -> tuple[JsonlStore, SessionLog]:
    store = JsonlStore(tmp_path / "sessions")
    header = new_header("s")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        for turn in range(1, turns + 1):
            append_turn(log, turn, title=turn % 3 == 0)
        compact(log, turns + 1, last=-4)
        for turn in range(turns + 2, turns + 6):
            append_turn(log, turn)
    return store, log


@pytest.mark.parametrize(("gap", "window"), [(0, 1), (0, 1 << 20), (1 << 20, 1), (200, 700), (1 << 20, 1 << 20)])
def test_runs_of_any_shape_give_the_surface_line_by_line_reads_give(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     gap: int, window: int) -> None:
    store, log = _long_session(tmp_path)
    monkeypatch.setattr(scan_module, "READ_GAP", gap)
    monkeypatch.setattr(scan_module, "READ_WINDOW", window)
    assert store.read_surface("s").events == log.surface()
    path = store.log_path("s")
    with open(path, "rb") as fh:
        full = scan_events(fh, str(path))
    assert store.read_surface("s").events == fold_surface(full.events)


def test_one_read_serves_neighbouring_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, log = _long_session(tmp_path)
    reads: list[int] = []
    real = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        reads.append(length)
        return real(fd, length, offset)

    monkeypatch.setattr(os, "pread", counting)
    assert store.read_surface("s").events == log.surface()
    assert 1 <= len(reads) < len(log.surface())  # survivors sit close together: far fewer reads than lines


def test_skipped_survivors_are_kept_as_they_are_between_runs(tmp_path: Path) -> None:
    store, log = _long_session(tmp_path)
    skip = frozenset({"assistant/message"})
    events = store.read_surface("s", skip_data=skip).events
    assert [e.seq for e in events] == [e.seq for e in log.surface()]
    for got, want in zip(events, log.surface(), strict=True):
        assert got.data == (None if want.type == "assistant/message" else want.data)


@pytest.mark.parametrize("which", [0, 1, -1])
def test_a_surviving_line_damaged_inside_a_run_names_its_own_line(tmp_path: Path, which: int) -> None:
    """Damage inside the data of a surviving line (prefix and tail intact) is found when the run is decoded:
    the error names that line, exactly as a read of that line alone did."""
    store, _log = _long_session(tmp_path)
    path = store.log_path("s")
    with open(path, "rb") as fh:
        state = fold_lines(fh, str(path))
    seq = state.nodes[which]
    offset, _length, line_no = state.locations[seq]
    data = bytearray(path.read_bytes())
    inside = data.index(b'"data":', offset) + len(b'"data":')
    data[inside] = ord("[")  # the data object now opens a list it never closes: not JSON, same length
    path.write_bytes(bytes(data))
    with pytest.raises(SessionCorruptError) as caught, open(path, "rb") as fh:
        surface_of(fh, str(path), state)
    assert caught.value.line == line_no
    with open(path, "rb") as fh:  # the streamed surface (one line a read) says the same
        lazy = surface_of(fh, str(path), state, stream=True).surface
        with pytest.raises(SessionCorruptError) as streamed:
            list(lazy)
    assert streamed.value.line == line_no and str(streamed.value) == str(caught.value)


def test_a_file_cut_under_a_run_is_a_corrupt_line_not_a_short_event(tmp_path: Path) -> None:
    store, _log = _long_session(tmp_path)
    path = store.log_path("s")
    with open(path, "rb") as fh:
        state = fold_lines(fh, str(path))
    last = state.nodes[-1]
    offset, length, line_no = state.locations[last]
    with open(path, "r+b") as fh:
        fh.truncate(offset + length // 2)
    with pytest.raises(SessionCorruptError) as caught, open(path, "rb") as fh:
        surface_of(fh, str(path), state)
    assert caught.value.line == line_no


# -- marker lines ----------------------------------------------------------------------------------------------
_MARKERS: dict[str, tuple[bytes, bool]] = {  # the data (and the envelope's closing brace), and is it JSON
    "turn": (b'{"turn":1}}', True),
    "turn and step": (b'{"turn":1,"step":2}}', True),
    "reason": (b'{"turn":1,"reason":{"kind":"completed"}}}', True),
    "longest kind": (b'{"turn":1,"step":9999999999999999,"reason":{"kind":"' + b"a" * 32 + b'"}}}', True),
    "kind past 32": (b'{"turn":1,"reason":{"kind":"' + b"a" * 40 + b'"}}}', True),
    "one brace too many": (b'{"turn":1,"step":2}}}', False),
    "one brace short": (b'{"turn":1,"step":2}', False),
    "leading zero": (b'{"turn":01}}', False),
    "stray comma": (b'{"turn":1,}}', False),
    "more keys": (b'{"turn":1,"step":2,"x":[1,2]}}', True),
    "padding": (b'{"turn":1 , "step":2}}', True),
    "garbage between": (b'{"turn":1}x}', False),
}


@pytest.mark.parametrize("kind", ["step/start", "step/end", "turn/start"])
@pytest.mark.parametrize("case", sorted(_MARKERS))
def test_marker_lines_are_judged_exactly_as_a_full_decode_judges_them(tmp_path: Path, case: str, kind: str) -> None:
    rest, valid = _MARKERS[case]
    line = b'{"type":"%s","seq":1,"time":1,"data":' % kind.encode() + rest
    user = {"type": "user/message", "seq": 0, "time": 1,
            "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "role": "user",
                     "id": "u0"}, "surfaceOp": "append"}
    store = JsonlStore(tmp_path / "sessions")
    path = store.log_path("s")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join([dumpb(new_header("s").to_json()), dumpb(user), line, b""]))
    with open(path, "rb") as fh:
        full = scan_events(fh, str(path))
    for skip in (frozenset(), frozenset({STREAM_SURFACE})):
        with open(path, "rb") as fh:
            fast = scan_surface(fh, str(path), skip_data=skip)
        assert (fast.committed_bytes, fast.tail_line, fast.tail_reason, fast.next_seq) == (
            full.committed_bytes, full.tail_line, full.tail_reason, full.next_seq)
    assert (full.tail_line is None) == valid, raw_lines(store, "s")
