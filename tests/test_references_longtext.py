"""Long strings left undecoded (store/longline.py, session/longtext.py): a reference to a huge message reads it a
piece at a time and comes out exactly as a full decode would make it, on friendly and hostile lines alike."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter._json import dumpb, loads
from dsh_jupyter.references.bounded import BoundedProjection, bound_surface
from dsh_jupyter.references.projection import PROJECTION_SKIPS
from dsh_jupyter.references.retention import retain_source
from dsh_jupyter.references.spill import capped_transcript_pieces
from dsh_jupyter.session import SessionCorruptError, SessionHeader
from dsh_jupyter.session import longtext as longtext_module
from dsh_jupyter.session.longtext import LongText, RawString, piece_cut
from dsh_jupyter.session.projection import LongMessage, project_long_event
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store import longline as longline_module
from dsh_jupyter.store import scan as scan_module
from dsh_jupyter.store.longline import RAW_LONG_STRINGS, long_record
from dsh_jupyter.store.scan import STREAM_SURFACE

_PIECES = ["plain words ", "<tag>", '"quoted"', "\\", "\n", "\x01", "界", "😀", "naïve ", "\ud800", "\udc00",
           "\ud83d", "\ude00", "é"]


def random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(size))


def as_json(text: str, *, ascii_only: bool) -> bytes:
    """``text`` as a JSON string literal: the way our writer writes it, or with every non-ASCII character escaped
    (so astral characters become surrogate pair escapes, the cut the pieces must never split)."""
    if ascii_only:
        return json.dumps(text, ensure_ascii=True).encode()
    return dumpb(text)


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long lines and strings a few kilobytes long, pieces of odd sizes: every boundary case in a fast test."""
    monkeypatch.setattr(longline_module, "LONG_STRING_BYTES", 1500)
    monkeypatch.setattr(longline_module, "LONG_LINE_BYTES", 2000)
    monkeypatch.setattr(scan_module, "LONG_LINE_BYTES", 2000)
    monkeypatch.setattr(longtext_module, "PIECE_BYTES", 97)


# -- pieces -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("ascii_only", [False, True])
def test_pieces_join_to_the_full_decode(seed: int, ascii_only: bool) -> None:
    rng = random.Random(seed)
    text = random_text(rng, rng.randint(0, 400))
    literal = as_json(text, ascii_only=ascii_only)
    expected = loads(literal)
    raw = RawString.checked(literal, 1, len(literal) - 1, piece=rng.choice([1, 2, 5, 7, 13, 64]))
    assert raw is not None
    assert raw.text() == expected
    assert "".join(reversed(list(raw.pieces_from_end()))) == expected
    assert LongText(["a", raw, "\n", "", raw]).text() == "a" + expected + "\n" + expected


def test_a_cut_never_splits_an_escape_a_character_or_a_surrogate_pair() -> None:
    literal = json.dumps("a😀b\\" + "é" + "\n", ensure_ascii=True).encode()[1:-1]  # a\ud83d\ude00b\\\u00e9\n
    cuts = {piece_cut(literal, at, 0) for at in range(1, len(literal))}
    assert cuts <= {None, 1, 13, 14, 16, 22}
    assert piece_cut("xé".encode(), 2, 0) == 1  # inside a UTF-8 sequence: back to its start
    assert piece_cut(b"\x80\x80\x80\x80\x80", 4, 0) is None  # not UTF-8


# -- long lines -----------------------------------------------------------------------------------------------
def _line(seq: int, data: dict[str, Any], *, op: bool = True) -> bytes:
    record: dict[str, Any] = {"type": "user/message", "seq": seq, "time": 1, "data": data}
    if op:
        record["surfaceOp"] = "append"
    return dumpb(record)


def _user(text_literal: bytes, **extra: Any) -> bytes:
    """A user/message line whose one text block holds ``text_literal`` (JSON as given: any escapes, any damage)."""
    meta = dumpb(extra)[1:-1]
    return (b'{"type":"user/message","seq":0,"time":1,"data":{"content":[{"type":"text","text":' + text_literal
            + b'}],"source":{"kind":"user"},"role":"user","id":"u"' + (b"," + meta if meta else b"")
            + b'},"surfaceOp":"append"}')


