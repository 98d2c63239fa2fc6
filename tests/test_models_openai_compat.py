"""OpenAICompatibleProvider through the real openai SDK against the scripted loopback server."""

from __future__ import annotations

import asyncio
import logging
import socket
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from fake_openai import (
    DROP,
    INVALID,
    STALL,
    FakeOpenAIServer,
    RawEvent,
    Reply,
    broken_reply,
    check_cancel_mid_stream,
    http_error,
    text_reply,
    tool_call_reply,
)

from dsh_jupyter.models import (
    Finish,
    ModelError,
    ModelRequest,
    OpenAICompatibleProvider,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    collect,
)
from dsh_jupyter.models.openai_compat import (
    chat_messages,
    chat_tool,
    parse_retry_after,
    redact,
    retry_delay,
)
from dsh_jupyter.session.messages import (
    assistant_message,
    text_block,
    tool_result_message,
    user_message,
)

SECRET = "sk-test-7f3a9c1e5b2d4f60"
BASH = ToolSpec("bash", "Run a bash command.", {"type": "object", "properties": {"command": {"type": "string"}},
                                                 "required": ["command"]})


def _request(text: str = "hello", **kwargs: Any) -> ModelRequest:
    return ModelRequest([user_message(text)], system="Be brief.", **kwargs)


def _provider(server: FakeOpenAIServer, **kwargs: Any) -> OpenAICompatibleProvider:
    kwargs.setdefault("api_key", SECRET)
    kwargs.setdefault("backoff", 0.0)
    return OpenAICompatibleProvider(server.base_url, "fake-model", **kwargs)


async def _cancel_after_request(server: FakeOpenAIServer, cancel: asyncio.Event) -> None:
    """Set ``cancel`` shortly after the server has received the request."""
    while not server.chat_requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    cancel.set()


async def _drain(provider: OpenAICompatibleProvider, request: ModelRequest, cancel: asyncio.Event | None = None
                 ) -> list[Any]:
    return [event async for event in provider.stream(request, cancel)]


async def test_streams_reasoning_text_and_usage(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(text_reply("Hel", "lo!", reasoning=["Think", "ing"],
                                 usage={"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37,
                                        "prompt_cache_hit_tokens": 16,
                                        "completion_tokens_details": {"reasoning_tokens": 2}}))
    provider = _provider(fake_openai)
    events = await _drain(provider, _request(tools=[BASH], max_tokens=50, temperature=0.2))
    await provider.close()
    assert events == [ReasoningDelta("Think"), ReasoningDelta("ing"), TextDelta("Hel"), TextDelta("lo!"),
                      Usage(30, 7, cache_read_tokens=16, reasoning_tokens=2), Finish("stop")]
    (sent,) = fake_openai.chat_requests
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.body["model"] == "fake-model" and sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
    assert sent.body["tools"] == [chat_tool(BASH)]
    assert sent.body["max_tokens"] == 50 and sent.body["temperature"] == 0.2


async def test_streams_tool_calls_with_split_arguments(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(tool_call_reply(("call_1", "bash", ['{"comm', 'and": "l', 's"}']),
                                      ("call_2", "bash", ['{"command": "pwd"}']), text=["Checking."]))
    provider = _provider(fake_openai)
    events = await _drain(provider, _request(tools=[BASH]))
    assert [e for e in events if isinstance(e, ToolCallDelta)] == [
        ToolCallDelta(0, "call_1", "bash", '{"comm'), ToolCallDelta(0, None, None, 'and": "l'),
        ToolCallDelta(0, None, None, 's"}'), ToolCallDelta(1, "call_2", "bash", '{"command": "pwd"}')]
    fake_openai.queue(tool_call_reply(("call_1", "bash", ['{"comm', 'and": "ls"}']), text=["Checking."]))
    blocks, usage, finish = await collect(provider.stream(_request(tools=[BASH])))
    await provider.close()
    assert blocks == [{"type": "text", "text": "Checking."},
                      {"type": "tool-call", "id": "call_1", "name": "bash", "arguments": '{"command": "ls"}'}]
    assert finish == "tool_calls" and usage == Usage(12, 5)


def _conversation() -> ModelRequest:
    """A neutral request with every block kind: text, reasoning, tool calls and results, a context message."""
    model = {"kind": "model", "provider": "deepseek", "model": "m"}
    context = user_message([text_block("## Background\n<referenced-sessions>\n[]\n</referenced-sessions>")],
                           source={"kind": "session-reference", "references": []})
    return ModelRequest([
        user_message([text_block("first line"), text_block("second line")]),
        assistant_message([{"type": "reasoning", "text": "old "}, {"type": "reasoning", "text": "thoughts"},
                           text_block("Looking."),
                           {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}], model),
        tool_result_message("c1", [text_block("a.txt"), text_block("b.txt")]),
        assistant_message([text_block("Two files.")], model),
        assistant_message([], model),  # an interrupted step: nothing to send
        user_message([{"type": "reasoning", "text": "not for the model"}]),  # no text: nothing to send
        context,
        user_message("now count them"),
        assistant_message([{"type": "reasoning", "text": "new thoughts"},
                           {"type": "tool-call", "id": "c2", "name": "bash", "arguments": ""}], model),
        tool_result_message("c2", [text_block("2")], is_error=True),
    ], tools=[BASH], system="Be brief.")


EXPECTED_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "first line\nsecond line"},
    {"role": "assistant", "content": "Looking.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"},
    {"role": "assistant", "content": "Two files."},
    {"role": "user", "content": "## Background\n<referenced-sessions>\n[]\n</referenced-sessions>"},
    {"role": "user", "content": "now count them"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "2"},
]


