"""The agent loop on a scripted model and a real JSONL store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import Reply, ScriptedModel, call, say

from dsh_jupyter.agent import Agent, AgentBusyError, AgentConfig, AgentIdleError, Allow, Block
from dsh_jupyter.agent import events as ev
from dsh_jupyter.agent.compaction import COMPACTION_INSTRUCTIONS, COMPACTION_REQUEST
from dsh_jupyter.agent.inbox import REQUEST_DELIMITER
from dsh_jupyter.models.openai_compat import chat_messages
from dsh_jupyter.session.messages import message_text, text_block
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry


class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back."

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        self.calls: list[str] = []
        self.gate: asyncio.Event | None = None

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        self.calls.append(arguments["text"])
        if self.gate is not None:
            await self.gate.wait()
        return ToolOutput("echoed " + arguments["text"])


class SlowTool(Tool):
    name = "slow"
    description = "Wait until cancelled."

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        while not execution.cancel.is_set():
            await asyncio.sleep(0.01)
        return ToolOutput("stopped", is_error=True)


def make_agent(tmp_path: Path, model: ScriptedModel, **kwargs: Any) -> tuple[Agent, JsonlStore]:
    store = JsonlStore(tmp_path / "sessions")
    agent = Agent.create(store, model, cwd=str(tmp_path), **kwargs)
    return agent, store


def types(agent: Agent) -> list[str]:
    return [e.type for e in agent.session.events]


async def test_send_writes_a_complete_turn_and_flushes(tmp_path: Path) -> None:
    model = ScriptedModel(say("Hello", " there"))
    agent, store = make_agent(tmp_path, model)
    location = agent.locate()
    assert not os.path.exists(location.path)
    result = await agent.send("Hi agent, what is up today?")
    assert result.reason == "completed" and result.text == "Hello there"
    assert types(agent)[:5] == ["turn/start", "step/start", "user/message", "session/title", "assistant/message"]
    assert "turn/end" in types(agent)
    reread = store.load(agent.id)
    assert [e.type for e in reread.events] == types(agent)
    titles = [e.data for e in reread.events if e.type == "session/title"]
    assert titles[0]["source"] == {"kind": "fallback"} and titles[0]["title"] == "Hi agent, what is up today"
    assert titles[-1]["source"]["kind"] == "provider" and titles[-1]["title"] == "Scripted title"
    turn_end = next(e for e in reread.events if e.type == "turn/end")
    assert turn_end.data == {"turn": 1, "reason": {"kind": "completed"}}


async def test_user_title_wins_over_later_automatic_titles(tmp_path: Path) -> None:
    agent, store = make_agent(tmp_path, ScriptedModel(say("ok")))
    agent.set_title("My analysis")
    await agent.send("first prompt here")
    assert agent.title() == "My analysis"
    assert store.read_title(agent.id)["source"] == {"kind": "user"}


async def test_tool_calls_run_and_results_cite_their_call(tmp_path: Path) -> None:
    tools = ToolRegistry()
    echo = EchoTool()
    tools.register(echo)
    model = ScriptedModel(call("echo", '{"text": "ping"}', "c1", "Let me echo."), say("done"))
    agent, store = make_agent(tmp_path, model, tools=tools)
    result = await agent.send("echo ping")
    assert result.text == "done" and echo.calls == ["ping"]
    events = store.load(agent.id).events
    call_event = next(e for e in events if e.type == "tool/call")
    result_event = next(e for e in events if e.type == "tool/result")
    assert result_event.source_event_seqs == (call_event.seq,)
    assert result_event.data["message"]["content"][0]["toolCallId"] == "c1"
    second = model.requests[1]
    assert second.messages[-1]["content"][0] == {"type": "tool-result", "toolCallId": "c1",
                                                 "content": [text_block("echoed ping")], "isError": False}
    assert second.messages[-2]["content"][1] == {"type": "tool-call", "id": "c1", "name": "echo",
                                                 "arguments": '{"text": "ping"}'}
    assert second.system == agent.config.system_prompt and second.tool_names() == ["echo"]
    wire = chat_messages(second)
    assert wire[-1] == {"role": "tool", "tool_call_id": "c1", "content": "echoed ping"}
    assert wire[-2]["tool_calls"][0]["function"] == {"name": "echo", "arguments": '{"text": "ping"}'}


async def test_steer_lands_in_the_next_step_of_the_running_turn(tmp_path: Path) -> None:
    tools = ToolRegistry()
    echo = EchoTool()
    echo.gate = asyncio.Event()
    tools.register(echo)
    model = ScriptedModel(call("echo", '{"text": "x"}', "c1"), say("took the steer into account"))
    agent, _ = make_agent(tmp_path, model, tools=tools)
    task = asyncio.create_task(agent.send("start"))
    while not echo.calls:
        await asyncio.sleep(0.01)
    assert agent.busy
    with pytest.raises(AgentBusyError):
        await agent.send("second")
    agent.steer("also consider y")
    agent.inject("note from a plugin", source={"kind": "plugin", "plugin": "demo"})
    echo.gate.set()
    result = await task
    assert result.reason == "completed"
    messages = [e for e in agent.session.events if e.type == "user/message"]
    texts = [m.data["content"][0]["text"] for m in messages]
    assert texts == ["start", "also consider y", "note from a plugin"]
    step2 = [e for e in agent.session.events if e.type == "step/start"][1].seq
    assert all(m.seq > step2 for m in messages[1:])
    assert messages[2].data["source"] == {"kind": "plugin", "plugin": "demo"}
    with pytest.raises(AgentIdleError):
        agent.steer("too late")


async def test_blocked_prompt_writes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel(say("never"))
    agent, _ = make_agent(tmp_path, model)

    async def guard(submission: Any, next_: Any) -> Any:
        if "secret" in submission.text:
            return Block("prompts mentioning secrets are blocked")
        return await next_(submission)

    agent.prompt_submit.add(guard)
    context = {"content": [text_block("snapshot")], "source": {"kind": "session-reference"}}
    result = await agent.send("tell me the secret", contexts=[context])
    assert result.reason == "blocked" and "secrets" in (result.error or "")
    assert agent.session.events == [] and model.requests == []
    assert not os.path.exists(agent.locate().path)
    ok = await agent.send("harmless")
    assert ok.reason == "completed"


async def test_prompt_submit_listeners_wrap_and_rewrite(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, ScriptedModel(say("ok")))
    seen: list[str] = []

    async def outer(submission: Any, next_: Any) -> Any:
        seen.append("outer:" + submission.text)
        decision = await next_(submission)
        seen.append("outer-after")
        return decision

    async def inner(submission: Any, next_: Any) -> Any:
        seen.append("inner")
        return Allow(content=[text_block(submission.text.upper())])

    agent.prompt_submit.add(outer)
    agent.prompt_submit.add(inner)
    await agent.send("quiet")
    assert seen == ["outer:quiet", "inner", "outer-after"]
    direct = next(e for e in agent.session.events if e.type == "user/message")
    assert direct.data["content"] == [text_block("QUIET")]


SNAPSHOT_CONTEXT = {
    "content": [text_block("## Referenced sessions\n\n<referenced-sessions>\n[]\n</referenced-sessions>")],
    "source": {"kind": "session-reference", "form": "recall", "version": 1, "references": []},
}


async def test_separate_placement_records_context_then_direct_message(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, ScriptedModel(say("ok")))
    await agent.send("about @Earlier work", contexts=[SNAPSHOT_CONTEXT])
    messages = [e.data for e in agent.session.events if e.type == "user/message"]
    assert messages[0]["source"]["kind"] == "session-reference"
    assert messages[1]["source"] == {"kind": "user"} and messages[1]["content"] == [text_block("about @Earlier work")]


async def test_prompt_prefix_placement_bakes_one_message_with_display_content(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, ScriptedModel(say("ok")), config=AgentConfig(placement="prompt-prefix"))
    await agent.send("about @Earlier work", contexts=[SNAPSHOT_CONTEXT])
    messages = [e.data for e in agent.session.events if e.type == "user/message"]
    assert len(messages) == 1
    content = messages[0]["content"]
    assert content[1] == text_block(REQUEST_DELIMITER) and content[2] == text_block("about @Earlier work")
    assert messages[0]["envelope"]["displayContent"] == [text_block("about @Earlier work")]


async def test_cancel_mid_stream_ends_interrupted_and_log_reopens(tmp_path: Path) -> None:
    model = ScriptedModel(Reply(text=["partial"], stall=True))
    agent, store = make_agent(tmp_path, model)
    task = asyncio.create_task(agent.send("go"))
    while not model.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    agent.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.reason == "interrupted"
    assert agent.session.events[-1].type == "turn/end"
    assert agent.session.events[-1].data["reason"] == {"kind": "interrupted"}
    await agent.close()
    log, writer = store.open(agent.id)
    assert [e.type for e in log.events] == types(agent)
    writer.close()


async def test_a_cancel_between_reserving_and_running_the_turn_is_kept(tmp_path: Path) -> None:
    """A Stop pressed after the host reserved the turn (``begin``) but before the turn's coroutine ran: the turn
    still ends as interrupted, and the model is never asked (the cancel used to be dropped, so it ran to its end)."""
    model = ScriptedModel(say("should not be said"))
    agent, _ = make_agent(tmp_path, model)
    turn = agent.begin("go")
    agent.cancel()
    result = await asyncio.wait_for(turn, 5)
    assert result.reason == "interrupted"
    assert not model.requests
    assert agent.session.events[-1].type == "turn/end"
    assert agent.session.events[-1].data["reason"] == {"kind": "interrupted"}
    again = await agent.send("next")  # the stop belonged to that turn only
    assert again.reason == "completed"
    await agent.close()


async def test_cancel_mid_tool_leaves_no_dangling_call(tmp_path: Path) -> None:
    tools = ToolRegistry()
    tools.register(SlowTool())
    model = ScriptedModel(call("slow", "{}", "c9"))
    agent, store = make_agent(tmp_path, model, tools=tools)
    task = asyncio.create_task(agent.send("wait"))
    while not any(e.type == "tool/call" for e in agent.session.events):
        await asyncio.sleep(0.01)
    agent.steer("queued steer is dropped")
    agent.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.reason == "interrupted"
    kinds = types(agent)
    assert kinds[-3:] == ["tool/result", "step/end", "turn/end"]
    tool_result = agent.session.events[-3]
    assert tool_result.data["message"]["content"][0]["isError"] is True
    assert not any(e.type == "user/message" and "dropped" in json.dumps(e.data) for e in agent.session.events)
    await agent.close()
    log, writer = store.open(agent.id)  # reopens cleanly, no repair needed
    assert len(log.events) == len(kinds)
    writer.close()


async def test_model_error_ends_turn_with_message(tmp_path: Path) -> None:
    from dsh_jupyter.models.base import ModelError

    model = ScriptedModel(Reply(error=ModelError("auth", "the API key was rejected; set a valid key")))
    agent, store = make_agent(tmp_path, model)
    result = await agent.send("hello")
    assert result.reason == "error" and "API key" in (result.error or "")
    end = store.load(agent.id).events[-1]
    assert end.type == "turn/end" and end.data["reason"]["kind"] == "error"


async def test_compaction_replaces_older_surface_and_next_request_uses_checkpoint(tmp_path: Path) -> None:
    model = ScriptedModel(say("answer one"), say("answer two"), say("answer three"))
    agent, store = make_agent(tmp_path, model)
    await agent.send("first question")
    await agent.send("second question")
    assert await agent.compact()
    surface = agent.session.surface()
    assert surface[0].data["source"]["plugin"] == "compact"
    texts = [json.dumps(e.data) for e in surface]
    assert not any("first question" in t for t in texts[1:])
    await agent.send("third question")
    request = model.requests[-1].messages
    assert "Summary of:" in message_text(request[0]) and all(message_text(m) != "answer one" for m in request)
    summary_request = next(r for r in model.requests if r.purpose == "compaction")
    assert summary_request.system == COMPACTION_INSTRUCTIONS
    assert message_text(summary_request.messages[-1]) == COMPACTION_REQUEST
    reread = store.read_surface(agent.id)
    assert [e.seq for e in reread.events] == [e.seq for e in agent.session.surface()]


async def test_automatic_compaction_when_the_window_fills(tmp_path: Path) -> None:
    model = ScriptedModel(say("x" * 2000), say("y" * 2000), say("z"), context_window=1000)
    agent, _ = make_agent(tmp_path, model, config=AgentConfig(auto_compact_fraction=0.5, model_titles=False))
    await agent.send("one " * 50)
    await agent.send("two " * 50)
    await agent.send("three")
    assert any(e.type == "compaction/start" and e.data["turn"] is not None for e in agent.session.events)


async def test_replay_is_independent_of_the_source(tmp_path: Path) -> None:
    from dsh_jupyter.query import SessionQuery
    from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver

    store = JsonlStore(tmp_path / "sessions")
    source = Agent.create(store, ScriptedModel(say("source answer")), cwd=str(tmp_path))
    await source.send("source question")
    await source.close()
    target = Agent.create(store, ScriptedModel(say("ok"), say("ok2")), cwd=str(tmp_path))
    resolver = SessionReferenceResolver(SessionQuery(store))
    prepared = await resolver.prepare(ReferenceTarget(target.id, target.cwd), [text_block("see @src")],
                                      [{"sessionId": source.id, "label": "src"}])
    await target.send(prepared.content, contexts=[prepared.additional_context])
    before = json.dumps([m for m in target.next_request().messages])
    # mutate, compact and finally delete the source
    resumed = Agent.resume(store, source.id, ScriptedModel(say("more"), say("even more")))
    await resumed.send("another source question")
    await resumed.compact(keep_recent=0)
    await resumed.close()
    assert json.dumps([m for m in target.next_request().messages]) == before
    store.delete(source.id)
    assert json.dumps([m for m in target.next_request().messages]) == before
    await target.close()
    reopened = Agent.resume(store, target.id, ScriptedModel())
    assert json.dumps([m for m in reopened.next_request().messages]) == before
    await reopened.close()


async def test_events_reach_subscribers(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, ScriptedModel(say("a", "b")))
    seen: list[ev.AgentEvent] = []
    agent.subscribe(seen.append)
    await agent.send("hi")
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "TurnStarted" and kinds.count("TextDelta") == 2 and "TurnEnded" in kinds


async def test_full_loop_bash_sees_current_managed_env_and_no_stale_values(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.tools.bash import BashTool
    from dsh_jupyter.tools.env import ShellEnvRegistry

    monkeypatch.setenv("DSH_STALE_PARENT", "from-an-outer-harness")
    monkeypatch.setenv("DSH_SESSION_ID", "stale-session-id")
    home = tmp_path / "home"
    tools = ToolRegistry()
    tools.register(BashTool(ShellEnvRegistry(str(home))))
    script = (
        'echo "HOME=$DSH_HOME"; echo "SHELL=$DSH_SHELL"; echo "ID=$DSH_SESSION_ID"; '
        'echo "JSONL=$DSH_SESSION_JSONL"; echo "STALE=${DSH_STALE_PARENT:-unset}"; '
        'if [ -e "$DSH_SESSION_JSONL" ]; then echo present; else echo absent; fi'
    )
    model = ScriptedModel(call("bash", json.dumps({"command": script}), "c1"), say("done"))
    agent, store = make_agent(tmp_path, model, tools=tools)
    await agent.send("print the environment")
    result = next(e for e in agent.session.events if e.type == "tool/result")
    output = result.data["message"]["content"][0]["content"][0]["text"]
    lines = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    assert lines["HOME"] == str(home)
    assert lines["SHELL"] == "1"
    assert lines["ID"] == agent.id
    assert lines["JSONL"] == agent.locate().path
    assert lines["STALE"] == "unset"
    assert "absent" in output  # the log is written at the first turn end, not before
    assert os.path.exists(agent.locate().path)
    assert store.load(agent.id).header.id == agent.id


def test_reasoning_is_sent_back_only_within_a_tool_using_step() -> None:
    from dsh_jupyter.agent.request import request_messages
    from dsh_jupyter.models.base import ModelRequest
    from dsh_jupyter.session import SessionHeader, SessionLog
    from dsh_jupyter.session.messages import assistant_message, user_message

    log = SessionLog(SessionHeader.new("/tmp"))
    source = {"kind": "model", "provider": "deepseek", "model": "m"}
    log.append("user/message", user_message("old prompt"))
    old = assistant_message([{"type": "reasoning", "text": "old thoughts"},
                             {"type": "tool-call", "id": "a", "name": "bash", "arguments": "{}"}], source)
    log.append("assistant/message", {"turn": 1, "step": 1, "message": old})
    log.append("user/message", user_message("new prompt"))
    new = assistant_message([{"type": "reasoning", "text": "new thoughts"},
                             {"type": "tool-call", "id": "b", "name": "bash", "arguments": "{}"}], source)
    log.append("assistant/message", {"turn": 2, "step": 1, "message": new})
    messages = request_messages(log.surface())
    assert messages == [e.message for e in log.surface()]  # the agent hands over the log's own messages
    request = ModelRequest(messages)
    plain = chat_messages(request)
    assert all("reasoning_content" not in m for m in plain)
    deepseek = chat_messages(request, reasoning_replay=True)
    assistants = [m for m in deepseek if m["role"] == "assistant"]
    assert "reasoning_content" not in assistants[0] and assistants[1]["reasoning_content"] == "new thoughts"


def test_token_estimate_counts_text_calls_and_results() -> None:
    from dsh_jupyter.agent.request import estimate_tokens
    from dsh_jupyter.session.messages import assistant_message, tool_result_message, user_message

    source = {"kind": "model", "provider": "p", "model": "m"}
    messages = [user_message("x" * 40), assistant_message([{"type": "tool-call", "id": "c", "name": "bash",
                                                            "arguments": "y" * 20}], source),
                tool_result_message("c", [text_block("z" * 8)]), assistant_message([], source)]
    assert estimate_tokens(messages) == (10 + 4) + (0 + 4) + (5 + 4) + (2 + 4)
    assert estimate_tokens([], "s" * 12) == 3 + 4


def test_token_estimate_counts_images_as_the_request_sends_them() -> None:
    """The images a request sends as images (the newest, as many as the model gets: request_images chooses) at their
    image cost, every other one as its description."""
    from dsh_jupyter.agent.request import estimate_tokens, text_tokens
    from dsh_jupyter.images import describe_image, image_tokens, request_images
    from dsh_jupyter.session.messages import tool_result_message

    def plot(width: int) -> dict[str, Any]:
        return {"type": "image", "artifact": f"artifacts/{width}.png", "mediaType": "image/png", "width": width,
                "height": 480, "bytes": 1000}

    blocks = [plot(640), plot(800), plot(1024)]
    messages = [tool_result_message(f"c{i}", [text_block("done"), block]) for i, block in enumerate(blocks)]
    text_only = 3 * (text_tokens("done") + 4)
    described = [text_tokens(describe_image(b)) for b in blocks]
    assert estimate_tokens(messages) == text_only + sum(described)  # a model without eyes: descriptions

    def sent(limit: int) -> list[dict[str, Any]]:
        return request_images(messages, accepts_images=True, load=lambda name: b"", limit=limit)

    first_described = text_tokens("done\n" + describe_image(blocks[0])) + 4  # the request's text block
    assert estimate_tokens(sent(2)) == \
        first_described + 2 * (text_tokens("done") + 4) + image_tokens(blocks[1]) + image_tokens(blocks[2])
    assert estimate_tokens(sent(8)) == text_only + sum(map(image_tokens, blocks))
    assert image_tokens(blocks[2]) > 5 * described[2]  # an image sent as one is far dearer than its words
