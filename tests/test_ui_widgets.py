"""Widget models without a browser: state, commands, stale queries, streaming and escaping."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kernel_helpers import KernelRunner
from notebook_helpers import (
    HOSTILE_LABELS,
    VIEWS,
    WIDGET_SOURCES,
    FakeHost,
    candidate,
    invoke,
    run_view_scenario,
    view_bundle,
)

from dsh_jupyter.agent.events import (
    ApprovalDecided,
    AssistantMessage,
    MessageRecorded,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from dsh_jupyter.agent.transcript_feed import apply_event
from dsh_jupyter.conversation.fold import Transcript
from dsh_jupyter.ui.assets import STATIC
from dsh_jupyter.ui.widgets import (
    ChatPanel,
    ChatTranscript,
    MentionPicker,
    PromptBox,
    readable_prompt,
    view_item,
)

USER = {"kind": "user"}


@pytest.fixture
def host() -> FakeHost:
    return FakeHost(
        sessions=[
            candidate("id-1", "alpha analysis", cwd="/nb", same_workspace=True, created_at=2_000),
            candidate("id-2", "beta", created_at=3_000),
            candidate("id-3", "gamma", cwd="/far", created_at=1_000),
        ]
    )


def user_recorded(text: str = "hi") -> MessageRecorded:
    content = [{"type": "text", "text": text}]
    return MessageRecorded(turn=1, seq=1, message={"role": "user", "source": USER, "content": content})


# --------------------------------------------------------------------------- files and import cost

def test_views_are_package_files_loaded_by_path() -> None:
    from dsh_jupyter.ui.approval_widget import ApprovalWidget

    for cls, name in ((MentionPicker, "picker.js"), (PromptBox, "prompt.js"), (ChatTranscript, "chat.js")):
        assert Path(str(getattr(cls._esm, "_path", ""))) == STATIC / name
        assert Path(str(getattr(cls._css, "_path", ""))) == STATIC / "widgets.css"
    assert Path(str(getattr(ApprovalWidget._esm, "_path", ""))) == STATIC / "approval.js"
    assert Path(str(getattr(ApprovalWidget._css, "_path", ""))) == STATIC / "approval.css"
    assert {f"{name}.js" for name in VIEWS} == {"picker.js", "prompt.js", "chat.js", "approval.js"}
    assert STATIC.parent == Path(__file__).resolve().parents[1] / "dsh_jupyter" / "ui"


@pytest.mark.parametrize("name", VIEWS)
def test_views_set_text_with_textcontent_only(name: str) -> None:
    source = (WIDGET_SOURCES / f"{name}.ts").read_text(encoding="utf-8")
    bundle = view_bundle(name).read_text(encoding="utf-8")
    assert "textContent" in bundle  # text is set through textContent (escape.ts: textElement)
    for unsafe in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert unsafe not in source and unsafe not in bundle, f"{name} uses {unsafe}"
    assert re.search(r"export default \{ render \}", source)
    assert re.search(rf"export \{{[^}}]*\b{name}_default as default\b", bundle)


def test_picker_view_cancels_stale_queries() -> None:
    source = (WIDGET_SOURCES / "picker.ts").read_text(encoding="utf-8")
    assert "new AbortController()" in source and "controller?.abort()" in source
    assert "experimental.invoke<ISearchResponse | null>(\n        'search_command'" in source
    assert "signal: own.signal" in source
    assert "mine !== seq" in source  # responses older than the newest request are ignored
    for key in ("ArrowDown", "ArrowUp", "Enter", "Escape"):
        assert f"'{key}'" in source


def test_command_names_are_registered() -> None:
    assert set(MentionPicker._anywidget_commands) == {"search_command", "choose_command"}
    assert set(PromptBox._anywidget_commands) == {"send_command"}
    assert set(ChatTranscript._anywidget_commands) == {"stop_command"}


def test_other_notebook_modules_do_not_import_anywidget() -> None:
    code = (
        "import sys, dsh_jupyter.notebook.completer, dsh_jupyter.ui.display, dsh_jupyter.escape;"
        "print('anywidget' in sys.modules, 'dsh_jupyter.ui.widgets' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --------------------------------------------------------------------------- picker

def test_search_filters_through_the_host(host: FakeHost) -> None:
    picker = MentionPicker(host)
    rows = picker.search("  @ALPHA ")
    assert [r["sessionId"] for r in rows] == ["id-1"]
    assert host.calls[-1] == ("candidates", "ALPHA")
    assert rows[0]["mention"] == "@[alpha analysis](dsh-session:ImlkLTEi)"
    with pytest.raises(TypeError, match="query must be a str"):
        picker.search(None)  # type: ignore[arg-type]


def test_search_command_answers_with_its_sequence_number(host: FakeHost) -> None:
    picker = MentionPicker(host)
    response = invoke(picker, "search_command", {"query": "a", "seq": 1, "view": "v1"})
    assert response["seq"] == 1 and response["query"] == "a"
    assert [r["sessionId"] for r in response["results"]] == ["id-1", "id-2", "id-3"]
    assert picker.results == response["results"]


def test_stale_requests_are_not_searched(host: FakeHost) -> None:
    picker = MentionPicker(host)
    invoke(picker, "search_command", {"query": "al", "seq": 5, "view": "v1"})
    searched = len(host.calls)
    for old in (5, 3):
        assert invoke(picker, "search_command", {"query": "a", "seq": old, "view": "v1"}) == {"seq": old, "stale": True}
    assert len(host.calls) == searched and [r["sessionId"] for r in picker.results] == ["id-1"]
    # another view of the same widget keeps its own sequence
    answer = invoke(picker, "search_command", {"query": "gam", "seq": 1, "view": "v2"})
    assert answer["results"][0]["sessionId"] == "id-3"


def test_bad_and_failing_searches_answer_with_errors(host: FakeHost) -> None:
    picker = MentionPicker(host)
    assert "text query" in invoke(picker, "search_command", {"seq": 1})["error"]
    assert "text query" in invoke(picker, "search_command", "nonsense")["error"]
    host.fail_candidates = OSError("the session store is unreadable\nsecond line")
    response = invoke(picker, "search_command", {"query": "a", "seq": 2, "view": "v"})
    assert response["error"] == "Search failed: the session store is unreadable" == picker.error


def test_query_set_from_python_searches_but_typing_leaves_it_to_the_view(host: FakeHost) -> None:
    picker = MentionPicker(host)
    picker.query = "beta"
    assert [r["sessionId"] for r in picker.results] == ["id-2"]
    calls = len(host.calls)
    picker.set_state({"query": "gamma"})  # as a browser keystroke arrives
    assert picker.query == "gamma" and len(host.calls) == calls  # the view will invoke search_command


def test_refresh_searches_again_and_bumps_the_revision(host: FakeHost) -> None:
    picker = MentionPicker(host, query="a")
    host.sessions.append(candidate("id-4", "delta", created_at=9_000))
    revision = picker._revision
    rows = picker.refresh()
    assert "id-4" in [r["sessionId"] for r in rows] and picker._revision == revision + 1
    host.fail_candidates = RuntimeError("boom")
    assert picker.refresh() == [] and picker.results == [] and picker.error == "Search failed: boom"


def test_choose_inserts_the_mention_into_the_prompt(host: FakeHost) -> None:
    prompt = PromptBox(host, value="compare with")
    picker = MentionPicker(host, target=prompt, query="a")
    mention = picker.choose(0)
    assert prompt.value == f"compare with {mention} "
    assert picker.selected == [mention]
    response = invoke(picker, "choose_command", {"sessionId": "id-3", "index": 0})
    assert response["mention"].startswith("@[gamma](dsh-session:")
    assert prompt.value == f"compare with {mention} {response['mention']} "
    picker.choose("id-1")  # chosen again: not listed twice, inserted again
    assert picker.selected == [mention, response["mention"]]


def test_choose_by_id_outside_the_results_asks_the_host(host: FakeHost) -> None:
    picker = MentionPicker(host, query="beta")
    assert picker.choose("id-3").startswith("@[gamma]")


@pytest.mark.parametrize(
    ("which", "error", "message"),
    [(7, IndexError, "no result 7"), ("nope", ValueError, "no session 'nope'"),
     (True, TypeError, "index or a session id"),
     (1.5, TypeError, "index or a session id")],
)
def test_choose_errors(host: FakeHost, which: Any, error: type[Exception], message: str) -> None:
    picker = MentionPicker(host, query="a")
    with pytest.raises(error, match=message):
        picker.choose(which)
    assert picker.selected == []


def test_choose_command_inserts_where_the_page_shows_the_caret(host: FakeHost) -> None:
    """The box's updates can still be on their way when a pick arrives (ipywidgets holds them back while the kernel
    is busy; the pick's command overtakes them): the view sends the box's text and caret as its page shows them,
    and the mention goes there, with that text as the change's base (for the view's merge)."""
    prompt = PromptBox(host, value="Compare")  # the kernel's copy: the last keys have not come yet
    picker = MentionPicker(host, target=prompt)
    picker.search("")
    response = invoke(picker, "choose_command", {"sessionId": "id-1", "text": "Compare  with this", "cursor": 8})
    mention = response["mention"]
    assert prompt.value == f"Compare {mention} with this"
    assert prompt.cursor == len(f"Compare {mention}")
    assert prompt.kernel_edit["base"] == "Compare  with this"
    # Anything else than a str and an int is not the page's state: the kernel's own copy is used.
    for bad in ({"text": 3, "cursor": 0}, {"text": "x", "cursor": True}, {"text": "x"}):
        box = PromptBox(host, value="mine")
        other = MentionPicker(host, target=box)
        other.search("")
        assert "mention" in invoke(other, "choose_command", {"sessionId": "id-1", **bad})
        assert box.value.startswith("mine ")


def test_choose_command_reports_errors(host: FakeHost) -> None:
    picker = MentionPicker(host)
    assert "no result 3" in invoke(picker, "choose_command", {"index": 3})["error"]
    assert "sessionId or an index" in invoke(picker, "choose_command", None)["error"]


def test_hostile_labels_stay_raw_in_data_and_escaped_in_mentions() -> None:
    host = FakeHost(sessions=[candidate(f"id-{i}", label, created_at=i) for i, label in enumerate(HOSTILE_LABELS)])
    picker = MentionPicker(host)
    rows = invoke(picker, "search_command", {"query": "", "seq": 1, "view": "v"})["results"]
    assert sorted(r["label"] for r in rows) == sorted(HOSTILE_LABELS)  # raw: the view escapes
    for row in rows:
        assert "\x1b" not in row["mention"] and "\x00" not in row["mention"]
    assert any("\\\\x1b[31mred" in r["mention"] for r in rows)


def test_picker_argument_errors(host: FakeHost) -> None:
    with pytest.raises(TypeError, match="candidates"):
        MentionPicker(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="PromptBox"):
        MentionPicker(host, target="box")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- prompt box

def test_insert_at_the_caret_with_spacing() -> None:
    box = PromptBox(value="ask about please")
    box.cursor = len("ask about")
    box.insert("@[x](dsh-session:Ing)")
    assert box.value == "ask about @[x](dsh-session:Ing) please"
    assert box.cursor == len("ask about @[x](dsh-session:Ing)")
    empty = PromptBox()
    empty.insert("@y")
    assert empty.value == "@y " and empty.cursor == -1
    with pytest.raises(TypeError):
        empty.insert(3)  # type: ignore[arg-type]


class _RecordingComm:
    """A comm that keeps what a widget sends its views (ipywidgets sends state only once it has a comm)."""

    kernel = object()
    comm_id = "recording"

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, data: dict[str, Any] | None = None, buffers: Any = None) -> None:
        self.sent.append(data or {})

    def on_msg(self, _handler: Any) -> None:
        pass

    def close(self, *_args: Any, **_kwargs: Any) -> None:
        pass


def test_each_text_change_of_the_kernel_goes_out_with_the_text_it_started_from(host: FakeHost) -> None:
    """The view merges a kernel change into what was typed meanwhile (labextension/src/merge.ts): for that, each
    change of ``value`` the kernel makes travels in one update with the text it started from and a new number."""
    box = PromptBox(host, value="compare")
    comm = _RecordingComm()
    box.comm = comm

    def last_update() -> dict[str, Any]:
        return dict(comm.sent[-1]["state"])

    box.insert("@[a](dsh-session:b)")  # the picker's insertion
    assert last_update() == {"value": "compare @[a](dsh-session:b) ", "kernel_edit": {"base": "compare", "n": 1}}
    box.submit()  # sent from Python: the kernel empties the box
    update = last_update()
    assert update["value"] == "" and update["kernel_edit"] == {"base": "compare @[a](dsh-session:b) ", "n": 2}
    host.submitted[-1].future.set_exception(RuntimeError("too many references: at most 3"))
    update = last_update()  # given back
    assert update["value"] == "compare @[a](dsh-session:b) "
    assert update["kernel_edit"] == {"base": "", "n": 3, "joiner": "\n"}  # above anything typed since, on its line


def test_a_views_text_from_before_the_kernels_edit_does_not_undo_it(host: FakeHost) -> None:
    """A pick overtakes the box's own updates (ipywidgets holds them back while the kernel works on the one before):
    the kernel inserts into the text the page showed, then gets the box's update from before the insertion. That
    update says which kernel edit the view knew (``seen_edit``); holding just the text the edit started from, it
    leaves the edit in place and the edit goes out again, for the view that showed the older text meanwhile."""
    box = PromptBox(host)
    comm = _RecordingComm()
    box.comm = comm
    box.set_state({"value": "compare", "cursor": -1, "seen_edit": 0})  # typed in the page
    box.insert("@[a](dsh-session:b)", shown=("compare", 7))  # the pick (edit 1)
    inserted = "compare @[a](dsh-session:b) "
    box.set_state({"value": "compare", "cursor": 7, "seen_edit": 0})  # the box's update, sent before edit 1 reached it
    assert box.value == inserted
    assert box.kernel_edit == {"base": "compare", "n": 2} and box.cursor == -1
    assert {"value": inserted, "kernel_edit": {"base": "compare", "n": 2}}.items() <= comm.sent[-1]["state"].items()
    # A view that knew the edits and went back to that text (the mention deleted) is taken at its word.
    box.set_state({"value": "compare", "seen_edit": 2})
    assert box.value == "compare"
    # Keys typed before an edit reached the view stay until the view sends them merged with it (merge.ts).
    box.insert("@[c](dsh-session:d)")  # edit 3
    box.set_state({"value": "compare more", "seen_edit": 2})
    assert box.value == "compare more"
    # A prompt sent from Python empties the box (an edit too): the text it took, coming back late, stays out.
    box.set_state({"value": "plot it", "seen_edit": 3})
    box.submit()
    box.set_state({"value": "plot it", "seen_edit": 3})
    assert box.value == "" and host.submitted[-1].text == "plot it"


def test_send_command_sends_and_labels(host: FakeHost) -> None:
    box = PromptBox(host)
    assert invoke(box, "send_command", {"value": "first"}) == {"mode": "sent"}
    assert host.submitted[-1].text == "first" and box.value == "" and box.status == "Sent."
    host.busy = True
    assert box.busy is False  # the button label follows events, the mode follows the host
    assert invoke(box, "send_command", {"value": "more"}) == {"mode": "steered"}
    assert box.status == "Prompt steered into running turn."


def test_a_view_send_leaves_the_box_to_the_view(host: FakeHost) -> None:
    box = PromptBox(host)
    box.value = "the next prompt, typed while the first travelled"
    assert invoke(box, "send_command", {"value": "first"}) == {"mode": "sent"}
    assert host.submitted[-1].text == "first"
    assert box.value == "the next prompt, typed while the first travelled"


def test_send_errors_keep_the_prompt(host: FakeHost) -> None:
    box = PromptBox(host)
    assert "prompt box is empty" in invoke(box, "send_command", {"value": "   "})["error"]
    assert "must be text" in invoke(box, "send_command", {"value": 3})["error"]
    host.fail_submit = ValueError("unknown session 'x': check the id with %dsh sessions")
    response = invoke(box, "send_command", {"value": "see @[x](dsh-session:Ingi)"})
    assert response["error"].startswith("unknown session 'x'")
    assert box.status_level == "error"
    assert box.value == ""  # the view that sent the text puts it back in its box (prompt.js)
    assert "no host" in invoke(PromptBox(), "send_command", {"value": "hello"})["error"]


def test_failure_before_the_log_gives_the_prompt_back(host: FakeHost) -> None:
    box = PromptBox(host)
    box.value = "analyse @[a](dsh-session:ImEi)"
    box.submit()
    assert box.value == ""
    host.submitted[-1].future.set_exception(RuntimeError("too many references: at most 3"))
    assert box.value == "analyse @[a](dsh-session:ImEi)"
    assert box.status.startswith("Not sent: too many references")


def test_a_prompt_given_back_goes_above_what_was_typed_since(host: FakeHost) -> None:
    """The next prompt, typed while the first one was being prepared, stays, and the refused one is not lost."""
    box = PromptBox(host)
    # Sent from Python (the kernel emptied the box): the kernel puts it back above what it has received since.
    box.value = "analyse @[a](dsh-session:ImEi)"
    box.submit()
    box.value = "and then plot it"  # typed in the page meanwhile
    host.submitted[-1].future.set_exception(RuntimeError("too many references: at most 3"))
    assert box.value == "analyse @[a](dsh-session:ImEi)\nand then plot it"
    assert box.kernel_edit == {"base": "and then plot it", "n": 2, "joiner": "\n"}
    assert box.status.startswith("Not sent: too many references") and box.status_level == "error"
    box.value = "again"
    box.submit()
    box.value = "   "  # only blanks typed since: kept too, as a view keeps them (merge.ts givenBack)
    host.submitted[-1].future.set_exception(RuntimeError("no model"))
    assert box.value == "again\n   "
    box.submit()
    host.submitted[-1].future.set_exception(RuntimeError("no model"))  # nothing typed since: the prompt alone
    assert box.value == "again\n   "


def test_a_prompt_a_view_sent_is_given_back_by_the_view(host: FakeHost) -> None:
    """Sent from a view, the prompt goes back through ``returned``: the view puts it above what it shows, which the
    kernel may not have received yet (its copy of the box can even still hold the prompt itself)."""
    box = PromptBox(host)
    box.value = "analyse @[a](dsh-session:ImEi)"  # the page's last update before the send reached the kernel
    assert invoke(box, "send_command", {"value": "analyse @[a](dsh-session:ImEi)"}) == {"mode": "sent"}
    host.submitted[-1].future.set_exception(RuntimeError("too many references: at most 3"))
    assert box.value == "analyse @[a](dsh-session:ImEi)"  # left to the view
    assert box.returned == {"text": "analyse @[a](dsh-session:ImEi)", "n": 1, "applied": False}
    assert box.status == "Not sent: too many references: at most 3 (your prompt is back in the box)"
    assert invoke(box, "send_command", {"value": "second"}) == {"mode": "sent"}
    host.submitted[-1].future.set_exception(RuntimeError("no model"))
    assert box.returned == {"text": "second", "n": 2, "applied": False}


def test_failure_after_the_prompt_was_recorded_does_not_resend(host: FakeHost) -> None:
    box = PromptBox(host)
    box.value = "hello"
    box.submit()
    host.emit([user_recorded("hello")])
    host.submitted[-1].future.set_exception(RuntimeError("model went away"))
    assert box.value == "" and box.status == "Turn failed: model went away"


def test_standalone_prompt_box_forwards_events(host: FakeHost) -> None:
    seen: list[Any] = []
    box = PromptBox(host, listener=seen.append)
    box.value = "x"
    box.submit()
    host.emit([TurnStarted(turn=1)])
    assert seen == [TurnStarted(turn=1)]


# --------------------------------------------------------------------------- the chat view's item form

def test_view_items_are_the_form_chat_js_reads() -> None:
    state = Transcript()
    state.add_user("question", steered=True)
    source = {"kind": "session-reference", "form": "recall", "version": 1, "references": [
        {"sessionId": "id-1", "label": "<img src=x onerror=alert(1)>", "capturedThroughSeq": 4, "compacted": True,
         "truncated": False, "omittedMessages": 0, "omittedBytes": 0, "inputIndex": 0}]}
    for event in [
        TurnStarted(turn=1),
        MessageRecorded(turn=1, seq=2, message={"role": "user", "source": source, "content": []}),
        ReasoningDelta(turn=1, text="think"),
        TextDelta(turn=1, text="Let me look."),
        ToolStarted(turn=1, call_id="c1", name="bash", arguments='{"command": "ls -la\\n  /tmp"}'),
        ApprovalDecided(turn=1, call_id="c1", name="bash",
                        record={"allowed": True, "answeredBy": "person", "scope": "once"}),
        ToolFinished(turn=1, call_id="c1", name="bash", text="a\nb", is_error=False),
        ToolStarted(turn=1, call_id="c2", name="bash", arguments='{"command": "sleep 9"}'),
        Notice(turn=1, text="hook warned", level="warning"),
        TurnEnded(turn=1, reason="interrupted", error="cancelled by user"),
    ]:
        apply_event(state, event)
    views = [view for view in map(view_item, state.snapshot()) if view is not None]
    assert [v["kind"] for v in views] == ["user", "notice", "context", "reasoning", "assistant", "tool", "tool",
                                          "notice", "end"]
    assert views[0] == {"id": "i1", "kind": "user", "text": "question", "steered": True}
    assert views[1]["text"] == "Prompt steered into running turn."
    assert views[2]["summary"] == "Referenced: <img src=x onerror=alert(1)> · complete · includes a summary"
    assert views[2]["references"][0]["label"] == "<img src=x onerror=alert(1)>"  # raw; chat.js escapes
    assert views[3] == {"id": "i4", "kind": "reasoning", "text": "think", "streaming": False}
    assert views[4] == {"id": "i5", "kind": "assistant", "text": "Let me look.", "streaming": False,
                        "doc": [{"tag": "p", "attrs": {}, "children": ["Let me look."]}]}
    assert views[5] == {"id": "i6", "kind": "tool", "callId": "c1", "name": "bash", "summary": "ls -la /tmp",
                        "arguments": '{"command": "ls -la\\n  /tmp"}', "result": "a\nb", "isError": False,
                        "done": True, "status": "ok", "approval": "allowed once by you"}  # the one place it is said
    assert views[6]["status"] == "stopped" and views[6]["done"] is True and views[6]["isError"] is False
    assert views[6]["approval"] == ""  # no question was asked
    assert views[8] == {"id": "i9", "kind": "end", "reason": "interrupted", "error": "cancelled by user"}
    assert len({v["id"] for v in views}) == len(views)


def test_readable_prompt() -> None:
    assert readable_prompt("see @[alpha](dsh-session:ImlkLTEi) now") == "see @alpha now"
    assert readable_prompt("bad @[x](dsh-session:%%%)") == "bad @[x](dsh-session:%%%)"


# --------------------------------------------------------------------------- chat panel

def test_chat_panel_send_then_stream(host: FakeHost) -> None:
    panel = ChatPanel(host)
    updates: list[list[dict[str, Any]]] = []
    panel.transcript.observe(lambda change: updates.append(change["new"]), "items")
    submission = panel.submit("look at @[alpha analysis](dsh-session:ImlkLTEi)")
    assert submission.mode == "sent" and host.submitted[-1].text.startswith("look at @[alpha analysis](")
    assert panel.prompt.value == ""

    def stream() -> None:
        host.emit([TurnStarted(turn=1), user_recorded()])
        host.emit(TextDelta(turn=1, text=f"w{n} ") for n in range(2000))
        host.emit([AssistantMessage(turn=1, text="", seq=3), TurnEnded(turn=1, reason="completed")])

    started = time.monotonic()
    agent = threading.Thread(target=stream)  # the listener runs on the agent thread
    agent.start()
    agent.join()
    elapsed = time.monotonic() - started
    # one update per 50 ms at most, plus the first and the final ones
    assert len(updates) <= 2 + int(elapsed / 0.05) + 1 < 2000
    final = updates[-1]
    assert [i["kind"] for i in final] == ["user", "assistant"]
    assert final[0]["text"] == "look at @alpha analysis" and final[0]["steered"] is False
    assert final[1]["text"] == "".join(f"w{n} " for n in range(2000)) and final[1]["streaming"] is False
    assert panel.transcript.busy is False and panel.prompt.busy is False
    panel.close()


def test_chat_panel_updates_are_spaced(host: FakeHost) -> None:
    """The panel's view is rate-limited: 30 deltas over a third of a second or more make at most one update per
    1/max_rate seconds, plus the first (at once) and the last (the turn's end).

    Counted against the time the deltas took rather than read from the gaps between the view's updates: an update
    is spaced from the one before at its start, and one that takes longer on a busy machine (the observer stamps
    its end) would shorten the next gap without any update coming early. The coalescer's own spacing is checked
    against a fake clock in tests/test_ui_coalescer.py."""
    panel = ChatPanel(host, max_rate=20)
    updates: list[float] = []
    panel.transcript.observe(lambda change: updates.append(time.monotonic()), "items")
    panel.submit("go")
    started = time.monotonic()
    for _ in range(30):
        host.emit([TextDelta(turn=1, text="x")])
        time.sleep(0.01)
    host.emit([TurnEnded(turn=1, reason="completed")])
    took = time.monotonic() - started
    assert panel.items[-1]["text"] == "x" * 30
    streamed = [stamp for stamp in updates if stamp >= started]
    assert 2 <= len(streamed) <= int(took * 20) + 2, (len(streamed), took)
    panel.close()


def test_chat_panel_steers_when_busy(host: FakeHost) -> None:
    panel = ChatPanel(host)
    panel.submit("first")
    host.emit([TurnStarted(turn=1)])
    host.busy = True
    assert panel.prompt.busy is True  # the Send button reads "Steer"
    submission = invoke(panel.prompt, "send_command", {"value": "also check the tests"})
    assert submission == {"mode": "steered"} and host.submitted[-1].was_busy
    panel._coalescer.flush()
    kinds = [(i["kind"], i.get("steered"), i.get("text")) for i in panel.items]
    assert ("user", True, "also check the tests") in kinds
    assert ("notice", None, "Prompt steered into running turn.") in kinds
    panel.close()


def test_chat_panel_errors_are_shown_and_the_prompt_kept(host: FakeHost) -> None:
    panel = ChatPanel(host)
    host.fail_submit = ValueError("budget exceeded: lower the references or raise the budget")
    assert "budget exceeded" in invoke(panel.prompt, "send_command", {"value": "big @[a](dsh-session:ImEi)"})["error"]
    assert [i["kind"] for i in panel.items] == ["notice"] and panel.items[0]["level"] == "error"
    host.fail_submit = None
    panel.submit("big @[a](dsh-session:ImEi)")
    host.submitted[-1].future.set_exception(RuntimeError("missing API key: set DEEPSEEK_API_KEY"))
    assert panel.items[-1]["text"] == "Error: missing API key: set DEEPSEEK_API_KEY"
    assert panel.prompt.value == "big @[a](dsh-session:ImEi)"  # not recorded: given back
    panel.submit()
    host.submitted[-1].future.cancel()
    assert panel.items[-1]["text"] == "Cancelled."
    panel.close()


def test_stop_button_cancels(host: FakeHost) -> None:
    panel = ChatPanel(host)
    assert invoke(panel.transcript, "stop_command", {}) == {"ok": True}
    assert host.cancelled == 1 and panel.items[-1]["text"] == "Stop requested."

    def refuse() -> None:
        raise RuntimeError("no turn to stop")

    host.cancel = refuse  # type: ignore[method-assign]
    assert invoke(panel.transcript, "stop_command", {}) == {"error": "no turn to stop"}
    assert panel.items[-1] == {**panel.items[-1], "text": "Stop failed: no turn to stop", "level": "error"}
    assert invoke(ChatTranscript(), "stop_command", {}) == {"error": "nothing to stop"}
    panel.close()


def test_chat_panel_needs_a_host() -> None:
    with pytest.raises(TypeError, match="submit_async"):
        ChatPanel(object())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the views, run under node

def test_picker_view_in_node(tmp_path: Path, host: FakeHost) -> None:
    rows = MentionPicker(host).search("") + MentionPicker(
        FakeHost(sessions=[candidate(f"h{i}", label) for i, label in enumerate(HOSTILE_LABELS)])).search("")
    import json

    scenario = r"""
const model = new Model({ query: "", placeholder: "search", _revision: 0, target: "IPY_MODEL_box-1" });
// The prompt box as this page shows it (the kernel's copy may lag behind): sent with each pick.
model.widget_manager = { get_model: async (id) => { assert.equal(id, "box-1");
                                                    return new Model({ value: "Compare  please", cursor: 8 }); } };
const { calls, invoke } = fakeInvoke();
const el = new Element("div");
const dispose = view.render({ model, el, experimental: { invoke } });
const input = el.byClass("dsh-picker-input")[0];
const list = el.byClass("dsh-picker-list")[0];
assert.equal(calls.length, 1);
assert.equal(calls[0].name, "search_command");
assert.deepEqual([calls[0].msg.query, calls[0].msg.seq], ["", 1]);

// typing aborts the request in flight; only the newest answer is shown
input.value = "a"; input.fire("input");
input.value = "al"; input.fire("input");
assert.equal(model.get("query"), "al");
assert.ok(model.saved >= 2);
assert.deepEqual(calls.map((c) => c.aborted), [true, true, false]);
assert.deepEqual(calls.map((c) => c.msg.seq), [1, 2, 3]);
assert.ok(new Set(calls.map((c) => c.msg.view)).size === 1);
calls[1].answer({ seq: 2, results: ROWS.slice(0, 1) });  // late answer to an aborted request
await tick();
assert.equal(list.children.length, 0);
calls[2].answer({ seq: 3, query: "al", results: ROWS });
await tick();
const items = list.children;
assert.equal(items.length, ROWS.length);
const text = list.textContent;
assert.ok(text.includes("<img src=x onerror=alert(1)>"), "markup shown as text");
assert.ok(text.includes("\\x1b[31mred\\x1b[0m"), "controls shown as \\xNN");
assert.ok(text.includes("nul\\x00byte"));
assert.ok(!text.includes("\x1b") && !text.includes("\x00"));
assert.ok(text.includes("✓ same workspace"));
assert.ok(text.includes("(no cwd)"));
assert.equal(items[0].getAttribute("aria-selected"), "true");

// keyboard: down, up, down, Enter chooses the highlighted row
input.fire("keydown", { key: "ArrowDown" });
input.fire("keydown", { key: "ArrowUp" });
const down = input.fire("keydown", { key: "ArrowDown" });
assert.ok(down.defaultPrevented);
assert.equal(items[1].getAttribute("aria-selected"), "true");
input.fire("keydown", { key: "Enter" });
await tick();
const choose = calls[calls.length - 1];
assert.equal(choose.name, "choose_command");
assert.equal(choose.msg.sessionId, ROWS[1].sessionId);
assert.deepEqual([choose.msg.text, choose.msg.cursor], ["Compare  please", 8]);
choose.answer({ mention: ROWS[1].mention });
await tick();
assert.ok(el.byClass("dsh-picker-status")[0].textContent.startsWith("Inserted "));

// Escape clears the query and searches again; a Python-side query change searches too
input.fire("keydown", { key: "Escape" });
assert.equal(input.value, "");
assert.equal(calls[calls.length - 1].msg.query, "");
model.set("query", "from python");
assert.equal(input.value, "from python");
assert.equal(calls[calls.length - 1].msg.query, "from python");
const before = calls.length;
model.set("_revision", 1);
assert.equal(calls.length, before + 1);

// errors are shown escaped
calls[calls.length - 1].answer({ seq: calls[calls.length - 1].msg.seq, error: "Search failed: \x1b[1mboom" });
await tick();
assert.equal(el.byClass("dsh-picker-status")[0].textContent, "Search failed: \\x1b[1mboom");
dispose();
console.log("ok");
""".replace("ROWS", json.dumps(rows, ensure_ascii=False))
    assert run_view_scenario(tmp_path, STATIC / "picker.js", scenario).strip() == "ok"


def test_chat_view_in_node(tmp_path: Path) -> None:
    scenario = r"""
const model = new Model({ items: [], busy: true, title: "T\x1b" });
const { calls, invoke } = fakeInvoke();
const el = new Element("div");
view.render({ model, el, experimental: { invoke } });
const log = el.byClass("dsh-chat-log")[0];
assert.equal(el.byClass("dsh-chat-title")[0].textContent, "T\\x1b");
const items = [
  { id: "i1", kind: "user", text: "hi <b>", steered: true },
  { id: "i2", kind: "reasoning", text: "think", streaming: true },
  { id: "i3", kind: "assistant", text: "par", streaming: true },
];
model.set("items", items);
assert.equal(log.children.length, 3);
assert.ok(log.textContent.includes("You · steered into running turn"));
assert.ok(log.textContent.includes("hi <b>"));
const reasoning = log.children[1];
assert.equal(reasoning.tagName, "DETAILS");
assert.equal(reasoning.open, false);  // hidden by default
reasoning.open = true;                // the user opens it
const assistant = log.children[2];
model.set("items", [items[0], { ...items[1], streaming: false },
  { ...items[2], text: "partial\x07 text", streaming: false },
  { id: "i4", kind: "tool", name: "bash", summary: 'command="ls"', arguments: '{"command":"ls"}', result: "",
    isError: false, done: false, status: "running" },
  { id: "i5", kind: "context", summary: "Referenced 1 session", references: [{ sessionId: "s\n1",
    label: "<img src=x onerror=alert(1)>", capturedThroughSeq: 3, compacted: true, truncated: true,
    omittedMessages: 1, omittedBytes: 9 }] },
]);
assert.equal(log.children[1], reasoning, "nodes are reused across updates");
assert.equal(reasoning.open, true, "open state survives an update");
assert.equal(log.children[2], assistant);
assert.equal(assistant.textContent, "partial\\x07 text");
const tool = log.children[3];
assert.ok(tool.textContent.startsWith('bash(command="ls") running…'));
const failed = { ...model.get("items")[3], result: "out", done: true, isError: true, status: "error" };
model.set("items", [...model.get("items").slice(0, 3), failed, model.get("items")[4]]);
assert.equal(log.children[3], tool);
assert.ok(tool.classList.contains("dsh-error"));
assert.ok(tool.textContent.includes("out"));
const stopped = { ...failed, result: "", isError: false, status: "stopped" };
model.set("items", [...model.get("items").slice(0, 3), stopped, model.get("items")[4]]);
assert.ok(tool.textContent.startsWith('bash(command="ls") stopped'), tool.textContent);
assert.ok(!tool.classList.contains("dsh-error"));
assert.ok(log.textContent.includes("<img src=x onerror=alert(1)>"));
assert.ok(log.textContent.includes("s\\x0a1 · through seq 3 · compacted · truncated: 1 messages, 9 bytes omitted"));
model.set("items", [items[0]]);
assert.equal(log.children.length, 1);
const stop = el.byClass("dsh-chat-stop")[0];
assert.equal(stop.disabled, false);
stop.fire("click");
assert.equal(calls[0].name, "stop_command");
model.set("busy", false);
assert.equal(stop.disabled, true);
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "chat.js", scenario).strip() == "ok"


