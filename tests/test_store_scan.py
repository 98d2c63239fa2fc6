"""The JSONL scanner: block-wise line reading, and the fast surface path agreeing with the full load."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from store_helpers import append_turn, compact, new_header, raw_lines, write_session

from dsh_jupyter._json import dumpb
from dsh_jupyter.session import SessionCorruptError, SessionLog
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store import scan as scan_module
from dsh_jupyter.store.scan import _Lines, scan_surface


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 20])
def test_lines_are_read_whole_across_blocks(block: int) -> None:
    lines = [b"a", b"", b"x" * 200, b"\xe6\x95\xb0", b"y" * 5]
    data = b"\n".join(lines) + b"\ntorn"
    reader = _Lines(io.BytesIO(data), 0, block)
    got = [(buf[s:e], off) for buf, s, e, off in reader]
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    assert got == list(zip(lines, offsets, strict=True))
    assert reader.torn == 4


def _store_with(tmp_path: Path, records: list[dict[str, Any] | bytes], session_id: str = "s") -> JsonlStore:
    store = JsonlStore(tmp_path / "sessions")
    header = new_header(session_id)
    path = store.log_path(session_id)
    path.parent.mkdir(parents=True)
    body = [r if isinstance(r, bytes) else dumpb(r) for r in records]
    path.write_bytes(b"\n".join([dumpb(header.to_json()), *body, b""]))
    return store


def _written(tmp_path: Path) -> tuple[JsonlStore, SessionLog]:
    store = JsonlStore(tmp_path / "sessions")
    header = new_header("s")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        for turn in range(1, 5):
            append_turn(log, turn, title=True)
        compact(log, 5, last=-3)
        append_turn(log, 5)
    return store, log


def test_lines_in_another_key_order_are_read_in_full(tmp_path: Path) -> None:
    store, log = _written(tmp_path)
    lines = raw_lines(store, "s")
    rng = random.Random(7)
    for index in range(1, len(lines) - 1):
        if rng.random() < 0.5:
            record = json.loads(lines[index])
            keys = list(record)
            rng.shuffle(keys)
            lines[index] = json.dumps({k: record[k] for k in keys}, ensure_ascii=False).encode()
    store.log_path("s").write_bytes(b"\n".join(lines))
    assert store.read_surface("s").events == log.surface()
    assert store.read_title("s") == log.title()
    assert store.load("s").events == log.events


def test_fast_path_decodes_only_the_surface_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, log = _written(tmp_path)
    decoded: list[Any] = []
    real = scan_module.events_from_record

    def counting(record: Any) -> Any:
        decoded.append(record)
        return real(record)

    monkeypatch.setattr(scan_module, "events_from_record", counting)
    snapshot = store.read_surface("s")
    assert snapshot.events == log.surface()
    assert len(decoded) == len(log.surface()), "shadowed and log-only lines are never decoded"
    decoded.clear()
    assert store.read_title("s") == log.title()
    assert len(decoded) == 1


def test_packed_chunk_rows_count_their_members(tmp_path: Path) -> None:
    user = {"type": "user/message", "seq": 0, "time": 1,
            "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "role": "user",
                     "id": "u"},
            "surfaceOp": "append"}
    packed = {"type": "text-chunks", "seq0": 1, "time0": 2,
              "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 2, 3], "texts": ["a", "b", "c", "d"]}}
    tool = {"type": "tool-call-chunks", "seq0": 5, "time0": 9,
            "data": {"turn": 1, "step": 1, "index": 1, "dt": [], "id": "c", "args": ["{}"]}}
    answer = {"type": "assistant/message", "seq": 6, "time": 9,
              "data": {"turn": 1, "step": 1,
                       "message": {"role": "assistant", "content": [{"type": "text", "text": "abcd"}],
                                   "source": {"kind": "model"}, "id": "a"}},
              "sourceEventSeqs": [1, 2, 3, 4], "surfaceOp": "append"}
    store = _store_with(tmp_path, [user, packed, tool, answer])
    snapshot = store.read_surface("s")
    assert [e.seq for e in snapshot.events] == [0, 6] and snapshot.captured_through_seq == 6
    log = store.load("s")
    assert [e.seq for e in log.events] == list(range(7))
    assert [e.data["chunk"]["text"] for e in log.events[1:5]] == ["a", "b", "c", "d"]
    assert [e.time for e in log.events[1:5]] == [2, 3, 5, 8]


def test_nested_surface_keys_do_not_fool_the_fast_path(tmp_path: Path) -> None:
    trap = {"surfaceOp": {"op": "replace", "start": 0, "end": 0}, "sourceEventSeqs": [0]}
    message = {"content": [{"type": "text", "text": ',"surfaceOp":"append"}'}], "source": {"kind": "user"},
               "role": "user", "id": "u", "meta": trap}
    records = [
        {"type": "user/message", "seq": 0, "time": 1, "data": message, "surfaceOp": "append"},
        {"type": "request/context", "seq": 1, "time": 1, "data": trap},
        {"type": "user/message", "seq": 2, "time": 1, "data": {**message, "id": "v"}, "surfaceOp": "append"},
        {"type": "user/message", "seq": 3, "time": 1, "data": {**message, "id": "w", "meta": {"surfaceOp": "append"}},
         "sourceEventSeqs": [0, 2], "surfaceOp": {"op": "replace", "start": 0, "end": 2}},
    ]
    store = _store_with(tmp_path, records)
    assert [e.seq for e in store.read_surface("s").events] == [3]
    assert store.load("s").surface() == store.read_surface("s").events


@pytest.mark.parametrize("seed", range(60))
def test_fast_and_full_reads_agree_on_damaged_logs(tmp_path: Path, seed: int) -> None:
    """Cut, drop or garble a random line: both paths either agree or both reject the log."""
    store = JsonlStore(tmp_path / "sessions")
    written = write_session(store, "s", turns=3)
    lines = raw_lines(store, "s")
    rng = random.Random(seed)
    index = rng.randrange(1, len(lines) - 1)
    action = rng.choice(["cut", "drop", "garble"])
    if action == "cut":
        lines[index] = lines[index][: rng.randrange(1, len(lines[index]))]
    elif action == "drop":
        del lines[index]
    else:
        lines[index] = b"{" + lines[index]
    store.log_path("s").write_bytes(b"\n".join(lines))
    outcomes = []
    for read in (lambda: store.load("s").surface(), lambda: store.read_surface("s").events):
        try:
            outcomes.append(read())
        except Exception as exc:
            outcomes.append((type(exc), getattr(exc, "line", None)))
    assert outcomes[0] == outcomes[1], (action, index)
    assert written.header.id == "s"


def test_scan_surface_reports_committed_bytes(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    write_session(store, "s", turns=1)
    path = store.log_path("s")
    size = path.stat().st_size
    with open(path, "ab") as fh:
        fh.write(b'{"type":"turn/start"')
    with open(path, "rb") as fh:
        result = scan_surface(fh, str(path))
    assert result.committed_bytes == size and result.torn_bytes == len(b'{"type":"turn/start"')


@pytest.mark.parametrize("block", [1, 3, 7, 16, 64, 1 << 20])
@pytest.mark.parametrize("torn", [b"", b"tail", b"t" * 40])
def test_overlong_lines_come_out_as_markers_with_exact_offsets(block: int, torn: bytes) -> None:
    from dsh_jupyter.store.scan import OVERLONG

    rng = random.Random(block)
    lines = [b"x" * rng.choice([0, 1, 9, 10, 11, 25, 100]) for _ in range(40)]
    data = b"\n".join(lines) + b"\n" + torn
    reader = _Lines(io.BytesIO(data), 0, block, max_line=10)
    got = [(buf is OVERLONG, buf[s:e] if buf is not OVERLONG else e - s, off) for buf, s, e, off in reader]
    expected, pos = [], 0
    for line in lines:
        expected.append((True, len(line), pos) if len(line) > 10 else (False, line, pos))
        pos += len(line) + 1
    assert got == expected
    assert reader.torn == len(torn)


def test_an_endless_line_is_read_in_bounded_pieces() -> None:
    class Endless(io.RawIOBase):
        """A stream that never ends and never holds a newline (like /dev/zero); counts the largest read."""

        def __init__(self, limit: int) -> None:
            self.left, self.largest = limit, 0

        def readable(self) -> bool:
            return True

        def seek(self, offset: int, whence: int = 0) -> int:
            return 0

        def read(self, size: int = -1) -> bytes:
            self.largest = max(self.largest, size)
            size = min(size, self.left)
            self.left -= size
            return b"\0" * size

    stream = Endless(40 << 20)
    reader = _Lines(stream, 0, 1 << 16, max_line=1 << 20)  # type: ignore[arg-type]
    assert list(reader) == []
    assert reader.torn == 40 << 20
    assert stream.largest <= (1 << 20) + 1
    with pytest.raises(SessionCorruptError, match="longer than"):
        scan_module.read_header(Endless(1 << 30), "endless")  # type: ignore[arg-type]


# -- cheap validation of skipped lines ----------------------------------------------------------------------
# The surface read checks that each log-only line it skips is JSON without decoding it (simdjson, with our
# decoder settling whatever simdjson refuses). These cases hold the damage that only a JSON check can see
# (the envelope prefix, the seq and the closing brace all look right) and the valid lines simdjson refuses.

def _user(seq: int) -> dict[str, Any]:
    return {"type": "user/message", "seq": seq, "time": 1,
            "data": {"content": [{"type": "text", "text": f"prompt {seq}"}], "source": {"kind": "user"},
                     "role": "user", "id": f"u{seq}"}, "surfaceOp": "append"}


_CONTEXT = b'{"type":"request/context","seq":1,"time":1,"data":{"provider":"p","model":"m","meta":%s}}'
_PACKED_ROW = (b'{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],'
               b'"texts":["a","b",%s]}}')
_DAMAGED = {  # each stands for the meta value (context line) or the last text piece (packed row)
    "cut after an inner brace": (b'{"a":{"b":1}', False),
    "bad UTF-8 in a string": (b'"\xff\xfe"', False),
    "a control character in a string": (b'"a\x01b"', False),
    "nested past the decoder's depth": (b"[" * 3000 + b"]" * 3000, False),
    "two lines run together": (b'"torn{"type":"turn/start","seq":1,"time":1,"data":{"turn":1}}', False),
    "a lone surrogate escape": (b'"\\ud800"', True),
    "an integer past 64 bits": (b"123456789012345678901234567890", True),
    "plain": (b'"fine"', True),
}


def _line_with(kind: str, value: bytes) -> bytes:
    if kind == "context":
        return _CONTEXT % value
    if value.startswith(b"{"):  # the packed row's pieces are strings: put the damage in one
        value = b'"x",' + value
    return _PACKED_ROW % value


@pytest.mark.parametrize("where", ["before a completed turn", "in the crash tail"])
@pytest.mark.parametrize("kind", ["context", "packed"])
@pytest.mark.parametrize("case", sorted(_DAMAGED))
def test_skipped_lines_are_judged_exactly_as_a_full_decode_judges_them(tmp_path: Path, case: str, kind: str,
                                                                       where: str) -> None:
    value, valid = _DAMAGED[case]
    line = _line_with(kind, value)
    members = 1 if kind == "context" else 3
    after = members + 1
    tail = [dumpb(_user(after)),
            dumpb({"type": "turn/end", "seq": after + 1, "time": 1, "data": {"turn": 1,
                                                                            "reason": {"kind": "completed"}}})]
    records: list[dict[str, Any] | bytes] = [_user(0), line, *(tail if where.startswith("before") else [])]
    store = _store_with(tmp_path, records)
    path = store.log_path("s")
    with open(path, "rb") as fh:
        try:
            full = scan_module.scan_events(fh, str(path))
        except SessionCorruptError as exc:
            full_error = exc
        else:
            full_error = None
    with open(path, "rb") as fh:
        try:
            fast = scan_surface(fh, str(path))
        except SessionCorruptError as exc:
            assert full_error is not None, f"{case}: only the surface read refused the log"
            assert (exc.line, str(exc)) == (full_error.line, str(full_error))
            assert not valid and where.startswith("before") and exc.line == 2
            return
    assert full_error is None, f"{case}: the surface read missed damage the full decode refuses"
    assert (fast.committed_bytes, fast.tail_line, fast.next_seq) == (full.committed_bytes, full.tail_line,
                                                                      full.next_seq)
    assert [e.seq for e in fast.surface] == [e.seq for e in full.events if e.surface_op is not None]
    if valid:
        assert fast.tail_line is None
    else:
        assert fast.tail_line == 2 and fast.committed_bytes < path.stat().st_size
        assert fast.tail_reason == full.tail_reason


@pytest.mark.parametrize("dt", [b"1,,2", b",1,2", b"1,2,", b'1,"2"', b"1,2.5", b"1,-2", b"1, 2"])
def test_a_small_packed_row_with_a_strange_dt_list_is_judged_as_a_full_decode_judges_it(tmp_path: Path,
                                                                                       dt: bytes) -> None:
    """The member count of a packed row reads its ``dt`` list without checking it is JSON: a row of up to 64 KiB
    is checked right after, so an empty entry, a string or a fraction never makes the count (and the seqs after
    it) differ from what decoding the row says."""
    row = (b'{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[%s],'
           b'"texts":["a","b","c"]}}') % dt
    done = dumpb({"type": "turn/end", "seq": 4, "time": 1, "data": {"turn": 1, "reason": {"kind": "completed"}}})
    store = _store_with(tmp_path, [_user(0), row, dumpb(_user(3)), done])
    path = store.log_path("s")
    outcomes = []
    for read in (scan_module.scan_events, scan_surface):
        with open(path, "rb") as fh:
            try:
                found = read(fh, str(path))
            except SessionCorruptError as exc:
                outcomes.append(("corrupt", exc.line, str(exc)))
            else:
                outcomes.append(("read", found.tail_line, found.next_seq))
    assert outcomes[0] == outcomes[1]


def test_skipped_lines_are_never_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The surface read parses only what it returns: a log-only line is checked, not decoded."""
    store, log = _written(tmp_path)
    parsed: list[bytes] = []
    real = scan_module.loads

    def counting(data: bytes | str) -> Any:
        parsed.append(bytes(data) if isinstance(data, (bytes, bytearray)) else data.encode())
        return real(data)

    monkeypatch.setattr(scan_module, "loads", counting)
    assert store.read_surface("s").events == log.surface()
    assert len(parsed) == len(log.surface()), "only the surviving surface lines are parsed"
    assert all(b'"surfaceOp"' in line for line in parsed)
