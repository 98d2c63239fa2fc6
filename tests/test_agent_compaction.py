"""Compaction that fits a small context window: transcript parts, summaries in parts, prompts too long."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import ScriptedModel, say

from dsh_jupyter.agent import Agent, AgentConfig
from dsh_jupyter.agent import events as ev
from dsh_jupyter.agent.compaction import (
    CHUNK_EARLIER,
    COMPACTION_REQUEST,
    answer_reserve,
    chunk_lines,
    chunk_prompt,
    compaction_input_limit,
    transcript_lines,
)
from dsh_jupyter.agent.request import estimate_tokens, text_tokens
from dsh_jupyter.session.messages import assistant_message, message_text, text_block, tool_result_message, user_message
from dsh_jupyter.store.jsonl import JsonlStore

SOURCE = {"kind": "model", "provider": "scripted", "model": "scripted-1"}


def test_transcript_lines_name_each_role_and_cap_long_messages() -> None:
    call = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}
    lines = transcript_lines([
        user_message("List the files."),
        assistant_message([text_block("Looking."), call], SOURCE),
        tool_result_message("c1", [text_block("a.txt\n" + "b" * 5000 + "\nlast.txt")]),
    ], 100)
    assert lines[:3] == ["User: List the files.", "Assistant: Looking.", 'Tool call bash: {"command": "ls"}']
    assert lines[3].startswith("Tool result: a.txt") and lines[3].endswith("last.txt")
    assert text_tokens(lines[3]) <= 100 and "characters left out" in lines[3]
    assert transcript_lines([user_message("{" * 500)], 50)[0].count("{") < 60  # symbols are tokens each


def test_chunk_lines_keeps_lines_whole_and_in_order() -> None:
    lines = [f"line {n} " + "x" * 30 for n in range(10)]
    parts = chunk_lines(lines, 25)
    assert all(text_tokens(part) <= 25 for part in parts) and len(parts) > 1
    assert "\n".join(parts).splitlines() == lines
    assert chunk_lines([], 100) == []


def test_chunk_prompt_carries_the_summary_so_far() -> None:
    first = chunk_prompt("User: hi", 0, 2, "")
    assert first.startswith("The conversation so far, part 1 of 2") and CHUNK_EARLIER not in first
    second = chunk_prompt("User: more", 1, 2, "They said hi.")
    assert second.startswith(CHUNK_EARLIER) and "They said hi." in second and "part 2 of 2" in second


def test_code_and_tables_count_more_tokens_than_prose_of_the_same_length() -> None:
    prose = "The river crosses the old town and reaches the harbour. " * 8
    table = "row, 1; " * 56
    assert len(prose) == len(table)
    assert text_tokens(prose) == len(prose) // 4 and text_tokens(table) > 2 * text_tokens(prose) * 0.9
    assert text_tokens("") == 0 and text_tokens("日本語のテキスト") == 8


def test_window_shares() -> None:
    assert answer_reserve(2048) == 512 and answer_reserve(1_000_000) == 4096
    assert compaction_input_limit(2048) == 1024


def _agent(tmp_path: Path, model: ScriptedModel, auto: float | None = 0.8) -> tuple[Agent, list[ev.AgentEvent]]:
    agent = Agent.create(JsonlStore(tmp_path / "sessions"), model, cwd=str(tmp_path),
                         config=AgentConfig(model_titles=False, auto_compact_fraction=auto))
    seen: list[ev.AgentEvent] = []
    agent.subscribe(seen.append)
    return agent, seen


async def test_a_long_session_on_a_small_window_keeps_answering_and_every_request_fits(tmp_path: Path) -> None:
    window = 2048
    model = ScriptedModel(context_window=window)
    agent, seen = _agent(tmp_path, model)
    for n in range(30):
        result = await agent.send(f"Question {n}: " + "tell me about rivers and bridges " * 12)
        assert result.reason == "completed" and result.text.startswith("echo: Question")
    compactions = [r for r in model.requests if r.purpose == "compaction"]
    assert compactions, "the window filled, so the session must have been compacted"
    for request in compactions:
        assert estimate_tokens(request.messages, request.system) <= compaction_input_limit(window)
        assert message_text(request.messages[-1]) == COMPACTION_REQUEST
    for request in (r for r in model.requests if r.purpose == "turn"):
        assert estimate_tokens(request.messages, request.system) <= window - answer_reserve(window)
    assert not [e for e in seen if isinstance(e, ev.Notice) and "failed" in e.text]


async def test_a_history_too_big_for_one_request_is_summarised_in_parts(tmp_path: Path) -> None:
    model = ScriptedModel(say("one"), say("two"), say("three"), context_window=2048)
    agent, _ = _agent(tmp_path, model, auto=None)
    for n in range(3):  # each fits the window alone; together they are far more than it
        await agent.send(f"Here is table {n}:\n" + "row,value\n" * 320)
    assert await agent.compact(keep_recent=0)
    parts = [r for r in model.requests if r.purpose == "compaction"]
    assert len(parts) >= 3 and all(r.max_tokens == 2048 // 16 for r in parts)
    assert all(estimate_tokens(r.messages, r.system) <= compaction_input_limit(2048) for r in parts)
    assert "characters left out" in message_text(parts[0].messages[0])
    checkpoint = agent.session.surface()[0]
    assert checkpoint.data["source"]["plugin"] == "compact"


async def test_a_prompt_that_cannot_fit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    model = ScriptedModel(say("first answer"), context_window=2048)
    agent, seen = _agent(tmp_path, model)
    await agent.send("a first short prompt")
    before = [e.seq for e in agent.session.events]
    result = await agent.send("paste " * 3000)
    assert result.reason == "error" and result.error is not None
    assert "scripted model scripted-1 has a 2,048-token window" in result.error
    assert "about 4," in result.error and "nothing was sent" in result.error
    assert [e.seq for e in agent.session.events] == before
    assert isinstance(seen[-1], ev.TurnEnded) and seen[-1].reason == "error"
    assert len([r for r in model.requests if r.purpose == "turn"]) == 1
    again = await agent.send("a short prompt still works")
    assert again.reason == "completed"


async def test_the_context_meter_grows_with_the_session_and_drops_after_compaction(tmp_path: Path) -> None:
    window = 8192
    agent, _ = _agent(tmp_path, ScriptedModel(context_window=window), auto=0.5)
    before = agent.context_meter()
    assert before is not None and before.window == window and before.compacts_at == window // 2
    await agent.send("Here is a table:\n" + "row,value\n" * 200)
    grown = agent.context_meter()
    assert grown is not None and grown.used > before.used + 200
    assert grown.text().startswith(f"context {grown.used / window:.0%} of 8,192 (compacts at 50%)")
    assert agent._needs_compaction() == (grown.used > window // 2)
    await agent.compact(keep_recent=0)
    after = agent.context_meter()
    assert after is not None and after.used < grown.used
    off, _ = _agent(tmp_path / "off", ScriptedModel(context_window=window), auto=None)
    meter = off.context_meter()
    assert meter is not None and meter.compacts_at is None and "compacts" not in meter.text()
    unknown, _ = _agent(tmp_path / "unknown", ScriptedModel(context_window=None))
    assert unknown.context_meter() is None