def _write(tmp_path: Path, lines: list[bytes]) -> JsonlStore:
    store = JsonlStore(tmp_path / "sessions")
    header = SessionHeader.new("/w", session_id="s")
    path = store.log_path("s")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join([dumpb(header.to_json()), *lines, b""]))
    return store


def _read(store: JsonlStore, raw: bool) -> Any:
    flags = {STREAM_SURFACE, RAW_LONG_STRINGS} if raw else {STREAM_SURFACE}
    return list(store.read_surface("s", skip_data=PROJECTION_SKIPS | flags).events)


def _outcome(store: JsonlStore, raw: bool) -> Any:
    try:
        return _read(store, raw)
    except SessionCorruptError as exc:
        return (type(exc), str(exc), exc.line)


@pytest.mark.usefixtures("small_limits")
def test_a_long_text_is_left_raw_and_projects_to_the_same_text(tmp_path: Path) -> None:
    text = random_text(random.Random(1), 900)
    store = _write(tmp_path, [_user(as_json(text, ascii_only=True), note="short")])
    (event,) = _read(store, raw=True)
    (block,) = event.data["content"]
    assert isinstance(block["text"], RawString) and event.data["note"] == "short"
    message = project_long_event(event)
    (plain,) = _read(store, raw=False)
    assert plain.data["content"][0]["text"] == loads(as_json(text, ascii_only=True))
    assert isinstance(message, LongMessage) and message.text.text() == plain.data["content"][0]["text"]


def _projection_facts(bounded: BoundedProjection) -> Any:
    retained = retain_source(bounded, "label", bounded.budget)
    pieces, capped = capped_transcript_pieces(bounded, "label", bounded.spill_bytes)
    return (list(bounded.text_bytes), list(bounded.json_sizes), bytes(bounded.flags),
            [(h.utf8_bytes, h.text, h.head, h.tail) for h in bounded.held.values()],
            [(p.role, p.text, p.whole) for p in bounded.spill], bounded.total_text_bytes,
            None if retained is None else (retained.serialized, retained.stats), b"".join(pieces), capped)


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("seed", range(12))
def test_references_to_long_messages_are_identical_either_way(tmp_path: Path, seed: int) -> None:
    """Retained text, cut points, statistics and the spill are byte for byte those of a full decode, whichever
    budget and spill cap (the text kept whole, cut, or spilled in part)."""
    rng = random.Random(seed)
    ascii_only = seed % 2 == 1
    lines = []
    for seq in range(4):
        texts = [random_text(rng, rng.choice([5, 900, 1400])) for _ in range(rng.randint(1, 3))]
        blocks = b",".join(b'{"type":"text","text":' + as_json(t, ascii_only=ascii_only) + b"}" for t in texts)
        kind = b"user/message" if seq % 2 == 0 else b"assistant/message"
        if kind == b"user/message":
            data = b'{"content":[' + blocks + b'],"source":{"kind":"user"},"role":"user","id":"u%d"}' % seq
        else:
            data = (b'{"turn":1,"step":1,"message":{"role":"assistant","content":[' + blocks
                    + b'],"source":{"kind":"model"},"id":"a%d"}}' % seq)
        lines.append(b'{"type":"' + kind + b'","seq":%d,"time":1,"data":' % seq + data + b',"surfaceOp":"append"}')
    store = _write(tmp_path, lines)
    budget = rng.choice([300, 2000, 20000])
    spill = rng.choice([16 * 1024, 1500, 100_000])
    facts = []
    for raw in (False, True):
        flags = {STREAM_SURFACE, RAW_LONG_STRINGS} if raw else {STREAM_SURFACE}
        snapshot = store.read_surface("s", skip_data=PROJECTION_SKIPS | flags)
        facts.append(_projection_facts(bound_surface(snapshot, budget, spill)))
    assert facts[0] == facts[1]