def test_chat_messages_converts_every_neutral_block_exactly() -> None:
    request = _conversation()
    assert chat_messages(request) == EXPECTED_CHAT
    with_reasoning = chat_messages(request, reasoning_replay=True)
    assert [m for m in with_reasoning if "reasoning_content" in m] == [
        dict(EXPECTED_CHAT[7], reasoning_content="new thoughts")]  # only steps since the last prompt
    assert [m.pop("reasoning_content", None) for m in with_reasoning].count(None) == len(EXPECTED_CHAT) - 1
    assert with_reasoning == EXPECTED_CHAT
    assert chat_messages(request, null_tool_call_content=False)[7]["content"] == ""
    assert chat_tool(BASH) == {"type": "function", "function": {
        "name": "bash", "description": "Run a bash command.", "parameters": dict(BASH.parameters)}}
    assert chat_messages(ModelRequest([])) == []


def test_deepseek_replays_reasoning_and_other_providers_do_not() -> None:
    request = _conversation()
    deepseek = OpenAICompatibleProvider("https://api.deepseek.com", "deepseek-reasoner", provider_name="deepseek")
    openai = OpenAICompatibleProvider("https://api.openai.com/v1", "gpt-4o", api_key_env="OPENAI_API_KEY")
    forced = OpenAICompatibleProvider("http://127.0.0.1:9/v1", "m", api_key_env=None, reasoning_replay=True)
    sent = deepseek.request_params(request)["messages"]
    assert sent[7]["reasoning_content"] == "new thoughts" and sent[2].get("reasoning_content") is None
    assert openai.request_params(request)["messages"] == EXPECTED_CHAT
    assert forced.request_params(request)["messages"][7]["reasoning_content"] == "new thoughts"
    assert deepseek.request_params(request)["tools"] == [chat_tool(BASH)]


def test_the_chat_completions_shape_is_built_in_one_module_only() -> None:
    from pathlib import Path

    import dsh_jupyter

    package = Path(dsh_jupyter.__file__).parent
    markers = ('"tool_call_id"', '"reasoning_content"', '"tool_calls":', '"role": "system"', '"role": "tool"',
               '"type": "function"')
    found = sorted(
        f"{path.relative_to(package)}: {marker}"
        for path in package.rglob("*.py") if path.name != "openai_compat.py"
        for marker in markers if marker in path.read_text("utf-8")
    )
    # ToolRegistry.openai_specs in tools/base.py is unused by the package; it goes when tools/ is next edited.
    assert [f for f in found if not f.startswith("tools/base.py:")] == []


