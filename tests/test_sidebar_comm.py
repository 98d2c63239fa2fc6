"""The kernel side of the chat sidebar (notebook/sidebar_comm.py), without a browser: binding a panel to the
current session, sending, the model picker, errors in the user's terms, and the comm's messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from notebook_helpers import FakeHost

from dsh_jupyter.agent import events as ev
from dsh_jupyter.notebook.host import HostError
from dsh_jupyter.notebook.sidebar_comm import SIDEBAR_TARGET, SidebarChats, install_sidebar_comm
from dsh_jupyter.session.events import (
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)


class FakeAgent:
    """A session's agent as the sidebar sees it: its id, its log, and listeners that its turns reach."""

    def __init__(self, session_id: str, events: list[Event] | None = None) -> None:
        self.id = session_id
        self.session = SimpleNamespace(events=list(events or []))
        self.listeners: list[Any] = []

    def subscribe(self, listener: Any) -> Any:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def emit(self, *events: ev.AgentEvent) -> None:
        for event in events:
            for listener in list(self.listeners):
                listener(event)


def session(session_id: str, events: list[Event] | None = None) -> Any:
    return FakeAgent(session_id, events)


#: A session begun in cells: a prompt with a mention, a tool call and its result, and the final answer.
EARLIER = [
    Event(TURN_START, 1, 0, {}),
    Event(USER_MESSAGE, 2, 0, {"role": "user", "source": {"kind": "user"},
                               "content": [{"type": "text", "text": "What is in @[df](dsh-variable:df)?"}]}),
    Event(ASSISTANT_MESSAGE, 3, 0, {"message": {"role": "assistant", "content": [
        {"type": "tool-call", "id": "c1", "name": "python", "arguments": "{}"}]}}),
    Event(TOOL_CALL, 4, 0, {"callId": "c1", "name": "python", "arguments": {"code": "df.shape"}}),
    Event(TOOL_RESULT, 5, 0, {"message": {"role": "tool", "content": [
        {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "(3, 2)"}]}]}}),
    Event(ASSISTANT_MESSAGE, 6, 0, {"message": {"role": "assistant", "content": [
        {"type": "text", "text": "Two columns."}]}}),
    Event(TURN_END, 7, 0, {"reason": {"kind": "completed"}}),
]


def shown(chats: SidebarChats) -> list[tuple[str, Any]]:
    """The panel's items as (kind, text or tool name), as the view gets them (a pending update sent now)."""
    panel = chats.panel()
    panel._coalescer.flush()
    return [(item["kind"], item.get("text", item.get("name"))) for item in panel.items]


def user_message(text: str) -> ev.MessageRecorded:
    return ev.MessageRecorded(1, 1, {"role": "user", "source": {"kind": "user"},
                                  "content": [{"type": "text", "text": text}]})


@dataclass
class SidebarHost(FakeHost):
    """A fake host with a current session that the first prompt creates, and models to choose from."""

    agent: Any = None
    models: list[str | None] = field(default_factory=list)

    def model_spec(self, spec: str | None = None) -> tuple[str, str | None]:
        return spec or "offline", None

    def model_for(self, spec: str | None) -> tuple[Any, str | None]:
        if spec == "openai:gpt-4o":
            raise HostError("$OPENAI_API_KEY is not set, so the model 'openai:gpt-4o' cannot be used")
        return object(), None

    def current(self, model: str | None = None) -> tuple[Any, str | None]:
        self.model_for(model)
        self.models.append(model)
        if self.agent is None:
            self.agent = session(f"session-{len(self.models)}")
        return self.agent, None

    def submit_async(self, text: str, listener: Any) -> Any:
        if self.agent is None:
            self.agent = session("session-made-by-prompt")
        return super().submit_async(text, listener)


class Comm:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.handlers: dict[str, Any] = {}
        self.closed = False

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def on_msg(self, handler: Any) -> None:
        self.handlers["msg"] = handler

    def on_close(self, handler: Any) -> None:
        self.handlers["close"] = handler

    def close(self) -> None:
        self.closed = True

    def message(self, data: dict[str, Any]) -> dict[str, Any]:
        self.handlers["msg"]({"content": {"data": data}})
        return self.sent[-1]


@pytest.fixture
def host() -> SidebarHost:
    return SidebarHost()


@pytest.fixture
def chats(host: SidebarHost) -> Any:
    made = SidebarChats(lambda: host)
    yield made
    made.close()


def test_the_first_prompt_binds_the_fresh_panel_to_the_session_it_made(host: SidebarHost, chats: SidebarChats) -> None:
    state = chats.state()
    assert state["sessionId"] is None and state["busy"] is False
    fresh = state["modelId"]
    assert chats.answer({"kind": "send", "text": "hello"}) == {"kind": "sent", "mode": "sent"}
    assert host.submitted[0].text == "hello"
    after = chats.state()
    assert after["sessionId"] == "session-made-by-prompt" and after["modelId"] == fresh  # the same panel
    assert after["busy"] is True  # the panel shows the turn at once
    assert chats.panel().items[0]["kind"] == "user"