#: A prompt view rendered on an empty model, with ``calls`` recording what it invokes (a scenario's start). The box
#: is editable text (chips for mentions): ``typeInto`` replaces its text as typing would, ``lineBreaks`` counts the
#: line breaks it asked the document for.
PROMPT_VIEW = r"""
Object.defineProperty(Element.prototype, "nodeType", { get() { return this.tagName === "#TEXT" ? 3 : 1; } });
Object.defineProperty(Element.prototype, "nodeValue", { get() { return this.tagName === "#TEXT" ? this.data : null; }
});
document.createTextNode = textNode;
let lineBreaks = 0;
document.execCommand = (name) => { if (name === "insertLineBreak") lineBreaks += 1; return true; };
const typeInto = (area, text) => { area.replaceChildren(...(text ? [textNode(text)] : [])); area.fire("input"); };
const model = new Model({ value: "", cursor: -1, placeholder: "ask", busy: false, disabled: false, status: "",
  status_level: "info" });
const { calls, invoke } = fakeInvoke();
const el = new Element("div");
view.render({ model, el, experimental: { invoke } });
"""


def test_prompt_view_in_node(tmp_path: Path) -> None:
    scenario = PROMPT_VIEW + r"""
const area = el.byClass("dsh-prompt-input")[0];
const button = el.byClass("dsh-prompt-send")[0];
assert.equal(button.textContent, "Send");
typeInto(area, "hello");
assert.equal(model.get("value"), "hello");
assert.equal(model.get("seen_edit"), 0);  // sent with the number of the kernel's latest edit it had applied: none
assert.equal(model.get("cursor"), -1);  // no caret in the box: it stays at the end (the browser tests move it)
model.set("value", "he @[x](dsh-session:Ing) llo");  // a mention inserted from Python
await tick();  // a new value is shown once the rest of its update is in (a microtask later)
assert.equal(area.value, "he @[x](dsh-session:Ing) llo");
// ...shows as a chip reading @x that keeps the markup; the text around it stays text.
const chip = el.byClass("jp-DshChip")[0];
assert.equal(chip.textContent, "@x");
assert.equal(chip.dataset.markup, "@[x](dsh-session:Ing)");
assert.equal(chip.contentEditable, "false");
assert.equal(area.textContent, "he @x llo");
model.set("busy", true);
assert.equal(button.textContent, "Steer");
area.fire("keydown", { key: "Enter", ctrlKey: true });
await tick();
assert.equal(calls[0].name, "send_command");
assert.equal(calls[0].msg.value, "he @[x](dsh-session:Ing) llo");
// The box empties at once, in the view and in the model (overtaking any update still on its way).
assert.equal(area.value, "");
assert.equal(model.get("value"), "");
assert.equal(button.textContent, "Sending…");
// Typed and sent again before the kernel answered: queued, delivered after the first answer.
typeInto(area, "second");
area.fire("keydown", { key: "Enter", ctrlKey: true });
await tick();
assert.equal(calls.length, 1);
assert.equal(area.value, "");
calls[0].answer({ error: "unknown session\x1b" });
await tick();
assert.equal(el.byClass("dsh-prompt-status")[0].textContent, "unknown session\\x1b");
// The refused prompt is back in the box (what was typed since would follow it).
assert.equal(area.value, "he @[x](dsh-session:Ing) llo");
assert.equal(model.get("value"), "he @[x](dsh-session:Ing) llo");
assert.equal(calls.length, 2);
assert.equal(calls[1].msg.value, "second");
calls[1].answer({ mode: "steered" });
await tick();
assert.equal(area.value, "he @[x](dsh-session:Ing) llo");
assert.equal(button.textContent, "Steer");
assert.equal(button.disabled, false);
// A change the kernel made before the keys typed since reached it (a mention picked, sent with the text it
// started from and a new number, in one update whatever the order of its keys) is merged: the keys stay.
typeInto(area, "he @[x](dsh-session:Ing) llo what was");
model.set("value", "he @[x](dsh-session:Ing) llo @[y](dsh-session:Ing) ");
model.set("kernel_edit", { base: "he @[x](dsh-session:Ing) llo", n: 1 });
await tick();
assert.equal(area.value, "he @[x](dsh-session:Ing) llo @[y](dsh-session:Ing)  what was");
assert.equal(model.get("value"), area.value);  // and the merged text goes back to the kernel
assert.equal(model.get("seen_edit"), 1);  // saying it knew that edit
// Both changed the same words: what was typed stays.
typeInto(area, "typed over");
model.set("kernel_edit", { base: "he @[x](dsh-session:Ing) llo @[y](dsh-session:Ing)  what was", n: 2 });
model.set("value", "he @[x](dsh-session:Ing) llo @[z](dsh-session:Ing) what was");
await tick();
assert.equal(area.value, "typed over");
assert.equal(model.get("value"), "typed over");
assert.equal(model.get("seen_edit"), 2);
// A value set without a new edit (from Python directly) is shown as it is.
model.set("value", "set from Python");
await tick();
assert.equal(area.value, "set from Python");
// A prompt the kernel gives back while keys it has not seen were typed goes on its own line above them.
typeInto(area, "");
typeInto(area, "plot it");
model.set("kernel_edit", { base: "", n: 3, joiner: "\n" });
model.set("value", "the refused prompt");
await tick();
assert.equal(area.value, "the refused prompt\nplot it");
assert.equal(model.get("value"), area.value);
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "prompt.js", scenario).strip() == "ok"


# --------------------------------------------------------------------------- picker: message-body search toggle

class BodyHost(FakeHost):
    """A host whose candidates() can also search message bodies (as the session catalog does)."""

    bodies: ClassVar[dict[str, str]] = {"id-3": "we discussed parquet partitions"}

    def candidates(self, query: str, limit: int | None = None, *, body: bool = False) -> list[dict[str, Any]]:
        rows = super().candidates(query, limit)
        if body:
            self.calls.append(("body", query))
            ids = {r["sessionId"] for r in rows}
            rows += [dict(s) for s in self.sessions
                     if s["sessionId"] not in ids and query.lower() in self.bodies.get(s["sessionId"], "")]
        return rows


def body_host() -> BodyHost:
    return BodyHost(sessions=[candidate("id-1", "alpha", created_at=2), candidate("id-3", "gamma", created_at=1)])


def test_picker_body_toggle_searches_message_bodies() -> None:
    host = body_host()
    picker = MentionPicker(host)
    assert picker.search("parquet") == []
    assert [r["sessionId"] for r in picker.search("parquet", body=True)] == ["id-3"]
    picker.query = "parquet"
    assert picker.results == []
    picker.body = True  # ticking the box from Python searches again
    assert [r["sessionId"] for r in picker.results] == ["id-3"] and ("body", "parquet") in host.calls
    response = invoke(picker, "search_command", {"query": "parquet", "seq": 1, "view": "v", "body": False})
    assert response["results"] == []
    response = invoke(picker, "search_command", {"query": "parquet", "seq": 2, "view": "v"})  # default: the toggle
    assert [r["sessionId"] for r in response["results"]] == ["id-3"]
    assert "true or false" in invoke(picker, "search_command", {"query": "x", "seq": 3, "body": "yes"})["error"]
    with pytest.raises(TypeError, match="True or False"):
        picker.search("x", body="yes")  # type: ignore[arg-type]


def test_picker_body_toggle_needs_a_host_that_can_search_bodies(host: FakeHost) -> None:
    picker = MentionPicker(host)
    with pytest.raises(ValueError, match="cannot search message bodies"):
        picker.search("alpha", body=True)
    picker.body = True
    assert picker.results == [] and "cannot search message bodies" in picker.error
    assert "cannot search message bodies" in invoke(picker, "search_command",
                                                    {"query": "a", "seq": 1, "view": "v"})["error"]


def test_picker_body_toggle_in_node(tmp_path: Path) -> None:
    scenario = r"""
