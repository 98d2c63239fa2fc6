"""The agent loop through the real ``openai`` client against a local chat-completions server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from fake_openai import (  # the fake_openai fixture itself comes from tests/conftest.py
    DROP,
    STALL,
    FakeOpenAIServer,
    broken_reply,
    http_error,
    text_reply,
    tool_call_reply,
)

from dsh_jupyter.agent import Agent, AgentConfig
from dsh_jupyter.models.openai_compat import OpenAICompatibleProvider
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry


class Upper(Tool):
    name = "upper"
    description = "Upper-case a text."

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        return ToolOutput(arguments["text"].upper())


def make(tmp_path: Path, server: FakeOpenAIServer, **kwargs: Any) -> Agent:
    provider = OpenAICompatibleProvider(server.base_url, "fake-model", api_key="sk-test-secret-value",
                                        context_window=64_000, max_retries=2, backoff=0.01)
    tools = ToolRegistry()
    tools.register(Upper())
    config = AgentConfig(model_titles=False)
    return Agent.create(JsonlStore(tmp_path / "s"), provider, cwd=str(tmp_path), tools=tools, config=config, **kwargs)


async def test_streamed_text_reasoning_and_tool_calls(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(
        tool_call_reply(("call_a", "upper", ['{"te', 'xt": "shout"}']), text=["Let me ", "shout."]),
        text_reply("It says ", "SHOUT.", reasoning=["The tool ", "returned SHOUT."]),
    )
    agent = make(tmp_path, fake_openai)
    result = await agent.send("make it loud")
    assert result.reason == "completed" and result.text == "It says SHOUT."
    messages = [e for e in agent.session.events if e.type == "assistant/message"]
    first = messages[0].data["message"]["content"]
    assert first[0] == {"type": "text", "text": "Let me shout."}
    assert first[1]["type"] == "tool-call" and first[1]["arguments"] == '{"text": "shout"}'
    second = messages[1].data["message"]["content"]
    assert second[0] == {"type": "reasoning", "text": "The tool returned SHOUT."}
    assert messages[1].data["usage"]["inputTokens"] == 12
    body = fake_openai.chat_requests[1].body
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "call_a", "content": "SHOUT"}
    assert body["tools"][0]["function"]["name"] == "upper"
    assert fake_openai.chat_requests[0].headers["authorization"] == "Bearer sk-test-secret-value"
    log = (Path(agent.locate().path)).read_text()
    assert "sk-test-secret-value" not in log


async def test_deepseek_gets_its_reasoning_back_within_a_tool_using_turn(tmp_path: Path,
                                                                        fake_openai: FakeOpenAIServer) -> None:
    thinking = tool_call_reply(("call_a", "upper", ['{"text": "x"}']))
    thinking.steps.insert(0, {"reasoning_content": "I should shout."})
    fake_openai.queue(thinking, text_reply("Done.", reasoning=["All good."]), text_reply("Next answer."))
    provider = OpenAICompatibleProvider(fake_openai.base_url, "deepseek-reasoner", api_key="sk-test-secret-value",
                                        provider_name="deepseek", context_window=64_000)
    tools = ToolRegistry()
    tools.register(Upper())
    agent = Agent.create(JsonlStore(tmp_path / "s"), provider, cwd=str(tmp_path), tools=tools,
                         config=AgentConfig(model_titles=False))
    await agent.send("shout x")
    await agent.send("and now?")
    within, after = (request.body["messages"] for request in fake_openai.chat_requests[1:])
    assert within[-2] == {"role": "assistant", "content": None, "reasoning_content": "I should shout.",
                          "tool_calls": [{"id": "call_a", "type": "function",
                                          "function": {"name": "upper", "arguments": '{"text": "x"}'}}]}
    assert within[0]["role"] == "system" and within[-1] == {"role": "tool", "tool_call_id": "call_a", "content": "X"}
    assert all("reasoning_content" not in m for m in after)  # a new prompt: earlier reasoning stays home
    assert after[-1] == {"role": "user", "content": "and now?"}


async def test_rate_limit_is_retried(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(http_error(429, retry_after="0"), http_error(503), text_reply("finally"))
    agent = make(tmp_path, fake_openai)
    result = await agent.send("hi")
    assert result.text == "finally" and len(fake_openai.chat_requests) == 3


async def test_a_rate_limit_shows_the_wait_beside_the_turn(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    from dsh_jupyter.agent import events as ev

    fake_openai.queue(http_error(429, "slow down", retry_after="0.3"), text_reply("finally"))
    agent = make(tmp_path, fake_openai)
    notices: list[ev.Notice] = []
    agent.subscribe(lambda event: notices.append(event) if isinstance(event, ev.Notice) else None)
    result = await agent.send("hi")
    assert result.text == "finally"
    assert [(n.level, n.turn) for n in notices] == [("warning", 1)]
    retries = agent.model.max_retries  # type: ignore[attr-defined]
    assert notices[0].text.startswith(f"retrying in 0.3 s (retry 1 of {retries}): ")
    assert "HTTP 429: slow down" in notices[0].text
    assert agent.model.on_retry is None  # type: ignore[attr-defined]  # put back after the call


async def test_auth_error_ends_the_turn_with_a_clear_message(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(http_error(401, "bad key"))
    agent = make(tmp_path, fake_openai)
    result = await agent.send("hi")
    assert result.reason == "error" and "key" in (result.error or "").lower()
    assert "sk-test-secret-value" not in (result.error or "")
    assert len(fake_openai.chat_requests) == 1
    end = JsonlStore(tmp_path / "s").load(agent.id).events[-1]
    assert end.type == "turn/end" and end.data["reason"]["kind"] == "error"


async def test_dropped_stream_ends_the_turn_and_the_log_reopens(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(broken_reply("partial ", "answer", marker=DROP), broken_reply("again", marker=DROP),
                      broken_reply("and again", marker=DROP))
    agent = make(tmp_path, fake_openai)
    result = await agent.send("hi")
    assert result.reason == "error"
    await agent.close()
    store = JsonlStore(tmp_path / "s")
    log, writer = store.open(agent.id)
    assert log.events[-1].type == "turn/end"
    writer.close()


async def test_cancel_while_the_server_stalls(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(broken_reply("thinking", marker=STALL))
    agent = make(tmp_path, fake_openai)
    task = asyncio.create_task(agent.send("hi"))
    while not fake_openai.chat_requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    agent.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.reason == "interrupted"
    assert json.dumps(agent.session.events[-1].data["reason"]) == '{"kind": "interrupted"}'
