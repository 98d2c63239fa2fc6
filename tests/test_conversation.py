"""The one transcript model: one fold fed by live agent events or by stored session events, the same items
either way; its limits, its streaming reader and the items every view reads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import Reply, ScriptedModel, call, say
from import_helpers import module_imports

from dsh_jupyter.agent import Agent
from dsh_jupyter.agent.approvals import ApprovalPolicy
from dsh_jupyter.agent.events import (
    AgentEvent,
    AssistantMessage,
    MessageRecorded,
    Notice,
    ReasoningDelta,
    TextDelta,
    TitleChanged,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from dsh_jupyter.agent.transcript_feed import apply_event
from dsh_jupyter.conversation import items as items_module
from dsh_jupyter.conversation.calls import argument_summary
from dsh_jupyter.conversation.fold import Transcript
from dsh_jupyter.conversation.items import (
    Answer,
    Checkpoint,
    Context,
    Item,
    Note,
    Prompt,
    Reasoning,
    ToolCall,
    TurnEnd,
    item_id,
)
from dsh_jupyter.conversation.items import Notice as NoticeItem
from dsh_jupyter.conversation.limits import CELL, EXPORT, Limits
from dsh_jupyter.conversation.log_feed import feed, log_items, projected_item, transcript_items
from dsh_jupyter.conversation.tally import Tally
from dsh_jupyter.session import Event, SessionHeader, SessionLog
from dsh_jupyter.session.messages import compaction_source, text_block, user_message
from dsh_jupyter.session.projection import ProjectedMessage
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry

REFERENCE_SOURCE = {"kind": "session-reference", "form": "recall", "version": 1, "references": [
    {"sessionId": "id-1", "label": "<img src=x onerror=alert(1)>", "capturedThroughSeq": 4, "compacted": True,
     "truncated": False, "omittedMessages": 0, "omittedBytes": 0, "inputIndex": 0}]}


def user_recorded(text: str = "hi", source: dict[str, Any] | None = None) -> MessageRecorded:
    return MessageRecorded(turn=1, seq=1, message={"role": "user", "source": source or {"kind": "user"},
                                                   "content": [{"type": "text", "text": text}]})


def fold(*events: AgentEvent, state: Transcript | None = None) -> Transcript:
    state = state or Transcript()
    for event in events:
        apply_event(state, event)
    return state


def comparable(items: list[Item]) -> list[Item]:
    """Items as both inputs give them (the live fold numbers from where it started)."""
    return [type(item)(**{**vars(item), "number": 0}) for item in items]


# --------------------------------------------------------------------------- the model is pure

def test_the_model_imports_no_widget_ipython_or_presentation() -> None:
    package = Path(items_module.__file__).parent
    for path in [*package.glob("*.py"), package.parent / "agent" / "transcript_feed.py"]:
        imported = module_imports(path)
        assert not {m.split(".")[0] for m in imported} & {"IPython", "ipywidgets", "anywidget", "traitlets"}, path
        above = {f"dsh_jupyter.{room}" for room in ("ui", "notebook", "cli", "server")}
        assert not {".".join(m.split(".")[:2]) for m in imported} & above, path
    code = ("import sys, dsh_jupyter.conversation.fold, dsh_jupyter.conversation.log_feed; "
            "print(sorted(m for m in ('IPython', 'ipywidgets', 'anywidget', 'dsh_jupyter.ui') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------- one conversation, two inputs

class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back."

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        if arguments["text"] == "fail":
            return ToolOutput("it failed", is_error=True)
        return ToolOutput("echoed " + arguments["text"] * 3)


async def test_the_same_conversation_gives_the_same_items_live_and_from_its_log(tmp_path: Path) -> None:
    tools = ToolRegistry()
    tools.register(EchoTool())
    model = ScriptedModel(
        Reply(text=["Let me ", "echo."], tool_calls=[("c1", "echo", '{"text": "ping"}')], reasoning="think first"),
        call("echo", '{"text": "fail"}', "c2"),
        say("All ", "done."),
        say("second answer"),
    )
    agent = Agent.create(JsonlStore(tmp_path / "sessions"), model, cwd=str(tmp_path), tools=tools)
    live = Transcript(limits=Limits(text=None, output=10, arguments=None), max_items=None)
    agent.subscribe(lambda event: apply_event(live, event))
    await agent.send("about @Earlier work", contexts=[{"content": [text_block("## Referenced sessions")],
                                                        "source": REFERENCE_SOURCE}])
    await agent.send("and again")

    stored = Transcript(limits=live.limits, max_items=None)
    for event in agent.session.events:
        feed(stored, event)
    live_items, stored_items = live.snapshot(), stored.snapshot()
    assert [i.kind for i in live_items] == ["context", "user", "reasoning", "text", "tool", "tool", "text", "user",
                                            "text"]
    assert comparable(live_items) == comparable(stored_items)
    tool = next(i for i in live_items if isinstance(i, ToolCall))
    assert (tool.result, tool.result_cut, tool.status) == ("echoed pin\n… (9 more characters not shown)", 9, "ok")
    assert [i.status for i in live_items if isinstance(i, ToolCall)] == ["ok", "error"]
    assert live.title == stored.title and live.title
    assert live.usage == stored.usage and live.usage is not None  # the last turn's tokens, either way


async def test_a_prompt_typed_into_a_widget_is_confirmed_by_its_record_not_repeated(tmp_path: Path) -> None:
    agent = Agent.create(JsonlStore(tmp_path / "sessions"), ScriptedModel(say("ok")), cwd=str(tmp_path))
    panel = Transcript()
    agent.subscribe(lambda event: apply_event(panel, event))
    panel.add_user("hello", steered=False)
    assert [(i.kind, getattr(i, "pending", None)) for i in panel.snapshot()] == [("user", True)]
    await agent.send("hello")
    items = panel.snapshot()
    assert [(i.kind, getattr(i, "pending", None)) for i in items] == [("user", False), ("text", None)]
    stored = log_items(agent.session.events, limits=CELL)
    assert comparable(items) == comparable(stored)


async def test_an_interrupted_call_is_stopped_from_either_input(tmp_path: Path) -> None:
    import asyncio

    running = asyncio.Event()

    class Slow(Tool):
        name = "slow"
        description = "Wait until cancelled."

        def __init__(self) -> None:
            self.parameters = {"type": "object", "properties": {}}

        async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
            running.set()
            await asyncio.sleep(3600)
            return ToolOutput("never")

    tools = ToolRegistry()
    tools.register(Slow())
    agent = Agent.create(JsonlStore(tmp_path / "sessions"), ScriptedModel(call("slow", "{}", "s1")),
                         cwd=str(tmp_path), tools=tools, approvals=ApprovalPolicy("auto"))
    live = Transcript()
    agent.subscribe(lambda event: apply_event(live, event))
    task = asyncio.create_task(agent.send("wait"))
    await asyncio.wait_for(running.wait(), 30)  # cut off while it runs (not while it waits to be approved)
    agent.cancel()
    await task
    stored = log_items(agent.session.events, limits=CELL)
    for items in (live.snapshot(), stored):
        assert [(i.kind, getattr(i, "status", getattr(i, "reason", None))) for i in items] == [
            ("user", None), ("tool", "stopped"), ("end", "interrupted")]
    stored_tool = next(i for i in stored if isinstance(i, ToolCall))
    assert stored_tool.result is not None and "no result was recorded" in stored_tool.result  # the log says why


# --------------------------------------------------------------------------- the log input

def log_of(*events: tuple[str, dict[str, Any]]) -> SessionLog:
    log = SessionLog(SessionHeader("s-1", 1_700_000_000_000, "/tmp"))
    for kind, data in events:
        log.append(kind, data)
    return log


def test_the_log_gives_checkpoints_notes_contexts_and_baked_prompts() -> None:
    baked = user_message([text_block("snapshot"), text_block("the question")], REFERENCE_SOURCE,
                         envelope={"displayContent": [text_block("the question")]})
    log = log_of(
        ("user/message", user_message("Summary so far", compaction_source("k1"))),
        ("user/message", user_message("hook says: keep going", {"kind": "plugin", "plugin": "stop-hook"})),
        ("user/message", baked),
        ("user/message", user_message("   ")),
        ("assistant/message", {"message": {"role": "assistant", "content": [{"type": "text", "text": "  "}]}}),
    )
    items = log_items(log.events)
    assert [type(i) for i in items] == [Checkpoint, Note, Context, Prompt]
    context = items[2]
    assert isinstance(context, Context)
    assert context.sessions == (("<img src=x onerror=alert(1)>", "id-1", 4),)
    assert "inputIndex" not in context.references[0] and context.references[0]["compacted"] is True
    assert getattr(items[3], "text", None) == "the question"


def test_the_log_keeps_approvals_and_reasoning_and_skips_results_of_unseen_calls() -> None:
    record = {"allowed": True, "answeredBy": "person", "scope": "once"}
    log = log_of(
        ("assistant/message", {"message": {"role": "assistant", "content": [
            {"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "Running it."},
            {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}]}}),
        ("tool/call", {"callId": "c1", "name": "bash", "arguments": '{"command": "ls"}'}),
        ("tool/result", {"message": {"role": "user", "content": [
            {"type": "tool-result", "toolCallId": "c1", "content": [text_block("a b")], "isError": False}]},
            "meta": {"approval": record}}),
        ("tool/result", {"message": {"role": "user", "content": [
            {"type": "tool-result", "toolCallId": "ghost", "content": [text_block("?")], "isError": True}]}}),
    )
    items = log_items(log.events)
    assert [type(i) for i in items] == [Reasoning, Answer, ToolCall]
    tool = items[2]
    assert isinstance(tool, ToolCall) and tool.approval_note == "allowed once by you" and tool.result == "a b"
    assert not any(getattr(i, "streaming", False) for i in items)


def test_streamed_items_wait_only_for_a_running_call_and_up_to_a_bound() -> None:
    events = [Event("tool/call", 1, 0, {"callId": "c1", "name": "bash", "arguments": "{}"}),
              *[Event("user/message", n, 0, user_message(f"p{n}")) for n in range(2, 8)]]
    seen: list[str] = []
    stream = transcript_items(events, hold=3)
    for item in stream:
        seen.append(item.kind)
    # the call never got a result and no turn ended: the oldest went out once more than 3 waited behind it
    assert seen == ["tool", "user", "user", "user", "user", "user", "user"]
    tally = Tally()
    list(transcript_items([*events, Event("turn/end", 8, 0, {"reason": {"kind": "interrupted"}})], tally))
    assert (tally.prompts, tally.tools) == (6, 1)


# --------------------------------------------------------------------------- limits

def test_limits_cut_texts_and_count_what_they_cut() -> None:
    limits = Limits(text=5, output=4, arguments=6, summary=10)
    state = Transcript(limits=limits)
    fold(TextDelta(turn=1, text="abc"), TextDelta(turn=1, text="defgh"), state=state)
    (answer,) = state.snapshot()
    assert isinstance(answer, Answer) and (answer.text, answer.cut) == ("abcde", 3)
    assert answer.shown == "abcde\n… (3 more characters of this message not shown)"
    fold(AssistantMessage(turn=1, text="0123456789", seq=2),
         ToolStarted(turn=1, call_id="c", name="bash", arguments='{"command": "echo 1234567890"}'),
         ToolFinished(turn=1, call_id="c", name="bash", text="123456", is_error=False), state=state)
    answer, tool = state.snapshot()
    assert isinstance(answer, Answer) and (answer.text, answer.cut) == ("01234", 5)  # authoritative, cut again
    assert isinstance(tool, ToolCall)
    assert tool.summary == "echo 1234…" and tool.arguments.startswith('{"comm') and tool.source is None
    assert (tool.result, tool.result_cut) == ("1234\n… (2 more characters not shown)", 2)


@pytest.mark.parametrize("bad", [0, -3, True, "20", 1.5])
def test_a_limit_must_be_a_positive_count(bad: object) -> None:
    with pytest.raises(ValueError, match="positive number of characters"):
        Limits(text=bad, output=1, arguments=1)  # type: ignore[arg-type]


def test_each_view_names_its_limits() -> None:
    assert (CELL.text, CELL.output, CELL.arguments, CELL.summary) == (None, 4_000, 4_000, 120)
    assert (EXPORT.text, EXPORT.output, EXPORT.arguments) == (200_000, 20_000, None)


def test_a_projected_message_is_an_item_cut_by_the_same_rule() -> None:
    limits = EXPORT.with_text(4)
    prompt = projected_item(ProjectedMessage("user", "hello"), limits)
    answer = projected_item(ProjectedMessage("assistant", "hi"), limits)
    checkpoint = projected_item(ProjectedMessage("user", "summary", checkpoint=True), limits)
    assert (type(prompt), prompt.text, prompt.cut) == (Prompt, "hell", 1)
    assert (type(answer), answer.text, answer.cut) == (Answer, "hi", 0)
    assert (type(checkpoint), checkpoint.shown) == (Checkpoint, "summ\n… (3 more characters of this message not shown)")


# --------------------------------------------------------------------------- the live input

def test_a_turn_folds_into_ordered_items() -> None:
    state = Transcript()
    state.add_user("question", steered=False)
    assert apply_event(state, TurnStarted(turn=1)) is True
    assert state.busy is True and state.finished is False
    for event in [
        user_recorded("question"),
        ReasoningDelta(turn=1, text="think "),
        ReasoningDelta(turn=1, text="more"),
        TextDelta(turn=1, text="Let me "),
        TextDelta(turn=1, text="look."),
        AssistantMessage(turn=1, text="Let me look.", seq=5),
        ToolStarted(turn=1, call_id="c1", name="bash", arguments='{"command": "ls -la\\n  /tmp"}'),
        ToolFinished(turn=1, call_id="c1", name="bash", text="a\nb", is_error=False),
        TextDelta(turn=1, text="Done."),
        AssistantMessage(turn=1, text="Done.", seq=7),
        Notice(turn=1, text="hook warned", level="warning"),
        TitleChanged(turn=1, title="Listing files"),
    ]:
        assert apply_event(state, event) is False
    assert state.title == "Listing files"
    assert apply_event(state, TurnEnded(turn=1, reason="completed")) is True
    items = state.snapshot()
    assert [type(i) for i in items] == [Prompt, Reasoning, Answer, ToolCall, Answer, NoticeItem]
    reasoning, first, tool, second, notice = items[1:]
    assert isinstance(reasoning, Reasoning) and reasoning.text == "think more" and not reasoning.streaming
    assert isinstance(first, Answer) and first.text == "Let me look."
    assert isinstance(tool, ToolCall)
    assert (tool.call_id, tool.summary, tool.result, tool.status) == ("c1", "ls -la /tmp", "a\nb", "ok")
    assert isinstance(second, Answer) and second.text == "Done."
    assert isinstance(notice, NoticeItem) and (notice.text, notice.level) == ("hook warned", "warning")
    assert not any(getattr(i, "streaming", False) for i in items)
    assert state.busy is False and state.reason == "completed" and state.finished
    assert [item_id(i) for i in items] == [f"i{n}" for n in range(1, 7)]


def test_two_calls_of_the_same_tool_in_one_step_are_matched_by_call_id() -> None:
    state = fold(
        TurnStarted(turn=1),
        ToolStarted(turn=1, call_id="a", name="bash", arguments='{"command": "echo first"}'),
        ToolStarted(turn=1, call_id="b", name="bash", arguments='{"command": "echo second"}'),
        ToolFinished(turn=1, call_id="b", name="bash", text="second", is_error=True),
        ToolFinished(turn=1, call_id="a", name="bash", text="first", is_error=False),
    )
    tools = [i for i in state.snapshot() if isinstance(i, ToolCall)]
    assert [(t.call_id, t.summary, t.result, t.status) for t in tools] == [
        ("a", "echo first", "first", "ok"),
        ("b", "echo second", "second", "error"),
    ]


def test_a_live_result_without_its_start_still_shows() -> None:
    state = fold(ToolFinished(turn=1, call_id="z", name="python", text="late", is_error=False))
    (tool,) = state.snapshot()
    assert isinstance(tool, ToolCall) and (tool.call_id, tool.result, tool.status) == ("z", "late", "ok")


@pytest.mark.parametrize("reason", ["interrupted", "error", "completed"])
def test_a_tool_still_running_when_the_turn_ends_is_stopped(reason: str) -> None:
    state = fold(
        TurnStarted(turn=1),
        ToolStarted(turn=1, call_id="done", name="bash", arguments='{"command": "true"}'),
        ToolFinished(turn=1, call_id="done", name="bash", text="", is_error=False),
        ToolStarted(turn=1, call_id="slow", name="bash", arguments='{"command": "sleep 20"}'),
        TextDelta(turn=1, text="never finished"),
        TurnEnded(turn=1, reason=reason, error="boom" if reason == "error" else None),
    )
    items = state.snapshot()
    tools = {i.call_id: i.status for i in items if isinstance(i, ToolCall)}
    assert tools == {"done": "ok", "slow": "stopped"}
    text = next(i for i in items if isinstance(i, Answer))
    assert text.streaming is False
    ends = [i for i in items if isinstance(i, TurnEnd)]
    if reason == "completed":
        assert ends == []
    else:
        assert [(e.reason, e.error) for e in ends] == [(reason, "boom" if reason == "error" else None)]


def test_a_turn_ends_once_and_a_new_turn_starts_afresh() -> None:
    state = fold(TurnStarted(turn=1), TurnEnded(turn=1, reason="error", error="model failed"))
    assert state.end_turn("error", "the cell saw it too") is False  # already ended: nothing added
    assert [i.kind for i in state.snapshot()] == ["end"]
    fold(TurnStarted(turn=2), state=state)
    assert state.reason is None and state.busy
    assert state.end_turn("interrupted") is True
    # A prompt blocked by a hook ends without a start (and with the next turn's number).
    fold(TurnEnded(turn=3, reason="blocked", error="no secrets"), TurnEnded(turn=3, reason="blocked"), state=state)
    assert [(i.kind, getattr(i, "reason", None)) for i in state.snapshot()] == [
        ("end", "error"), ("end", "interrupted"), ("end", "blocked"), ("end", "blocked")]
    assert state.reason == "blocked" and state.busy is False


def test_a_single_streamed_text_is_replaced_by_the_finished_message() -> None:
    state = fold(TextDelta(turn=1, text="Hel"), TextDelta(turn=1, text="lo wrld"),
                 AssistantMessage(turn=1, text="Hello world", seq=3))
    assert [(i.kind, getattr(i, "text", None)) for i in state.snapshot()] == [("text", "Hello world")]
    state = fold(AssistantMessage(turn=1, text="not streamed", seq=3))
    assert [getattr(i, "text", None) for i in state.snapshot()] == ["not streamed"]
    assert fold(AssistantMessage(turn=1, text="", seq=3)).snapshot() == []
    assert fold(AssistantMessage(turn=1, text=" \n ", seq=3)).snapshot() == []  # blank, as the log reads it


def test_caps_and_the_argument_line() -> None:
    state = Transcript(max_items=5, limits=Limits(text=None, output=10, arguments=10))
    fold(ToolStarted(turn=1, call_id="c", name="python", arguments="not json " * 40),
         ToolFinished(turn=1, call_id="c", name="python", text="x" * 25, is_error=True), state=state)
    (tool,) = state.snapshot()
    assert isinstance(tool, ToolCall)
    assert tool.result == "x" * 10 + "\n… (15 more characters not shown)" and tool.is_error and tool.done
    assert len(tool.summary) <= 120 and "\n" not in tool.summary and tool.summary.endswith("…")
    for n in range(10):
        state.add_notice(f"n{n}")
    items = state.snapshot()
    assert len(items) == 5 and getattr(items[-1], "text", None) == "n9"


@pytest.mark.parametrize(
    ("name", "arguments", "summary"),
    [
        ("bash", '{"command": "ls   -la\\n/tmp", "timeout": 5}', "ls -la /tmp"),
        ("python", '{"code": "x = 1\\nprint(x)"}', "x = 1 print(x)"),
        ("bash", '{"timeout": 5}', "timeout=5"),
        ("grep", '{"pattern": "a b", "n": [1]}', 'pattern="a b", n=[1]'),
        ("grep", "[1, 2]", "[1, 2]"),
        ("grep", "{broken", "{broken"),
        ("grep", "", ""),
    ],
)
def test_argument_summary(name: str, arguments: str, summary: str) -> None:
    assert argument_summary(name, arguments) == summary


def test_recorded_messages_are_items_of_their_kind() -> None:
    state = fold(
        user_recorded("a prompt from a cell"),
        MessageRecorded(turn=1, seq=2, message={"role": "user", "source": REFERENCE_SOURCE, "content": []}),
        user_recorded("checkpoint text", compaction_source("k")),
        user_recorded("  "),
    )
    prompt, context, checkpoint = state.snapshot()
    assert isinstance(prompt, Prompt) and not prompt.pending and prompt.text == "a prompt from a cell"
    assert isinstance(context, Context) and context.references[0]["label"] == "<img src=x onerror=alert(1)>"
    assert isinstance(checkpoint, Checkpoint)


def test_user_items_can_be_taken_back_with_their_steered_note() -> None:
    state = Transcript()
    kept = state.add_user("kept", steered=False)
    taken = state.add_user("taken back", steered=True)
    assert [i.kind for i in state.snapshot()] == ["user", "user", "notice"]
    state.remove(taken)
    state.remove("i999")  # unknown: nothing happens
    assert [item_id(i) for i in state.snapshot()] == [kept]


def test_snapshots_are_copies_and_items_after_reads_the_tail() -> None:
    state = fold(TextDelta(turn=1, text="a"))
    before = state.snapshot()
    fold(TextDelta(turn=1, text="b"), ToolStarted(turn=1, call_id="c", name="bash", arguments="{}"), state=state)
    assert getattr(before[0], "text", None) == "a"
    assert state.last_number == 2
    assert [i.kind for i in state.items_after(1)] == ["tool"]
    assert state.items_after(2) == []


def test_settled_number_stops_before_the_first_running_tool() -> None:
    state = fold(TextDelta(turn=1, text="a"))
    assert state.settled_number() == 1
    fold(ToolStarted(turn=1, call_id="x", name="bash", arguments="{}"),
         ToolStarted(turn=1, call_id="y", name="bash", arguments="{}"),
         ToolFinished(turn=1, call_id="y", name="bash", text="", is_error=False), state=state)
    assert state.settled_number() == 1
    assert [i.kind for i in state.items_after(0, upto=2)] == ["text", "tool"]
    fold(ToolFinished(turn=1, call_id="x", name="bash", text="", is_error=False), state=state)
    assert state.settled_number() == 3
    assert Transcript().settled_number() == 0


def test_events_from_another_thread_while_reading() -> None:
    state = Transcript(max_items=None)

    def stream() -> None:
        for n in range(2000):
            apply_event(state, TextDelta(turn=1, text="x"))
            if n % 100 == 0:
                apply_event(state, ToolStarted(turn=1, call_id=f"c{n}", name="bash", arguments="{}"))
                apply_event(state, ToolFinished(turn=1, call_id=f"c{n}", name="bash", text="ok", is_error=False))

    agent = threading.Thread(target=stream)
    agent.start()
    while agent.is_alive():
        state.snapshot()
    agent.join()
    items = state.snapshot()
    assert sum(len(i.text) for i in items if isinstance(i, Answer)) == 2000
    assert sum(1 for i in items if isinstance(i, ToolCall) and i.status == "ok") == 20


def test_items_are_plain_json_able_dataclasses() -> None:
    state = fold(user_recorded("q"), ToolStarted(turn=1, call_id="c", name="bash", arguments="{}"))
    assert json.loads(json.dumps([vars(i) for i in state.snapshot()]))[1]["call_id"] == "c"


def test_feed_reads_its_types_and_leaves_the_transcript_as_it_was_for_every_other() -> None:
    """An export drops the events outside FED_TYPES before masking them: feeding one must change nothing."""
    from dsh_jupyter.conversation.fold import Transcript
    from dsh_jupyter.conversation.log_feed import FED_TYPES
    from dsh_jupyter.session import Event
    from dsh_jupyter.session.events import KNOWN_TYPES, SYSTEM_MESSAGE

    assert FED_TYPES <= KNOWN_TYPES
    message = user_message("shown only if fed")
    for kind in sorted((KNOWN_TYPES | {SYSTEM_MESSAGE}) - FED_TYPES):
        transcript = Transcript()
        transcript.turn_started()
        before = transcript.take_all()
        feed(transcript, Event(kind, 7, 1, {"turn": 1, "title": "t", "message": message, **message}))
        assert transcript.take_all() == [] and transcript.title == "", (kind, before)