const model = new Model({ query: "", placeholder: "search", _revision: 0, body: false });
const { calls, invoke } = fakeInvoke();
const el = new Element("div");
const dispose = view.render({ model, el, experimental: { invoke } });
const box = el.byClass("dsh-picker-body-toggle")[0];
assert.equal(box.type, "checkbox");
assert.equal(box.checked, false);
assert.ok(el.byClass("dsh-picker-body")[0].textContent.includes("search message bodies"));
assert.equal(calls[0].msg.body, false);
box.checked = true; box.fire("change");
assert.equal(model.get("body"), true);
assert.ok(model.saved >= 1);
assert.equal(calls[calls.length - 1].msg.body, true);
const before = calls.length;
model.set("body", false);  // unticked from Python: the box follows and searches again
assert.equal(box.checked, false);
assert.equal(calls.length, before + 1);
assert.equal(calls[calls.length - 1].msg.body, false);
dispose();
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "picker.js", scenario).strip() == "ok"


# --------------------------------------------------------------------------- Markdown answers as a document tree


def test_markdown_tree_keeps_formatting_and_disarms_html() -> None:
    from dsh_jupyter.ui.markdown import markdown_tree

    tree = markdown_tree("# Total\n\nUse **bold**, `x < y` and\n\n- one\n- two\n\n```py\nprint('<b>')\n```")
    assert tree == [
        {"tag": "h1", "attrs": {}, "children": ["Total"]},
        {"tag": "p", "attrs": {}, "children": [
            "Use ", {"tag": "strong", "attrs": {}, "children": ["bold"]}, ", ",
            {"tag": "code", "attrs": {}, "children": ["x < y"]}, " and"]},
        {"tag": "ul", "attrs": {}, "children": [{"tag": "li", "attrs": {}, "children": ["one"]},
                                                {"tag": "li", "attrs": {}, "children": ["two"]}]},
        {"tag": "pre", "attrs": {}, "children": [
            {"tag": "code", "attrs": {"class": "language-py"}, "children": ["print('<b>')\n"]}]},
    ]
    hostile = markdown_tree(
        "<img src=x onerror=alert(1)> <script>alert(2)</script> [go](javascript:alert(3)) "
        "[ok](https://example.org) ![pic](https://example.org/a.png) ![bad](data:image/png;base64,AA) \x1b[31mred")
    paragraph = hostile[0]
    assert isinstance(paragraph, dict) and paragraph["tag"] == "p"
    texts = "".join(c for c in paragraph["children"] if isinstance(c, str))
    assert "<img src=x onerror=alert(1)> <script>alert(2)</script>" in texts  # shown as text
    assert "\\x1b[31mred" in texts  # terminal controls as in every other surface
    elements = [c for c in paragraph["children"] if isinstance(c, dict)]
    assert [(e["tag"], e["attrs"]) for e in elements] == [
        ("a", {}), ("a", {"href": "https://example.org"}), ("img", {"src": "https://example.org/a.png", "alt": "pic"}),
        ("img", {"alt": "bad"})]


