"""A session's cost from its model calls' usage: unknown stays unknown, free is free, a mix is a lower bound."""

from __future__ import annotations

import io
import json

import pytest

from dsh_jupyter.conversation.spend import (
    Spend,
    line_usage,
    spend_by_turn,
    spend_of_events,
    spend_of_lines,
    spend_of_log,
    usages_in,
    usages_in_file,
)
from dsh_jupyter.conversation.usage import TokenUsage, usage_cost
from dsh_jupyter.session import Event


def calls(*costs: float | None) -> Spend:
    spend = Spend()
    for cost in costs:
        spend = spend.add({"inputTokens": 1} if cost is None else {"inputTokens": 1, "cost": cost})
    return spend


@pytest.mark.parametrize(("costs", "shown"), [
    ((), ""),  # no model call at all
    ((None, None), ""),  # calls, none priced: nothing shown, never $0
    ((0.0, 0), "free"),  # every priced call was free (a self-hosted model priced at 0)
    ((0.0012, 0.003), "$0.0042"),
    ((1.0, 0.27), "$1.27"),
    ((0.0012, None, 0.003), "≥ $0.0042"),  # a mix: the known sum, marked as a lower bound
    ((0.0, None), "≥ $0"),
    ((1234.5,), "$1,234.50"),
])
def test_the_shown_total_says_what_is_known(costs: tuple[float | None, ...], shown: str) -> None:
    spend = calls(*costs)
    assert spend.text() == shown
    assert spend.known == (shown != "")
    record = spend.to_json()
    if shown:
        assert record is not None and record["text"] == shown
        assert Spend.from_json(json.loads(json.dumps(record))) == Spend(round(spend.usd, 10), spend.priced,
                                                                           spend.unpriced)
    else:
        assert record is None


@pytest.mark.parametrize("usage", [None, "x", {}, {"cost": None}, {"cost": "0.1"}, {"cost": True}, {"cost": -1},
                                   {"cost": float("nan")}, {"cost": float("inf")}])
def test_a_bad_cost_counts_as_unknown_everywhere(usage: object) -> None:
    assert usage_cost(usage) is None
    assert Spend().add(usage) == Spend(0.0, 0, 1)
    if isinstance(usage, dict):  # the turn footer's sum follows the same rule
        assert TokenUsage().add(usage).cost is None


def test_from_json_refuses_what_to_json_never_writes() -> None:
    for record in (None, [], {"usd": -1, "pricedCalls": 1, "unpricedCalls": 0},
                   {"usd": 1, "pricedCalls": True, "unpricedCalls": 0}, {"usd": 1, "pricedCalls": 1}):
        assert Spend.from_json(record) == Spend()


def _line(kind: str, seq: int, data: object) -> bytes:
    return json.dumps({"type": kind, "seq": seq, "time": 0, "data": data}).encode()


def test_only_assistant_messages_count_whatever_other_lines_say() -> None:
    lines = [
        _line("user/message", 0, {"text": "\"assistant/message\" {\"cost\": 5}"}),
        _line("assistant/message", 1, {"turn": 1, "step": 1, "usage": {"cost": 0.5}}),
        _line("tool/result", 2, {"type": "assistant/message", "usage": {"cost": 7}}),
        _line("assistant/message", 3, {"turn": 1, "step": 2}),  # no usage reported
        b'{"type":"assistant/message","seq":4,"da',  # a torn last line
        _line("assistant/message", 5, {"turn": 2, "step": 1, "usage": {"cost": 0.25}}),
    ]
    assert line_usage(lines[0]) is None and line_usage(lines[2]) is None and line_usage(lines[4]) is None
    assert line_usage(lines[1]) == (1, {"cost": 0.5})
    assert spend_of_lines(lines) == Spend(0.75, 2, 1)
    pairs = [found for line in lines if (found := line_usage(line)) is not None]
    assert list(spend_by_turn(pairs)) == [(1, Spend(0.5, 1, 1)), (2, Spend(0.25, 1, 0))]
    assert list(spend_by_turn([])) == []


def test_decoded_events_and_in_memory_logs_use_the_same_rule() -> None:
    events = [Event("assistant/message", 0, 0, {"turn": 1, "usage": {"cost": 0.1}}, "append"),
              Event("tool/result", 1, 0, {"usage": {"cost": 9}}, "append"),
              Event("assistant/message", 2, 0, {"turn": 1}, "append")]
    assert spend_of_events(events) == Spend(0.1, 1, 1)

    class Log:
        def __init__(self) -> None:
            self.events = events

    assert spend_of_log(Log()) == Spend(0.1, 1, 1)
    assert spend_of_log(object()) == Spend()


def _encoded(data: dict[str, object]) -> bytes:
    from dsh_jupyter.store.jsonl import encode_event

    return encode_event(Event("assistant/message", 7, 1, data, "append"), 7).rstrip(b"\n")


@pytest.mark.parametrize("data", [
    {"turn": 3, "step": 1, "message": {"role": "assistant", "content": []}, "usage": {"cost": 0.5}},  # the loop's
    {"turn": 3, "step": 1, "usage": {"cost": 0.5, "inputTokens": 1}, "message": {"role": "assistant"}},
    {"turn": 3, "message": {"role": "assistant", "source": {"usage": {"cost": 9}}}},  # nested: not the call's
    {"turn": 3, "message": {"role": "assistant", "source": {"usage": {"cost": 9}}}, "usage": {"cost": 0.5}},
    {"turn": 3, "message": {"role": "assistant", "content": [{"type": "text", "text": "\"usage\":{\"cost\":9}}"}]}},
    {"turn": 3, "step": 2, "message": {"role": "assistant"}},  # no usage reported
])
def test_the_fast_line_reading_agrees_with_decoding_the_whole_line(data: dict[str, object]) -> None:
    line = _encoded(data)
    expected = (3, data.get("usage"))
    assert line_usage(line) == expected
    assert list(usages_in(b"\n".join([_line("tool/result", 1, {"x": "y" * 100}), line, b""]))) == [expected]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_a_file_read_in_chunks_gives_the_same_calls_as_reading_it_whole(chunk: int) -> None:
    lines = [_line("assistant/message", seq, {"turn": seq // 3, "usage": {"cost": seq / 100}}) if seq % 2 else
             _line("tool/result", seq, {"text": "x" * (seq * 13)}) for seq in range(40)]
    log = b"\n".join(lines)  # the last line has no line feed (a log cut mid-write)
    whole = list(usages_in(log))
    assert len(whole) == 20
    assert list(usages_in_file(io.BytesIO(log), chunk)) == whole
    assert list(usages_in_file(io.BytesIO(log + b"\n"), chunk)) == whole
    assert list(usages_in_file(io.BytesIO(b""), chunk)) == []