def test_another_session_gets_its_own_panel_and_the_first_comes_back(host: SidebarHost, chats: SidebarChats) -> None:
    chats.answer({"kind": "send", "text": "hello"})
    first = chats.state()["modelId"]
    host.agent = session("other", EARLIER)  # %dsh new / resume in a cell
    other = chats.state()
    assert other["sessionId"] == "other" and other["modelId"] != first
    assert shown(chats) == [("user", "What is in @[df](dsh-variable:df)?"), ("tool", "python"),
                            ("assistant", "Two columns.")]  # the log folded as the cell showed it
    assert chats.panel().items[1]["result"] == "(3, 2)" and chats.panel().items[1]["done"] is True
    host.agent = session("session-made-by-prompt")
    assert chats.state()["modelId"] == first


def test_a_finished_turn_is_broadcast_to_every_sidebar(host: SidebarHost, chats: SidebarChats) -> None:
    comm = Comm()
    chats.opened(comm, {"content": {"data": {"kind": "bind", "request": 0}}})
    assert comm.sent[0]["kind"] == "state" and comm.sent[0]["request"] == 0
    assert comm.message({"kind": "send", "text": "hi", "request": 1}) == {"kind": "sent", "mode": "sent",
                                                                         "request": 1}
    host.submitted[0].future.set_result(None)
    assert comm.sent[-1]["kind"] == "state" and "request" not in comm.sent[-1]
    comm.handlers["close"]({})
    host.submitted.clear()
    chats.answer({"kind": "send", "text": "again"})
    host.submitted[0].future.set_result(None)
    assert len([m for m in comm.sent if m["kind"] == "state"]) == 2  # a closed comm hears nothing more


def test_the_model_picker_checks_the_model_and_sends_with_it(host: SidebarHost, chats: SidebarChats) -> None:
    models = chats.state()["models"]
    assert models[0] == {"spec": None, "label": "offline (default)", "available": True, "note": "DshMagics.model"}
    assert any(row["spec"] == "offline" for row in models)
    refused = chats.answer({"kind": "model", "model": "openai:gpt-4o"})
    assert refused is not None and refused["kind"] == "error"
    assert "OPENAI_API_KEY is not set" in refused["message"] and chats.model is None
    assert chats.answer({"kind": "model", "model": "offline"})["model"] == "offline"  # type: ignore[index]
    chats.answer({"kind": "send", "text": "hi"})
    assert host.models[-1] == "offline"  # the session's next turn uses it
    assert chats.answer({"kind": "model", "model": ""})["model"] is None  # type: ignore[index]


@pytest.mark.parametrize(("data", "says"), [
    ({"kind": "send", "text": "   "}, "the prompt box is empty"),
    ({"kind": "send", "text": 3}, "the prompt must be text"),
    ({"kind": "model", "model": 3}, "model spec"),
])
def test_bad_requests_answer_with_errors_and_send_nothing(host: SidebarHost, chats: SidebarChats,
                                                          data: dict[str, Any], says: str) -> None:
    reply = chats.answer(data)
    assert reply is not None and reply["kind"] == "error" and says in reply["message"]
    assert host.submitted == []
    assert chats.answer({"kind": "nonsense"}) is None


def test_a_failing_submit_says_why_and_keeps_the_panel_usable(host: SidebarHost, chats: SidebarChats) -> None:
    host.fail_submit = HostError("the current session is still running a turn; wait for it (%dsh wait)")
    reply = chats.answer({"kind": "send", "text": "hi"})
    assert reply == {"kind": "error", "message": "the current session is still running a turn; wait for it "
                                                 "(%dsh wait)"}
    host.fail_submit = None
    assert chats.answer({"kind": "send", "text": "hi"})["kind"] == "sent"  # type: ignore[index]


def test_a_prompt_refused_after_it_was_taken_goes_back_to_the_sidebar_that_sent_it(
        host: SidebarHost, chats: SidebarChats) -> None:
    """Refused before it reached the log (a mention of a session that is gone), after the answer "sent": the
    prompt comes back unasked on the comm that sent it, with why, for the sidebar to put back in its box."""
    comm, other = Comm(), Comm()
    chats.opened(comm, {"content": {"data": {"kind": "bind", "request": 0}}})
    chats.opened(other, {"content": {"data": {"kind": "bind", "request": 0}}})
    assert comm.message({"kind": "send", "text": "summarise @[gone](dsh-session:Ing)", "request": 1})["kind"] == "sent"
    host.submitted[-1].future.set_exception(ValueError("the mention @gone points to a session that no longer exists"))
    back = [m for m in comm.sent if m["kind"] == "returned"]
    assert back == [{"kind": "returned", "text": "summarise @[gone](dsh-session:Ing)",
                     "message": "the mention @gone points to a session that no longer exists"}]
    assert not any(m["kind"] == "returned" for m in other.sent)  # only to the sidebar that sent it
    # Once recorded, a failure of the turn is the turn's, shown in the panel: nothing comes back.
    comm.message({"kind": "send", "text": "hello", "request": 2})
    host.emit([user_message("hello")])
    host.submitted[-1].future.set_exception(RuntimeError("model went away"))
    assert len([m for m in comm.sent if m["kind"] == "returned"]) == 1