def test_markdown_tree_tables_and_breaks() -> None:
    from dsh_jupyter.ui.markdown import markdown_tree

    table, paragraph = markdown_tree("| a | b |\n|:-|-:|\n| 1 | 2 |\n\nline one  \nline two\nthree")
    assert isinstance(table, dict) and table["tag"] == "table"
    head, body = table["children"]
    assert head == {"tag": "thead", "attrs": {}, "children": [{"tag": "tr", "attrs": {}, "children": [
        {"tag": "th", "attrs": {"align": "left"}, "children": ["a"]},
        {"tag": "th", "attrs": {"align": "right"}, "children": ["b"]}]}]}
    assert isinstance(body, dict) and body["tag"] == "tbody"
    assert paragraph == {"tag": "p", "attrs": {}, "children": [
        "line one", {"tag": "br", "attrs": {}, "children": []}, "\nline two\nthree"]}
    with pytest.raises(TypeError, match="needs a str"):
        markdown_tree(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- static copies


def _answered_panel(host: FakeHost, kind: str = "chat") -> ChatPanel:
    panel = ChatPanel(host, kind=kind)  # type: ignore[arg-type]
    panel.submit("Summarise <b>the</b> data")
    host.emit([
        TurnStarted(turn=1),
        user_recorded(),
        TextDelta(turn=1, text="Calling **bash**."),
        AssistantMessage(turn=1, text="Calling **bash**.", seq=2),
        ToolStarted(turn=1, call_id="c1", name="bash", arguments='{"command": "echo 42"}'),
        ToolFinished(turn=1, call_id="c1", name="bash", text="42\n<i>", is_error=False),
        TextDelta(turn=1, text="The total is `42`."),
        AssistantMessage(turn=1, text="The total is `42`.", seq=4),
        TurnEnded(turn=1, reason="completed"),
    ])
    host.submitted[-1].future.set_result(None)
    return panel


def test_static_copy_holds_the_conversation(host: FakeHost) -> None:
    panel = _answered_panel(host)
    copy = panel.static_copy()
    html, text = copy["text/html"], copy["text/plain"]
    assert html.startswith('<div class="dsh-static dsh-static-chat"><div class="dsh-html tex2jax_ignore')
    html = html.replace("&#10;", "\n")
    assert "Summarise &lt;b&gt;the&lt;/b&gt; data" in html and "<b>the" not in html
    assert "<strong>bash</strong>" in html and "<code>42</code>" in html
    assert "<details><summary>⚙ <code>bash · echo 42</code> ✓</summary><pre>42\n&lt;i&gt;</pre></details>" in html
    assert "New session" in html and "idle" in html
    assert text.splitlines()[0] == "dsh chat · New session · idle"
    assert "You: Summarise <b>the</b> data" in text and "[tool bash: echo 42] ok" in text
    assert "The total is `42`." in text
    assert "object at 0x" not in html + text
    panel.close()


def test_static_copy_of_an_empty_panel_and_a_failed_turn(host: FakeHost) -> None:
    panel = ChatPanel(host, kind="pick")
    assert "No messages yet." in panel.static_copy()["text/html"]
    assert panel.static_copy()["text/plain"] == "dsh pick · New session · idle\n\n(no messages yet)"
    panel.submit("go")
    assert panel.facts.status == "running" and panel.transcript.status == "running"
    host.submitted[-1].future.set_exception(RuntimeError("the model is unreachable"))
    assert panel.facts.status == "error" and panel.transcript.status == "error"
    assert "Error: the model is unreachable" in panel.static_copy()["text/plain"]
    panel.close()


def test_widget_bundle_carries_the_copy_and_the_view_gets_it(host: FakeHost) -> None:
    panel = _answered_panel(host)
    bundle = panel._repr_mimebundle_()
    assert bundle is not None
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id
    assert bundle["text/html"] == panel.static_copy()["text/html"]
    assert bundle["text/plain"] == panel.static_copy()["text/plain"]
    assert panel.transcript.panel_id == panel.model_id  # the view finds its output by this id
    assert panel.transcript.copy_html == bundle["text/html"] and panel.transcript.copy_text == bundle["text/plain"]
    panel.close()


def test_pick_panel_puts_the_answers_under_the_prompt(host: FakeHost) -> None:
    panel = ChatPanel(host, kind="pick")
    assert panel.children == (panel.picker, panel.prompt, panel.transcript, panel.questions)
    assert panel.transcript.variant == "pick"
    assert ChatPanel(host).children[0] is not None
    with pytest.raises(ValueError, match="'chat', 'pick' or 'sidebar'"):
        ChatPanel(host, kind="popup")  # type: ignore[arg-type]
    panel.picker.query = "alpha"
    assert panel.choose(0) == panel.selected[-1] == panel.picker.selected[-1]
    invoke(panel.prompt, "send_command", {"value": panel.prompt.value + "what changed?"})
    assert host.submitted[-1].text.endswith(" what changed?")  # the box itself is the view's to empty
    host.emit([TurnStarted(turn=1), TextDelta(turn=1, text="Nothing."), TurnEnded(turn=1, reason="completed")])
    panel._coalescer.flush()
    assert [i["kind"] for i in panel.items] == ["user", "assistant"]
    assert panel.items[0]["text"] == "@alpha analysis what changed?"
    panel.close()


def test_wait_returns_once_the_view_shows_the_end(host: FakeHost) -> None:
    panel = ChatPanel(host)
    assert panel.wait() is None  # nothing sent yet
    panel.submit("slow")
    with pytest.raises(TimeoutError, match="still running"):
        panel.wait(timeout=0.05)
    threading.Timer(0.05, lambda: host.submitted[-1].future.set_result("done")).start()
    assert panel.wait(timeout=5) == "done"
    assert panel.transcript.busy is False
    panel.close()


# --------------------------------------------------------------------------- in a real kernel: nbconvert


NBCONVERT_CELLS = [
    "%load_ext dsh_jupyter",
    "chat = %dsh chat\nchat",
    "chat.submit('hello from the chat panel')\nchat.wait(60)",
    "pick = %dsh pick\npick",
    "pick.submit('a question from the picker')\npick.wait(60)",
    "print('done')",
]


def test_nbconvert_html_shows_each_conversation(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    """An executed notebook with a chat and a pick panel, converted to HTML, reads as the conversations."""
    import json

    import nbformat
    from nbconvert import HTMLExporter

    nb = kernel_runner.run(NBCONVERT_CELLS, tmp_path, env={"DSH_HOME": str(tmp_path / "home")})
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "widgets.ipynb")
    executed = json.loads((tmp_path / "widgets.ipynb").read_text(encoding="utf-8"))
    for index, words in ((1, "hello from the chat panel"), (3, "a question from the picker")):
        (output,) = executed["cells"][index]["outputs"]
        data = output["data"]
        assert "application/vnd.jupyter.widget-view+json" in data
        assert words in "".join(data["text/html"]) and words in "".join(data["text/plain"])
        assert "Offline model" in "".join(data["text/html"])  # the answer, not only the prompt
    # nbclient stored the widget state, so the HTML embeds the widgets (drawn by the widget HTML manager);
    # a notebook saved by JupyterLab carries no widget state, and the HTML then shows the static copies.
    assert "widgets" in executed["metadata"]
    lab_saved = dict(executed, metadata={k: v for k, v in executed["metadata"].items() if k != "widgets"})
    (tmp_path / "lab-saved.ipynb").write_text(json.dumps(lab_saved), encoding="utf-8")
    for name in ("widgets", "lab-saved"):
        page, _ = HTMLExporter().from_filename(str(tmp_path / f"{name}.ipynb"))  # `jupyter nbconvert --to html`
        assert "hello from the chat panel" in page and "a question from the picker" in page
        assert "object at 0x" not in page and "Error displaying widget" not in page
    assert page.count('<div class="dsh-static dsh-static-chat">') == 1
    assert page.count('<div class="dsh-static dsh-static-pick">') == 1


# --------------------------------------------------------------------------- the views in node: keys, answers, header


def test_prompt_view_gives_back_a_prompt_the_kernel_returned_once(tmp_path: Path) -> None:
    """``PromptBox.returned``: the first view of the box puts the prompt back above what it shows and marks it
    applied; a second view of the same box, and views drawn later, leave it; one drawn while it waits does it."""
    scenario = PROMPT_VIEW + r"""
const area = el.byClass("dsh-prompt-input")[0];
const other = new Element("div");
view.render({ model, el: other, experimental: { invoke } });  // the same box shown twice in the page
typeInto(area, "then plot it");  // typed after the send, maybe not in the kernel yet
model.set("status", "Not sent: no such session (your prompt is back in the box)");
model.set("returned", { text: "summarise @[gone](dsh-session:Ing)", n: 1, applied: false });
await tick();
assert.equal(area.value, "summarise @[gone](dsh-session:Ing)\nthen plot it");
assert.equal(model.get("value"), area.value);  // saved for the kernel
assert.deepEqual(model.get("returned"), { text: "summarise @[gone](dsh-session:Ing)", n: 1, applied: true });
assert.equal(other.byClass("dsh-prompt-input")[0].value, area.value);  // not twice
assert.equal(el.byClass("dsh-prompt-status")[0].textContent,
             "Not sent: no such session (your prompt is back in the box)");
const later = new Element("div");
view.render({ model, el: later, experimental: { invoke } });  // drawn again (a reload): nothing more
assert.equal(model.get("value"), "summarise @[gone](dsh-session:Ing)\nthen plot it");
// Refused while no view of its box was showing: it comes back in the next one drawn.
const unseen = new Model({ ...model.state, value: "", returned: { text: "second", n: 2, applied: false } });
view.render({ model: unseen, el: new Element("div"), experimental: { invoke } });
assert.equal(unseen.get("value"), "second");
assert.equal(unseen.get("returned").applied, true);
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "prompt.js", scenario).strip() == "ok"


def test_prompt_view_keeps_keys_and_empties_as_it_sends(tmp_path: Path) -> None:
    scenario = PROMPT_VIEW + r"""
const root = el.byClass("dsh-prompt")[0];
assert.equal(root.getAttribute("data-lm-suppress-shortcuts"), "true");  // JupyterLab / Notebook 7 shortcuts
for (const type of ["keydown", "keyup", "keypress"]) {
  let stopped = false;
  root.fire(type, { key: "Enter", shiftKey: true, stopPropagation() { stopped = true; } });
  assert.ok(stopped, type + " must not reach the notebook");
}
const area = el.byClass("dsh-prompt-input")[0];
typeInto(area, "line one");
for (const key of [{ key: "Enter" }, { key: "Enter", shiftKey: true }]) {
  const event = area.fire("keydown", key);
  assert.equal(event.defaultPrevented, true, "Enter and Shift+Enter make a line break, not a block");
}
assert.equal(lineBreaks, 2);
assert.equal(calls.length, 0);
typeInto(area, "line one\n/bash ls");
const sent = area.fire("keydown", { key: "Enter", metaKey: true });
assert.equal(sent.defaultPrevented, true);
assert.equal(area.value, "");  // emptied as it is sent...
assert.equal(model.get("value"), "");
await tick();
assert.equal(calls[0].msg.value, "line one\n/bash ls");
calls[0].answer({ mode: "sent" });
await tick();
assert.equal(area.value, "");
typeInto(area, "kept");
area.fire("keydown", { key: "Enter", ctrlKey: true });
await tick();
calls[1].answer({ error: "unknown session" });
await tick();
assert.equal(area.value, "kept");  // ...and given back when the kernel refuses it
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "prompt.js", scenario).strip() == "ok"


