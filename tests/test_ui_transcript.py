"""The one transcript model: agent events in, ordered items out; and the update coalescer."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from import_helpers import module_imports

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
from dsh_jupyter.ui import transcript as transcript_module
from dsh_jupyter.ui.transcript import (
    ContextItem,
    EndItem,
    NoticeItem,
    ReasoningItem,
    TextItem,
    ToolItem,
    Transcript,
    UpdateCoalescer,
    UserItem,
    argument_summary,
    item_id,
)


def user_recorded(text: str = "hi") -> MessageRecorded:
    return MessageRecorded(turn=1, seq=1, message={"role": "user", "source": {"kind": "user"},
                                                   "content": [{"type": "text", "text": text}]})


def fold(*events: AgentEvent, state: Transcript | None = None) -> Transcript:
    state = state or Transcript()
    for event in events:
        state.apply(event)
    return state


# --------------------------------------------------------------------------- the model has no view imports

def test_the_module_imports_no_widget_or_ipython() -> None:
    imported = {name.split(".")[0] for name in module_imports(Path(transcript_module.__file__),
                                                              transcript_module.__name__)}
    assert not imported & {"IPython", "ipywidgets", "anywidget", "traitlets", "ipykernel"}
    code = ("import sys, dsh_jupyter.ui.transcript; "
            "print(sorted(m for m in ('IPython', 'ipywidgets', 'anywidget') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------- folding events

def test_a_turn_folds_into_ordered_items() -> None:
    state = Transcript()
    state.add_user("question", steered=False)
    assert state.apply(TurnStarted(turn=1)) is True
    assert state.busy is True and state.finished is False
    for event in [
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
        assert state.apply(event) is False
    assert state.title == "Listing files"
    assert state.apply(TurnEnded(turn=1, reason="completed")) is True
    items = state.snapshot()
    assert [type(i) for i in items] == [UserItem, ReasoningItem, TextItem, ToolItem, TextItem, NoticeItem]
    reasoning, first, tool, second, notice = items[1:]
    assert isinstance(reasoning, ReasoningItem) and reasoning.text == "think more" and not reasoning.streaming
    assert isinstance(first, TextItem) and first.text == "Let me look."
    assert isinstance(tool, ToolItem)
    assert (tool.call_id, tool.summary, tool.result, tool.status) == ("c1", "ls -la /tmp", "a\nb", "ok")
    assert isinstance(second, TextItem) and second.text == "Done."
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
    tools = [i for i in state.snapshot() if isinstance(i, ToolItem)]
    assert [(t.call_id, t.summary, t.result, t.status) for t in tools] == [
        ("a", "echo first", "first", "ok"),
        ("b", "echo second", "second", "error"),
    ]


def test_a_result_without_its_start_still_shows() -> None:
    state = fold(ToolFinished(turn=1, call_id="z", name="python", text="late", is_error=False))
    (tool,) = state.snapshot()
    assert isinstance(tool, ToolItem) and (tool.call_id, tool.result, tool.status) == ("z", "late", "ok")


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
    tools = {i.call_id: i.status for i in items if isinstance(i, ToolItem)}
    assert tools == {"done": "ok", "slow": "stopped"}
    text = next(i for i in items if isinstance(i, TextItem))
    assert text.streaming is False
    ends = [i for i in items if isinstance(i, EndItem)]
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


def test_caps_and_the_argument_line() -> None:
    state = Transcript(max_items=5, max_tool_text=10)
    fold(ToolStarted(turn=1, call_id="c", name="python", arguments="not json " * 40),
         ToolFinished(turn=1, call_id="c", name="python", text="x" * 25, is_error=True), state=state)
    (tool,) = state.snapshot()
    assert isinstance(tool, ToolItem)
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


def test_reference_contexts_are_items_and_other_messages_are_not() -> None:
    source = {"kind": "session-reference", "form": "recall", "version": 1, "references": [
        {"sessionId": "id-1", "label": "<img src=x onerror=alert(1)>", "capturedThroughSeq": 4, "compacted": True,
         "truncated": False, "omittedMessages": 0, "omittedBytes": 0, "inputIndex": 0}]}
    state = fold(
        user_recorded(),
        MessageRecorded(turn=1, seq=2, message={"role": "user", "source": source, "content": []}),
        MessageRecorded(turn=1, seq=3, message={"role": "user", "source": {"kind": "session-reference"}}),
    )
    (context,) = state.snapshot()
    assert isinstance(context, ContextItem) and context.summary == (
        "Referenced: <img src=x onerror=alert(1)> · complete · includes a summary")
    assert context.references[0]["label"] == "<img src=x onerror=alert(1)>"  # raw; views escape
    assert "inputIndex" not in context.references[0]


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


def test_events_from_another_thread_while_reading() -> None:
    state = Transcript(max_items=None)

    def stream() -> None:
        for n in range(2000):
            state.apply(TextDelta(turn=1, text="x"))
            if n % 100 == 0:
                state.apply(ToolStarted(turn=1, call_id=f"c{n}", name="bash", arguments="{}"))
                state.apply(ToolFinished(turn=1, call_id=f"c{n}", name="bash", text="ok", is_error=False))

    agent = threading.Thread(target=stream)
    agent.start()
    while agent.is_alive():
        state.snapshot()
    agent.join()
    items = state.snapshot()
    assert sum(len(i.text) for i in items if isinstance(i, TextItem)) == 2000
    assert sum(1 for i in items if isinstance(i, ToolItem) and i.status == "ok") == 20


# --------------------------------------------------------------------------- coalescing

class FakeTimers:
    def __init__(self) -> None:
        self.armed: list[tuple[float, Callable[[], None]]] = []
        self.cancelled = 0

    def start(self, delay: float, fn: Callable[[], None]) -> FakeTimers.Handle:
        self.armed.append((delay, fn))
        return FakeTimers.Handle(self)

    class Handle:
        def __init__(self, timers: FakeTimers) -> None:
            self.timers = timers

        def cancel(self) -> None:
            self.timers.cancelled += 1


def test_coalescer_limits_flushes_to_its_rate() -> None:
    now = [100.0]
    timers = FakeTimers()
    published: list[float] = []
    coalescer = UpdateCoalescer(lambda: published.append(now[0]), max_rate=20, clock=lambda: now[0],
                                start_timer=timers.start)
    coalescer.poke()
    assert published == [100.0]
    for _ in range(100):
        now[0] += 0.0001
        coalescer.poke()
    assert len(published) == 1 and len(timers.armed) == 1
    delay, fire = timers.armed[0]
    assert delay == pytest.approx(0.05 - 0.0001, abs=1e-6)  # armed by the first throttled poke
    now[0] = 100.05
    fire()
    assert len(published) == 2
    fire()  # a stale timer does nothing
    assert len(published) == 2
    coalescer.poke()  # quiet for >= interval: at once
    now[0] = 100.2
    coalescer.poke()
    coalescer.poke(final=True)
    assert len(published) == 4 and coalescer.updates == 4
    coalescer.flush()  # nothing pending
    assert len(published) == 4


def test_a_final_poke_cancels_the_pending_timer_and_close_drops_it() -> None:
    now = [0.0]
    timers = FakeTimers()
    published: list[float] = []
    coalescer = UpdateCoalescer(lambda: published.append(now[0]), max_rate=10, clock=lambda: now[0],
                                start_timer=timers.start)
    coalescer.poke()
    now[0] = 0.01
    coalescer.poke()
    coalescer.poke(final=True)
    assert len(published) == 2 and timers.cancelled == 1
    timers.armed[0][1]()  # the cancelled timer fires anyway: ignored
    assert len(published) == 2
    now[0] = 0.02
    coalescer.poke()
    coalescer.close()
    timers.armed[-1][1]()
    assert len(published) == 2


def test_an_unlimited_rate_publishes_every_poke() -> None:
    published: list[int] = []
    coalescer = UpdateCoalescer(lambda: published.append(1), max_rate=float("inf"))
    for _ in range(5):
        coalescer.poke()
    assert len(published) == 5


@pytest.mark.parametrize("rate", [0, -1, True, "20"])
def test_coalescer_rejects_a_bad_rate(rate: object) -> None:
    with pytest.raises(ValueError, match="positive"):
        UpdateCoalescer(lambda: None, max_rate=rate)  # type: ignore[arg-type]


def test_a_failing_publish_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise RuntimeError("comm closed")

    UpdateCoalescer(broken).poke()
    assert "updating the transcript view failed" in caplog.text


def test_publish_runs_isolated_or_in_the_pokers_context() -> None:
    import contextvars

    cell: contextvars.ContextVar[str] = contextvars.ContextVar("cell", default="none")
    seen: list[str] = []
    cell.set("cell-7")
    UpdateCoalescer(lambda: seen.append(cell.get())).poke()
    UpdateCoalescer(lambda: seen.append(cell.get()), isolate=False).poke()
    assert seen == ["none", "cell-7"]


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
