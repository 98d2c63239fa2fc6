"""The one submit path: prepare, then start a turn or steer into the running one, never losing a prompt."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import Reply, ScriptedModel, say

from dsh_jupyter.agent import Agent, AgentBusyError, AgentIdleError
from dsh_jupyter.agent.submit import Submission, dispatch, prepare_prompt, submit
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


async def test_bad_mentions_fail_before_anything_is_written(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    mention = format_session_reference_mention("no-such-session", "Gone")
    from dsh_jupyter.query import SessionQuery
    from dsh_jupyter.references import SessionReferenceResolver

    resolver = SessionReferenceResolver(SessionQuery(agent.store))  # type: ignore[arg-type]
    with pytest.raises(SessionReferenceError):
        await prepare_prompt(agent, f"compare {mention}", resolver)
    assert not agent.busy and agent.session.events == []