def test_chat_view_builds_answers_from_the_tree_and_shows_the_header(tmp_path: Path) -> None:
    import json

    from dsh_jupyter.ui.widgets import markdown_tree

    doc = markdown_tree("Use **bold** and [a link](https://example.org) <img src=x onerror=alert(1)>\n\n- item")
    hostile = [{"tag": "script", "attrs": {}, "children": ["alert(1)"]},
               {"tag": "a", "attrs": {"href": "javascript:alert(2)", "onclick": "x"}, "children": ["bad"]}]
    scenario = rf"""
const model = new Model({{ items: [], busy: false, title: "Regional sales", details: ["ab12cd34", "offline"],
  status: "idle", variant: "chat" }});
const {{ calls, invoke }} = fakeInvoke();
const el = new Element("div");
view.render({{ model, el, experimental: {{ invoke }} }});
const stop = el.byClass("dsh-chat-stop")[0];
assert.equal(el.byClass("dsh-chat-title")[0].textContent, "Regional sales");
assert.equal(el.byClass("dsh-chat-details")[0].textContent, "ab12cd34 · offline");
assert.equal(el.byClass("dsh-chat-state")[0].textContent, "idle");
assert.equal(stop.hidden, true);  // Stop only while a turn runs
assert.equal(el.byClass("dsh-chat-empty")[0].hidden, false);
model.set("busy", true);
assert.equal(stop.hidden, false);
assert.equal(el.byClass("dsh-chat-state")[0].textContent, "running…");
assert.equal(el.byClass("dsh-chat-state")[0].dataset.status, "running");
model.set("items", [{{ id: "i1", kind: "assistant", text: "raw", streaming: false, doc: {json.dumps(doc)} }},
                    {{ id: "i2", kind: "assistant", text: "x", streaming: false, doc: {json.dumps(hostile)} }}]);
assert.equal(el.byClass("dsh-chat-empty")[0].hidden, true);
const [first, second] = el.byClass("dsh-chat-markdown");
const tags = first.all((n) => n.tagName !== "#TEXT").map((n) => n.tagName);
assert.deepEqual(tags, ["P", "STRONG", "A", "UL", "LI"]);
const link = first.all((n) => n.tagName === "A")[0];
assert.equal(link.getAttribute("href"), "https://example.org");
assert.equal(link.getAttribute("rel"), "noopener noreferrer");
assert.ok(first.textContent.includes("<img src=x onerror=alert(1)>"));  // shown as text
assert.deepEqual(second.all((n) => n.tagName !== "#TEXT").map((n) => n.tagName), ["SPAN", "A"]);
assert.equal(second.all((n) => n.tagName === "A")[0].getAttribute("href"), null);
assert.equal(second.all((n) => n.tagName === "A")[0].getAttribute("onclick"), null);
model.set("status", "error"); model.set("busy", false);
assert.equal(el.byClass("dsh-chat-state")[0].textContent, "error");
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "chat.js", scenario).strip() == "ok"


def test_pick_variant_hides_the_transcript_until_the_first_prompt(tmp_path: Path) -> None:
    scenario = r"""
const model = new Model({ items: [], busy: false, title: "", details: [], status: "idle", variant: "pick" });
const el = new Element("div");
view.render({ model, el, experimental: fakeInvoke() });
const root = el.byClass("dsh-chat")[0];
assert.ok(root.classList.contains("dsh-chat-unused"));
assert.equal(el.byClass("dsh-chat-title")[0].textContent, "New session");
model.set("items", [{ id: "i1", kind: "user", text: "hi", steered: false }]);
assert.ok(!root.classList.contains("dsh-chat-unused"));
console.log("ok");
"""
    assert run_view_scenario(tmp_path, STATIC / "chat.js", scenario).strip() == "ok"
