"""The kernel side of the chat sidebar (notebook/sidebar_comm.py), without a browser: binding a panel to the
current session, sending, the model picker, errors in the user's terms, and the comm's messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from notebook_helpers import FakeHost

from dsh_jupyter.notebook.host import HostError
from dsh_jupyter.notebook.sidebar_comm import (
    EARLIER_NOTE,
    SIDEBAR_TARGET,
    SidebarChats,
    earlier_turns,
    install_sidebar_comm,
)
from dsh_jupyter.session.events import ASSISTANT_MESSAGE, USER_MESSAGE, Event


def session(session_id: str, events: list[Event] | None = None) -> Any:
    return SimpleNamespace(id=session_id, session=SimpleNamespace(events=list(events or [])))


#: A session begun in cells: a prompt with a mention, an answer that called a tool, and its final answer.
EARLIER = [
    Event(USER_MESSAGE, 1, 0, {"role": "user", "source": {"kind": "user"},
                               "content": [{"type": "text", "text": "What is in @[df](dsh-variable:df)?"}]}),
    Event(USER_MESSAGE, 2, 0, {"role": "user", "source": {"kind": "session-reference"}, "content": []}),
    Event(ASSISTANT_MESSAGE, 3, 0, {"message": {"role": "assistant", "content": [
        {"type": "tool-call", "id": "c1", "name": "python", "arguments": "{}"}]}}),
    Event(ASSISTANT_MESSAGE, 4, 0, {"message": {"role": "assistant", "content": [
        {"type": "text", "text": "Two columns."}]}}),
]


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
    assert [(item["kind"], item.get("text")) for item in chats.panel().items] == [
        ("notice", EARLIER_NOTE), ("user", "What is in @df?"), ("assistant", "Two columns.")]
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


def test_earlier_turns_keep_prompts_and_answers_and_the_last_ones() -> None:
    agent = session("s", EARLIER)
    assert earlier_turns(agent) == [("user", "What is in @[df](dsh-variable:df)?"), ("assistant", "Two columns.")]
    assert earlier_turns(agent, limit=1) == [("assistant", "Two columns.")]
    assert earlier_turns(session("empty")) == []


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