def test_requests_refuse_chat_completions_messages() -> None:
    with pytest.raises(TypeError, match=r"ModelRequest\.system"):
        ModelRequest([{"role": "system", "content": "s"}])
    with pytest.raises(TypeError, match="tool-result"):
        ModelRequest([{"role": "tool", "tool_call_id": "c", "content": "x"}])
    with pytest.raises(TypeError, match="list of blocks"):
        ModelRequest([{"role": "user", "content": "plain string"}])


async def test_usage_reads_openai_cached_tokens(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(text_reply("ok", usage={"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103,
                                              "prompt_tokens_details": {"cached_tokens": 64}}))
    provider = _provider(fake_openai)
    _, usage, _ = await collect(provider.stream(_request()))
    await provider.close()
    assert usage == Usage(100, 3, cache_read_tokens=64)


async def test_usage_keeps_a_cost_the_provider_reports(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(text_reply("ok", usage={"prompt_tokens": 100, "completion_tokens": 3, "cost": 0.00042}))
    provider = _provider(fake_openai)
    _, usage, _ = await collect(provider.stream(_request()))
    await provider.close()
    assert usage == Usage(100, 3, cost=0.00042)
    assert usage is not None and usage.to_json()["cost"] == 0.00042


async def test_without_usage_chunk_no_usage_event(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(text_reply("ok", usage=None))
    provider = _provider(fake_openai, include_usage=False)
    events = await _drain(provider, _request())
    await provider.close()
    assert events == [TextDelta("ok"), Finish("stop")]
    assert "stream_options" not in fake_openai.chat_requests[0].body


async def test_401_is_not_retried_and_says_what_to_do(fake_openai: FakeOpenAIServer,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    fake_openai.queue(http_error(401, "Authentication Fails, Your api key is invalid"))
    provider = OpenAICompatibleProvider(fake_openai.base_url, "deepseek-v4-flash", provider_name="deepseek")
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    error = info.value
    assert (error.kind, error.status, error.retryable) == ("auth", 401, False)
    assert "$DEEPSEEK_API_KEY" in error.message and "--model offline" in error.message
    assert "HTTP 401" in error.message
    assert len(fake_openai.chat_requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(403, "auth"), (402, "auth"), (404, "config"), (400, "bad_request"),
                                              (422, "bad_request")])
async def test_other_client_errors_are_not_retried(fake_openai: FakeOpenAIServer, status: int, kind: str) -> None:
    fake_openai.queue(http_error(status, f"scripted {status}"))
    provider = _provider(fake_openai, max_retries=3)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    assert info.value.kind == kind and info.value.status == status and not info.value.retryable
    assert f"scripted {status}" in info.value.message
    assert len(fake_openai.chat_requests) == 1


async def test_429_and_5xx_are_retried_then_succeed(fake_openai: FakeOpenAIServer,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    fake_openai.queue(http_error(429, "slow down", retry_after="0.05"), http_error(500), http_error(503),
                      text_reply("finally"))
    retries: list[tuple[str, float, int]] = []
    provider = _provider(fake_openai, max_retries=3, backoff=0.01,
                         on_retry=lambda error, delay, number: retries.append((error.kind, delay, number)))
    with caplog.at_level(logging.WARNING, logger="dsh_jupyter.models"):
        blocks, _, finish = await collect(provider.stream(_request()))
    await provider.close()
    assert blocks == [{"type": "text", "text": "finally"}] and finish == "stop"
    assert len(fake_openai.chat_requests) == 4
    delays = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(delays) == 3
    assert "retrying in 0.05 s" in delays[0]  # Retry-After honoured
    assert "retrying in 0.02 s" in delays[1] and "retrying in 0.04 s" in delays[2]  # exponential backoff
    assert retries == [("rate_limit", 0.05, 1), ("server", 0.02, 2), ("server", 0.04, 3)]


async def test_retry_after_is_capped(fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    fake_openai.queue(http_error(429, retry_after="3600"), text_reply("ok"))
    provider = _provider(fake_openai, max_retry_after=0.01)
    with caplog.at_level(logging.WARNING, logger="dsh_jupyter.models"):
        await collect(provider.stream(_request()))
    await provider.close()
    assert any("retrying in 0.01 s" in r.getMessage() for r in caplog.records)


async def test_retries_exhausted_give_a_clear_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(http_error(503, "overloaded"), http_error(503, "overloaded"), http_error(503, "overloaded"))
    provider = _provider(fake_openai, max_retries=2)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    error = info.value
    assert (error.kind, error.status, error.retryable) == ("server", 503, True)
    assert "gave up after 3 attempts" in error.message and "overloaded" in error.message
    assert len(fake_openai.chat_requests) == 3


async def test_rate_limit_exhausted(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(http_error(429, retry_after="0"), http_error(429, retry_after="0"))
    provider = _provider(fake_openai, max_retries=1)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    assert info.value.kind == "rate_limit" and "gave up after 2 attempts" in info.value.message


async def test_a_429_that_gives_up_shows_the_wait_the_server_asked_for(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(http_error(429, "quota", retry_after="120"))
    provider = _provider(fake_openai, max_retries=0)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    assert "it asks to wait 120 s; try again then." in info.value.message


async def test_unreachable_endpoint_is_a_server_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{port}/v1", "m", api_key=SECRET, max_retries=1, backoff=0)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    assert info.value.kind == "server" and "could not reach" in info.value.message
    assert "gave up after 2 attempts" in info.value.message


async def test_dropped_stream_is_bad_stream_after_partial_output(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(broken_reply("Hel", "lo", marker=DROP))
    provider = _provider(fake_openai, max_retries=3)
    received: list[Any] = []
    with pytest.raises(ModelError) as info:
        async for event in provider.stream(_request()):
            received.append(event)
    await provider.close()
    assert received == [TextDelta("Hel"), TextDelta("lo")]
    assert info.value.kind == "bad_stream" and "broke off mid-answer" in info.value.message
    assert len(fake_openai.chat_requests) == 1  # a started stream is never retried


@pytest.mark.parametrize(("reply", "words"), [
    pytest.param(lambda: broken_reply("Hel", marker=INVALID), "not valid JSON", id="invalid-json-chunk"),
    pytest.param(lambda: Reply([{"content": "cut"}], finish_reason=None, usage=None),
                 "ended before the model finished", id="no-finish-reason"),
    pytest.param(lambda: Reply([{"content": "a"}, RawEvent({"error": {"message": "overloaded mid-stream"}})]),
                 "overloaded mid-stream", id="error-payload-inside"),
])
async def test_a_broken_stream_is_bad_stream(fake_openai: FakeOpenAIServer, reply: Callable[[], Any],
                                             words: str) -> None:
    fake_openai.queue(reply())
    provider = _provider(fake_openai)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    await provider.close()
    assert info.value.kind == "bad_stream" and words in info.value.message


async def test_cancel_mid_stream_returns_promptly_and_closes_the_connection(fake_openai: FakeOpenAIServer) -> None:
    provider = _provider(fake_openai)
    await check_cancel_mid_stream(fake_openai, provider, _request(), timeout=10)
    await provider.close()


async def test_cancel_while_waiting_for_the_first_chunk(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(Reply([STALL]))
    provider = _provider(fake_openai)
    cancel = asyncio.Event()

    canceller = asyncio.ensure_future(_cancel_after_request(fake_openai, cancel))
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(_drain(provider, _request(), cancel), timeout=10)
    await canceller
    assert info.value.kind == "cancelled"
    assert await asyncio.to_thread(fake_openai.disconnected.wait, 10)
    await provider.close()


async def test_cancel_during_retry_backoff(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(http_error(429, retry_after="60"), text_reply("never"))
    provider = _provider(fake_openai, max_retry_after=60)
    cancel = asyncio.Event()
    canceller = asyncio.ensure_future(_cancel_after_request(fake_openai, cancel))
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(_drain(provider, _request(), cancel), timeout=10)
    await canceller
    await provider.close()
    assert info.value.kind == "cancelled" and "retry" in info.value.message
    assert len(fake_openai.chat_requests) == 1


async def test_cancel_before_start_sends_nothing(fake_openai: FakeOpenAIServer) -> None:
    cancel = asyncio.Event()
    cancel.set()
    provider = _provider(fake_openai)
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request(), cancel)
    assert info.value.kind == "cancelled" and fake_openai.chat_requests == []


async def test_cancelling_the_consumer_task_closes_the_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(broken_reply("Hel", marker=STALL))
    provider = _provider(fake_openai)
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in provider.stream(_request()):
            first.set()

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(first.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake_openai.disconnected.wait, 10)
    await provider.close()


async def test_missing_key_names_the_variable_and_sends_nothing(fake_openai: FakeOpenAIServer) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "deepseek-v4-flash")
    with pytest.raises(ModelError) as info:
        await _drain(provider, _request())
    assert info.value.kind == "config"
    assert "$DEEPSEEK_API_KEY is not set" in info.value.message and "--model offline" in info.value.message
    assert fake_openai.requests == []


async def test_key_comes_from_the_environment_at_request_time(fake_openai: FakeOpenAIServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "m", api_key_env="MY_ENDPOINT_KEY")
    monkeypatch.setenv("MY_ENDPOINT_KEY", "key-one")
    await _drain(provider, _request())
    monkeypatch.setenv("MY_ENDPOINT_KEY", "key-two")
    await _drain(provider, _request())
    await provider.close()
    assert [r.headers["authorization"] for r in fake_openai.chat_requests] == ["Bearer key-one", "Bearer key-two"]


async def test_keyless_server(fake_openai: FakeOpenAIServer) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "m", api_key_env=None)
    blocks, _, _ = await collect(provider.stream(_request("ping")))
    await provider.close()
    assert blocks == [{"type": "text", "text": "echo: ping"}]
    assert provider.key_present() and provider.info.provider == "local-openai-compatible"


async def test_the_key_never_leaks(fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    echo = f"Incorrect API key provided: {SECRET} (Authorization: Bearer {SECRET})"
    fake_openai.queue(http_error(429, echo, retry_after="0"), http_error(401, echo), http_error(500, echo))
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for provider in (OpenAICompatibleProvider(fake_openai.base_url, "m", backoff=0),
                         OpenAICompatibleProvider(fake_openai.base_url, "m", api_key=SECRET, max_retries=0)):
            with pytest.raises(ModelError) as info:
                await _drain(provider, _request())
            error = info.value
            texts += [str(error), repr(error), "".join(traceback.format_exception(error)), repr(provider),
                      str(vars(provider))]
            await provider.close()
    texts.append(caplog.text)
    assert fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"
    for text in texts:
        assert SECRET not in text
        assert SECRET[:-4] not in text
    assert "***" in texts[0]


async def test_reasoning_field_of_other_servers(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(Reply([{"reasoning": "hmm"}, {"content": "ok"}]))
    provider = _provider(fake_openai)
    events = await _drain(provider, _request())
    await provider.close()
    assert events[:2] == [ReasoningDelta("hmm"), TextDelta("ok")]


def test_one_provider_serves_several_event_loops(fake_openai: FakeOpenAIServer) -> None:
    provider = _provider(fake_openai)
    for word in ("one", "two"):
        blocks, _, _ = asyncio.run(collect(provider.stream(_request(word))))
        assert blocks == [{"type": "text", "text": f"echo: {word}"}]
    asyncio.run(provider.close())


def test_info_and_repr() -> None:
    provider = OpenAICompatibleProvider()
    assert provider.info.provider == "deepseek" and provider.info.model == "deepseek-v4-flash"
    assert provider.info.context_window == 1_000_000
    assert "key from $DEEPSEEK_API_KEY" in repr(provider)
    custom = OpenAICompatibleProvider("http://127.0.0.1:9/v1", "my-model", api_key_env=None, context_window=4096)
    assert custom.info.context_window == 4096 and "keyless" in repr(custom)
    assert OpenAICompatibleProvider("https://api.openai.com/v1", "gpt-4o").info.provider == "openai"
    assert OpenAICompatibleProvider("https://example.org/v1", "mystery").info.context_window is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "api.deepseek.com"}, "base_url must be an http"),
        ({"model": " "}, "model must be a non-empty"),
        ({"context_window": 0}, "context_window must be a positive"),
        ({"api_key_env": ""}, "api_key_env must name"),
        ({"max_retries": -1}, "max_retries"),
        ({"backoff": -1}, "backoff"),
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ModelError, match=match) as info:
        OpenAICompatibleProvider(**kwargs)
    assert info.value.kind == "config"


def test_retry_helpers() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None and parse_retry_after(None) is None
    assert retry_delay(0, 0.5, None, 30) == 0.5 and retry_delay(3, 0.5, None, 30) == 4.0
    assert retry_delay(0, 0.5, 100, 30) == 30 and retry_delay(5, 0.5, None, 2) == 2
    assert redact("key sk-abcdef and Bearer xyz123", "sk-abcdef") == "key *** and Bearer ***"


def test_fake_server_non_stream_and_models(fake_openai: FakeOpenAIServer) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=fake_openai.base_url, api_key="k", max_retries=0)
    assert [m.id for m in client.models.list()] == ["fake-model"]
    fake_openai.queue(tool_call_reply(("c1", "bash", ['{"a"', ': 1}']), text=["Hi"]))
    completion = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "x"}])
    message = completion.choices[0].message
    assert message.content == "Hi" and message.tool_calls[0].function.arguments == '{"a": 1}'
    assert completion.usage is not None and completion.usage.total_tokens == 17
    client.close()


def test_tool_images_become_parts_of_a_user_message_after_the_tool_messages() -> None:
    from dsh_jupyter.models import ModelRequest
    from dsh_jupyter.models.openai_compat import chat_messages

    seen = {"type": "image", "artifact": "artifacts/a.png", "mediaType": "image/png", "width": 4, "height": 2,
            "bytes": 70, "tool": "python", "data": "aGVsbG8="}
    unseen = {key: value for key, value in seen.items() if key != "data"}
    call = {"type": "tool-call", "id": "c1", "name": "python", "arguments": "{}"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "plot"}]},
        {"role": "assistant", "content": [call, {**call, "id": "c2"}]},
        {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "isError": False,
                                      "content": [{"type": "text", "text": "fig"}, seen]}]},
        {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c2", "isError": False,
                                      "content": [unseen]}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    out = chat_messages(ModelRequest(messages))
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert out[2]["content"] == ("fig\n[PNG image, 4×2 pixels, 70 bytes: sent in the next message as the image "
                                 "output of tool call c1 (python).]")
    assert out[3]["content"].startswith("[Image from the `python` tool: PNG image, 4×2 pixels, 70 bytes")
    assert out[4]["content"] == [
        {"type": "text", "text": "The image output of tool call c1 (python): PNG image, 4×2 pixels, 70 bytes."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
    ]


def test_the_catalog_decides_image_input_unless_the_provider_is_told() -> None:
    from dsh_jupyter.models.openai_compat import OpenAICompatibleProvider

    assert OpenAICompatibleProvider("http://127.0.0.1:9/v1", "gpt-4o", api_key="k").info.accepts_images
    assert not OpenAICompatibleProvider("http://127.0.0.1:9/v1", "deepseek-chat", api_key="k").info.accepts_images
    assert not OpenAICompatibleProvider("http://127.0.0.1:9/v1", "gpt-4o", api_key="k",
                                        accepts_images=False).info.accepts_images
