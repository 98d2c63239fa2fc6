"""The model seam: request validation, stream events, errors and collect()."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from dsh_jupyter.models import (
    BlockCollector,
    Finish,
    ModelError,
    ModelInfo,
    ModelProvider,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    collect,
)
from dsh_jupyter.session.messages import assistant_message, tool_result_message, user_message


async def _events(*events: StreamEvent) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


async def test_collect_assembles_blocks_in_stream_order() -> None:
    blocks, usage, finish = await collect(_events(
        ReasoningDelta("Let me "), ReasoningDelta("look."),
        TextDelta("Reading "), TextDelta("the test."),
        ToolCallDelta(0, "call_a", "bash", '{"comm'), ToolCallDelta(1, "call_b", "python", '{"code"'),
        ToolCallDelta(0, None, None, 'and": "ls"}'), ToolCallDelta(1, None, None, ': "1"}'),
        Usage(10, 4, cache_read_tokens=3), Finish("tool_calls"),
    ))
    assert blocks == [
        {"type": "reasoning", "text": "Let me look."},
        {"type": "text", "text": "Reading the test."},
        {"type": "tool-call", "id": "call_a", "name": "bash", "arguments": '{"command": "ls"}'},
        {"type": "tool-call", "id": "call_b", "name": "python", "arguments": '{"code": "1"}'},
    ]
    assert usage == Usage(10, 4, 3, None)
    assert finish == "tool_calls"


async def test_collect_starts_a_new_block_when_the_kind_changes_back() -> None:
    blocks, usage, finish = await collect(_events(
        TextDelta("a"), ReasoningDelta("r"), TextDelta(""), TextDelta("b"), Finish("stop")))
    assert blocks == [{"type": "text", "text": "a"}, {"type": "reasoning", "text": "r"}, {"type": "text", "text": "b"}]
    assert usage is None and finish == "stop"


async def test_collect_propagates_stream_errors() -> None:
    async def broken() -> AsyncIterator[StreamEvent]:
        yield TextDelta("partial")
        raise ModelError("bad_stream", "the connection broke off")

    with pytest.raises(ModelError) as info:
        await collect(broken())
    assert info.value.kind == "bad_stream"


def test_request_validation_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="purpose"):
        ModelRequest([], purpose="chat")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session message dicts"):
        ModelRequest("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[1\] must be a session message dict"):
        ModelRequest([user_message("hi"), "oops"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="ToolSpec"):
        ModelRequest([], tools=[{"name": "bash"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="system"):
        ModelRequest([], system=["not", "text"])  # type: ignore[arg-type]
    assert ModelRequest([{"role": "user", "content": [{"text": "no type"}, "junk"]}])  # unknown blocks: skipped
    request = ModelRequest([user_message("hi")], tools=[ToolSpec("bash", "Run")], system="Be brief.")
    assert request.tool_names() == ["bash"] and request.purpose == "turn" and request.system == "Be brief."


def test_session_messages_are_requests_as_they_are() -> None:
    model = {"kind": "model", "provider": "offline", "model": "offline"}
    messages = [user_message("hi"), assistant_message([{"type": "tool-call", "id": "c", "name": "bash",
                                                        "arguments": "{}"}], model),
                tool_result_message("c", [{"type": "text", "text": "ok"}])]
    assert list(ModelRequest(messages).messages) == messages


def test_providers_satisfy_the_protocol() -> None:
    from dsh_jupyter.models import OfflineModel, OpenAICompatibleProvider

    assert isinstance(OfflineModel(), ModelProvider)
    assert isinstance(OpenAICompatibleProvider(), ModelProvider)
    assert not isinstance(object(), ModelProvider)


async def test_block_collector_names_calls_without_an_id() -> None:
    collector = BlockCollector()
    for event in (ToolCallDelta(0, None, "bash", "{}"), TextDelta("x"), ToolCallDelta(1, "", "python", "")):
        collector.add(event)
    assert [b.get("id") for b in collector.blocks("call_7_1_")] == ["call_7_1_0", None, "call_7_1_1"]


def test_usage_to_json_uses_session_field_names() -> None:
    assert Usage(2841, 61, cache_read_tokens=1920).to_json() == {
        "inputTokens": 2841, "outputTokens": 61, "cacheReadTokens": 1920}
    assert Usage(1, 2, reasoning_tokens=5).to_json() == {"inputTokens": 1, "outputTokens": 2, "reasoningTokens": 5}


def test_model_info_source() -> None:
    assert ModelInfo("deepseek", "deepseek-v4-flash", 1_000_000).source() == {
        "kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"}


def test_model_error_kinds_and_pickling() -> None:
    error = ModelError("rate_limit", "slow down", status=429, retryable=True)
    assert str(error) == "slow down" and error.status == 429 and error.retryable
    assert "rate_limit" in repr(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.message, copy.status, copy.retryable) == ("rate_limit", "slow down", 429, True)
    with pytest.raises(ValueError, match="unknown ModelError kind"):
        ModelError("oops", "x")


def test_importing_models_does_not_import_openai() -> None:
    code = ("import sys, dsh_jupyter.models, dsh_jupyter.models.registry; "
            "from dsh_jupyter.models import resolve_model, OfflineModel; resolve_model('offline'); "
            "resolve_model('deepseek'); print(sorted(m for m in ('openai', 'httpx2', 'httpx') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
