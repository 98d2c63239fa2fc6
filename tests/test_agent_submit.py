"""The one submit path: prepare, then start a turn or steer into the running one, never losing a prompt."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import Reply, ScriptedModel, say

from dsh_jupyter.agent import Agent, AgentBusyError, AgentIdleError
from dsh_jupyter.agent.events import TurnEnded
from dsh_jupyter.agent.submit import Submission, dispatch, prepare_prompt, submit
from dsh_jupyter.models.base import ModelRequest, StreamEvent
from dsh_jupyter.references import SessionReferenceError, format_session_reference_mention
from dsh_jupyter.session.messages import text_block
from dsh_jupyter.store import JsonlStore


def make_agent(tmp_path: Path, *replies: Reply) -> Agent:
    return Agent.create(JsonlStore(tmp_path / "sessions"), ScriptedModel(*replies), cwd=str(tmp_path))


def user_texts(agent: Agent) -> list[str]:
    return [e.data["content"][0]["text"] for e in agent.session.events if e.type == "user/message"]


async def test_idle_agent_starts_a_turn(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, say("hi"))
    started: list[bool] = []
    outcome = await submit(agent, "hello", on_start=lambda: started.append(agent.busy))
    assert started == [True]
    assert not outcome.steered and outcome.turn is not None and outcome.turn.reason == "completed"
    assert user_texts(agent) == ["hello"]


async def test_busy_agent_is_steered(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, Reply(text=["working"], stall=False), say("after steer"))
    first = Submission([text_block("first")], None)
    dispatched = dispatch(agent, first)
    assert dispatched.action == "started" and dispatched.turn is not None
    task = asyncio.ensure_future(dispatched.turn)
    second = dispatch(agent, Submission([text_block("second")], None))
    assert second.action == "steered" and second.turn is None
    await task
    assert user_texts(agent) == ["first", "second"]


def test_a_turn_starting_in_between_makes_the_prompt_steer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = make_agent(tmp_path)
    steered: list[str] = []

    def begin(*args: object, **kwargs: object) -> object:  # another thread reserved the turn first
        raise AgentBusyError("busy")

    monkeypatch.setattr(agent, "begin", begin)
    monkeypatch.setattr(agent, "steer", lambda content, **kw: steered.append(content[0]["text"]))
    submission = Submission([text_block("late")], None)
    assert dispatch(agent, submission).action == "steered"
    assert submission.steered and steered == ["late"]


async def test_a_turn_ending_in_between_makes_the_prompt_start_one(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    agent = make_agent(tmp_path, say("ok"))
    states = iter([True, False])  # looks busy, but the turn has ended by the time we steer
    monkeypatch.setattr(Agent, "busy", property(lambda self: next(states, False)))

    def steer(*args: object, **kwargs: object) -> None:
        raise AgentIdleError("idle")

    monkeypatch.setattr(agent, "steer", steer)
    dispatched = dispatch(agent, Submission([text_block("just in time")], None))
    assert dispatched.action == "started" and dispatched.turn is not None
    result = await dispatched.turn
    assert result.reason == "completed"
    assert user_texts(agent) == ["just in time"]


async def test_a_prompt_steered_while_the_turn_makes_its_title_is_answered_in_that_turn(tmp_path: Path) -> None:
    """The first turn asks the model for a title after its last step: a prompt steered in meanwhile is read by
    that turn (one more step) rather than left in the inbox, unread, when the turn ends."""
    agent = make_agent(tmp_path, say("first answer"), say("answer to the steer"))
    model = agent.model
    assert isinstance(model, ScriptedModel)
    original = model.stream
    steered: list[str] = []

    async def stream(request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        if request.purpose == "title" and not steered:
            steered.append(dispatch(agent, Submission([text_block("one more thing")], None)).action)
        async for item in original(request, cancel):
            yield item

    model.stream = stream  # type: ignore[method-assign]
    result = await agent.send("hello")
    assert steered == ["steered"] and result.reason == "completed"
    assert user_texts(agent) == ["hello", "one more thing"]
    assert result.text == "answer to the steer" and agent._pending == []
    assert sum(1 for e in agent.session.events if e.type == "turn/start") == 1


async def test_a_turn_that_has_looked_at_its_inbox_for_the_last_time_refuses_steering(tmp_path: Path) -> None:
    """Once the turn has looked at its inbox for the last time (it is writing its end), a steer is refused, so the
    prompt starts a turn of its own instead of waiting unread in the inbox."""
    agent = make_agent(tmp_path, say("done"))
    refused: list[str] = []

    def at_the_end(event: object) -> None:
        if isinstance(event, TurnEnded):
            with pytest.raises(AgentIdleError):
                agent.steer("too late")
            refused.append("refused")

    agent.subscribe(at_the_end)
    await agent.send("hello")
    assert refused == ["refused"] and agent._pending == [] and not agent.busy
    task = asyncio.ensure_future(agent.send("again"))
    await asyncio.sleep(0)
    agent.steer("now it is read")
    await task
    assert user_texts(agent) == ["hello", "again", "now it is read"]


def test_a_prompt_sent_while_a_turn_ends_waits_and_starts_the_next_turn(tmp_path: Path) -> None:
    """Sent from another thread while the running turn is ending (steering refused, a new turn not yet possible),
    the prompt waits the few milliseconds until the turn has ended and then starts its own."""
    agent = make_agent(tmp_path, say("first"), say("second"))
    ending = threading.Event()

    def slow_end(event: object) -> None:
        if isinstance(event, TurnEnded) and event.turn == 1:
            ending.set()
            time.sleep(0.3)  # the turn is ending: it has refused steering and still holds the agent

    agent.subscribe(slow_end)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=lambda: loop.run_until_complete(agent.send("hello")))
    runner.start()
    try:
        assert ending.wait(10)
        dispatched = dispatch(agent, Submission([text_block("right as it ended")], None))
        assert dispatched.action == "started" and dispatched.turn is not None
    finally:
        runner.join(10)
    result = loop.run_until_complete(dispatched.turn)
    loop.close()
    assert result.reason == "completed" and result.text == "second"
    assert user_texts(agent) == ["hello", "right as it ended"]


async def test_bad_mentions_fail_before_anything_is_written(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    mention = format_session_reference_mention("no-such-session", "Gone")
    from dsh_jupyter.query import SessionQuery
    from dsh_jupyter.references import SessionReferenceResolver

    resolver = SessionReferenceResolver(SessionQuery(agent.store))  # type: ignore[arg-type]
    with pytest.raises(SessionReferenceError):
        await prepare_prompt(agent, f"compare {mention}", resolver)
    assert not agent.busy and agent.session.events == []