_TEXT = ("words " * 400).encode()


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("damage", [
    b'"' + _TEXT + b'\\u12"',  # cut inside an escape
    b'"' + _TEXT + b'\\',  # the line cut inside an escape: the string never closes
    b'"' + _TEXT + b'\xff\xfe' + _TEXT + b'"',  # bad UTF-8 inside the long string
    b'"' + _TEXT + b'\xe6\x95' + b'"',  # a UTF-8 sequence cut short at the string's end
    b'"' + _TEXT + b'\x01' + _TEXT + b'"',  # a raw control character
    b'"' + _TEXT + b'\\q' + _TEXT + b'"',  # an escape JSON does not have
    b'"' + _TEXT + b'"x',  # junk after the string
])
@pytest.mark.parametrize("then_turn_end", [False, True])
def test_damage_inside_a_long_string_is_judged_as_a_full_decode_judges_it(tmp_path: Path, damage: bytes,
                                                                           then_turn_end: bool) -> None:
    lines = [_user(damage)]
    if then_turn_end:
        lines.append(b'{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}')
    store = _write(tmp_path, lines)
    assert _outcome(store, raw=True) == _outcome(store, raw=False)


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("where", ["meta", "key", "source", "op", "reasoning", "tool args", "id"])
def test_a_long_string_in_an_unexpected_place_reads_as_a_full_decode_reads_it(tmp_path: Path, where: str) -> None:
    long = json.dumps("😀 long " * 300, ensure_ascii=where == "meta")
    parts = {
        "meta": _user(b'"hi"', meta={"note": json.loads(long)}),
        "key": _user(b'"hi"', meta={json.loads(long): 1}),
        "source": _user(b'"hi"').replace(b'{"kind":"user"}', long.encode()),
        "op": _user(b'"hi"').replace(b'"surfaceOp":"append"', b'"surfaceOp":' + long.encode()),
        "reasoning": _user(b'"hi"').replace(b'[{"type":"text"', b'[{"type":"reasoning","text":' + long.encode()
                                            + b'},{"type":"text"'),
        "tool args": _user(b'"hi"').replace(b'[{"type":"text"', b'[{"type":"tool-call","id":"c","name":"n",'
                                            b'"arguments":' + long.encode() + b'},{"type":"text"'),
        "id": _user(b'"hi"').replace(b'"id":"u"', b'"id":' + long.encode()),
    }
    store = _write(tmp_path, [parts[where]])
    raw, plain = _outcome(store, raw=True), _outcome(store, raw=False)
    if isinstance(plain, tuple):
        assert raw == plain
        return
    assert [project_long_event(e) for e in raw] == [project_long_event(e) for e in plain]
    bounded = [_projection_facts(bound_surface(store.read_surface("s", skip_data=PROJECTION_SKIPS | flags), 500,
                                               16 * 1024))
               for flags in ({STREAM_SURFACE}, {STREAM_SURFACE, RAW_LONG_STRINGS})]
    assert bounded[0] == bounded[1]


@pytest.mark.usefixtures("small_limits")
def test_a_marker_spelled_in_the_line_itself_makes_it_decode_in_full() -> None:
    text = b'"' + _TEXT + b'"'
    line = _user(text)
    record = long_record(line)
    assert record is not None
    nonce = longline_module._NONCE
    forged = _user(text, meta=f"\u0000dsh-raw-{nonce}-0")
    assert long_record(forged) is None  # the marker would be found twice


def test_short_lines_and_lines_without_long_strings_decode_as_usual() -> None:
    assert long_record(_line(0, {"content": [{"type": "text", "text": "short"}]})) is None
    assert long_record(b"not json at all") is None


@pytest.mark.usefixtures("small_limits")
def test_the_fold_cache_never_hands_raw_strings_to_a_reader_that_did_not_ask(tmp_path: Path) -> None:
    from dsh_jupyter.catalog.folds import FoldCache

    store = _write(tmp_path, [_user(b'"' + _TEXT + b'"')])
    cache = FoldCache(racy_ns=0)
    (first,) = list(cache.read_surface(store, "s", skip_data=PROJECTION_SKIPS | {STREAM_SURFACE, RAW_LONG_STRINGS})
                    .events)
    assert isinstance(first.data["content"][0]["text"], RawString)
    for skip in (set(), {STREAM_SURFACE}):
        (event,) = list(cache.read_surface(store, "s", skip_data=PROJECTION_SKIPS | skip).events)
        assert event.data["content"][0]["text"] == loads(b'"' + _TEXT + b'"'), skip
    # A reader that asked for raw strings may be served the decoded text another reader left in the cache.
    (last,) = list(cache.read_surface(store, "s", skip_data=PROJECTION_SKIPS | {STREAM_SURFACE, RAW_LONG_STRINGS})
                   .events)
    assert isinstance(last.data["content"][0]["text"], (str, RawString))
    assert (cache.stats.full, cache.stats.unchanged) == (1, 3)  # one fold serves every way of decoding it