def test_the_target_is_registered_in_a_kernel_only_and_removed_again(host: SidebarHost) -> None:
    targets: dict[str, Any] = {}
    manager = SimpleNamespace(targets=targets, register_target=targets.__setitem__)
    shell = SimpleNamespace(kernel=SimpleNamespace(comm_manager=manager))
    remove = install_sidebar_comm(shell, lambda: host)
    comm = Comm()
    manager.targets[SIDEBAR_TARGET](comm, {"content": {"data": {"kind": "bind", "request": 0}}})
    assert comm.sent[0]["kind"] == "state"
    remove()
    assert SIDEBAR_TARGET not in manager.targets and comm.closed
    install_sidebar_comm(SimpleNamespace(), lambda: host)()  # terminal IPython: nothing to register


def test_a_turn_sent_from_a_cell_streams_into_the_panel_bound_before(host: SidebarHost,
                                                                     chats: SidebarChats) -> None:
    host.agent = agent = session("cells")
    comm = Comm()
    chats.opened(comm, {"content": {"data": {"kind": "bind", "request": 0}}})
    agent.emit(ev.TurnStarted(1), user_message("Show the date."), ev.TextDelta(1, "It is "))
    assert shown(chats) == [("user", "Show the date."), ("assistant", "It is ")]  # streaming, not at the end
    assert chats.panel().items[-1]["streaming"] is True
    assert comm.sent[-1]["kind"] == "state" and "request" not in comm.sent[-1]  # the prompt box hears a turn runs
    agent.emit(ev.TextDelta(1, "Tuesday."), ev.AssistantMessage(1, "It is Tuesday.", 3), ev.TurnEnded(1, "completed"))
    assert shown(chats) == [("user", "Show the date."), ("assistant", "It is Tuesday.")]
    assert len([m for m in comm.sent if m["kind"] == "state" and "request" not in m]) == 2  # started, ended


def test_the_panels_own_turn_shows_each_event_once(host: SidebarHost, chats: SidebarChats) -> None:
    host.agent = agent = session("s")
    chats.answer({"kind": "send", "text": "hello"})
    submitted = host.submitted[0]
    agent.subscribe(submitted.listener)  # the host hands the turn's events to the submission's listener too
    agent.emit(ev.TurnStarted(1), user_message("hello"), ev.TextDelta(1, "Hi"), ev.TextDelta(1, " there."),
               ev.AssistantMessage(1, "Hi there.", 3), ev.TurnEnded(1, "completed"))
    assert shown(chats) == [("user", "hello"), ("assistant", "Hi there.")]


def test_the_fresh_panel_follows_the_session_its_first_prompt_made(host: SidebarHost, chats: SidebarChats) -> None:
    chats.answer({"kind": "send", "text": "hello"})
    agent = host.agent
    assert isinstance(agent, FakeAgent) and len(agent.listeners) == 1
    agent.emit(ev.TurnStarted(1), user_message("hello"), ev.TurnEnded(1, "completed"))
    agent.emit(ev.TurnStarted(2), user_message("from a cell"), ev.AssistantMessage(2, "Done.", 3),
               ev.TurnEnded(2, "completed"))
    assert shown(chats) == [("user", "hello"), ("user", "from a cell"), ("assistant", "Done.")]


def test_a_resumed_session_is_followed_in_its_new_agent_only(host: SidebarHost, chats: SidebarChats) -> None:
    host.agent = old = session("s")
    panel = chats.panel()
    host.agent = new = session("s")  # %dsh resume s after %dsh new: a new agent object for the same session
    assert chats.panel() is panel and old.listeners == [] and len(new.listeners) == 1
    old.emit(ev.TurnStarted(1), user_message("stale"))
    new.emit(ev.TurnStarted(1), user_message("current"))
    assert shown(chats) == [("user", "current")]
    chats.close()
    assert new.listeners == []  # a closed panel listens to nothing


def test_the_sidebar_asks_for_variables_over_its_own_comm(host: SidebarHost, chats: SidebarChats) -> None:
    host.variable_candidates = lambda query, limit: [{"name": "df", "query": query, "limit": str(limit)}]  # type: ignore[attr-defined]
    assert chats.answer({"kind": "variables", "query": "d", "limit": 7}) == {
        "kind": "variables", "variables": [{"name": "df", "query": "d", "limit": "7"}]}
    assert chats.answer({"kind": "variables", "query": 3})["variables"][0]["query"] == ""  # type: ignore[index]


def test_the_sidebar_panel_is_the_transcript_with_questions_under_it(host: SidebarHost, chats: SidebarChats) -> None:
    from dsh_jupyter.ui.approval_widget import ApprovalWidget

    panel = chats.panel()
    assert panel.children == (panel.transcript, panel.questions)  # the sidebar brings its own prompt box
    question = ApprovalWidget()
    panel._show_question(question)
    assert panel.questions.children == (question,)
