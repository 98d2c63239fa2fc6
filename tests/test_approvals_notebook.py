"""The notebook side of approvals: answers, the terminal prompt, the widget approver and the host's policy."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from notebook_helpers import loaded_shell

from dsh_jupyter.agent import events as ev
from dsh_jupyter.agent.approvals import NOBODY_TO_ASK, ApprovalDecision, ApprovalRequest, Scope, describe_call
from dsh_jupyter.agent.transcript_feed import apply_event
from dsh_jupyter.conversation.calls import approval_note
from dsh_jupyter.conversation.fold import Transcript
from dsh_jupyter.conversation.items import ToolCall
from dsh_jupyter.notebook import approval
from dsh_jupyter.notebook.approval import (
    StdinApprover,
    WidgetApprover,
    approver_for,
    ask_on_stdin,
    choices_for,
    decision_from_answer,
    record_line,
)
from dsh_jupyter.ui.render import TranscriptMarkdown


def request(tool: str = "bash", command: str = "git push origin main") -> ApprovalRequest:
    arguments = {"command": command} if tool == "bash" else {"code": command}
    shown, language = describe_call(tool, arguments)
    return ApprovalRequest(tool, "call_1", arguments, shown, language)


# --------------------------------------------------------------------------- answers and records


def test_answers_become_decisions() -> None:
    assert decision_from_answer(request(), {"choice": "once"}) == ApprovalDecision(True, "person")
    assert decision_from_answer(request(), {"choice": "session"}) == ApprovalDecision(True, "person", scope="session")
    assert decision_from_answer(request(), {"choice": "prefix"}) == ApprovalDecision(
        True, "person", scope="prefix", prefix="git")
    assert decision_from_answer(request(), {"choice": "deny", "reason": "  not now "}) == ApprovalDecision(
        False, "person", reason="not now")
    assert decision_from_answer(request(), {"choice": "deny", "reason": "   "}) == ApprovalDecision(False, "person")
    assert decision_from_answer(request("python", "del df"), {"choice": "prefix"}) is None  # no command word
    assert decision_from_answer(request(), {"choice": "always"}) is None
    assert decision_from_answer(request(), {}) is None


def test_choices_offer_the_command_word_for_bash_only() -> None:
    assert [c for c, _ in choices_for(request())] == ["once", "session", "prefix", "deny"]
    assert dict(choices_for(request()))["prefix"] == "Allow commands starting with git"
    assert [c for c, _ in choices_for(request("python", "x = 1"))] == ["once", "session", "deny"]


def test_the_record_line_says_what_and_how() -> None:
    assert record_line(request(), ApprovalDecision(True, "person")) == \
        "bash `git push origin main`: allowed once by you"
    assert record_line(request("python", "a = 1\nb = 2"), ApprovalDecision(False, "person", reason="no")) == \
        "python `a = 1 b = 2`: refused by you: no"
    assert record_line(request(), None, "refused: no answer in time").endswith(": refused: no answer in time")


def test_approval_notes_for_the_transcript() -> None:
    def note(**record: Any) -> str | None:
        return approval_note({"tool": "bash", "asked": "x", "scope": "once", "mode": "ask", **record})

    assert note(allowed=True, answeredBy="person") == "allowed once by you"
    assert note(allowed=True, answeredBy="person", scope="session") == "allowed for this session by you"
    assert note(allowed=True, answeredBy="person", scope="prefix", prefix="git") == \
        "allowed by you for commands starting with git"
    assert note(allowed=True, answeredBy="setting", scope="session") == "allowed for this session"
    assert note(allowed=True, answeredBy="setting", mode="auto") is None
    assert note(allowed=True, answeredBy="setting") is None  # a reading tool
    assert note(allowed=True, answeredBy="hook") == "allowed by a hook"
    assert note(allowed=False, answeredBy="nobody") == "refused: needs approval"
    assert note(allowed=False, answeredBy="timeout") == "refused: needs approval (no answer in time)"
    assert note(allowed=False, answeredBy="setting", mode="read-only") == "refused: approval is read-only"
    assert note(allowed=False, answeredBy="hook") == "refused by a hook"
    assert approval_note(None) is None


def test_the_transcript_keeps_the_decision_on_its_tool_line() -> None:
    transcript = Transcript()
    apply_event(transcript, ev.ToolStarted(1, "c1", "bash", '{"command": "touch X"}'))
    apply_event(transcript, ev.ApprovalDecided(1, "c1", "bash", {"allowed": False, "answeredBy": "nobody"}))
    apply_event(transcript, ev.ToolFinished(1, "c1", "bash", "The bash call was not run", True))
    apply_event(transcript, ev.ApprovalDecided(1, "unknown", "bash", {"allowed": True}))  # no such line: ignored
    [item] = transcript.snapshot()
    assert isinstance(item, ToolCall) and item.approval_note == "refused: needs approval"
    shown = TranscriptMarkdown([item], False)
    assert '<small class="dsh-tool-note">refused: needs approval</small>' in shown.html()
    assert shown.plain() == "[tool bash: touch X] error (refused: needs approval)"


# --------------------------------------------------------------------------- the terminal


def scripted(*typed: str) -> tuple[Any, list[str]]:
    answers, written = list(typed), []

    def read(prompt: str) -> str:
        written.append(prompt)
        if not answers:
            raise EOFError
        return answers.pop(0)

    return read, written


def test_stdin_asks_with_the_same_choices() -> None:
    read, written = scripted("maybe", "p")
    assert ask_on_stdin(request(), read, written.append) == ApprovalDecision(True, "person", scope="prefix",
                                                                             prefix="git")
    assert "git push origin main" in written
    assert any("[y] Allow once, [s] Allow bash for this session, [p] Allow commands starting with git, [n] Deny" in w
               for w in written)
    assert any("please type one of y, s, p, n" in w for w in written)
    read, written = scripted("n", "wrong branch")
    assert ask_on_stdin(request(), read, written.append) == ApprovalDecision(False, "person", reason="wrong branch")
    read, written = scripted("yes")
    assert ask_on_stdin(request(), read, written.append) == ApprovalDecision(True, "person")
    read, written = scripted()  # no terminal: nobody
    assert ask_on_stdin(request(), read, written.append) is None


def test_stdin_names_hidden_characters_shows_marks_and_denies_on_enter() -> None:
    attack = request(command="echo hello \u202e; rm -rf ~ #\u202c")
    read, written = scripted("", "")
    assert ask_on_stdin(attack, read, written.append) == ApprovalDecision(False, "person")
    text = "\n".join(written)
    assert "echo hello ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩" in written
    assert ("Warning: This command contains 2 hidden characters (right-to-left override U+202E, pop directional "
            "formatting U+202C), shown as ⟨U+…⟩ marks: what runs is not what it looks like.") in written
    assert "[n] Deny (Enter), [y] Allow once, [s] Allow bash for this session:" in text  # no grant offered
    assert "\u202e" not in text and "\u202c" not in text
    read, written = scripted("y")  # a person can still allow it, on purpose
    assert ask_on_stdin(attack, read, written.append) == ApprovalDecision(True, "person")


def test_stdin_says_why_a_grant_does_not_cover_the_command() -> None:
    asked = ApprovalRequest("bash", "c", {"command": "git log; touch X"}, "git log; touch X", "bash",
                            reason="not covered by your grant for `git`: the command chains a second command with `;`")
    read, written = scripted("n", "")
    assert ask_on_stdin(asked, read, written.append) == ApprovalDecision(False, "person")
    assert written[0] == ("\nThe agent wants to run bash (not covered by your grant for `git`: the command chains a "
                          "second command with `;`):")


async def test_the_stdin_approver_asks_on_the_waiting_cells_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.notebook.python_tool import MainThreadCalls

    monkeypatch.setattr("builtins.input", lambda prompt="": "s")
    calls = MainThreadCalls(turn_cell=True)

    class Host:
        main_thread_calls: Any = calls

    asked = asyncio.ensure_future(StdinApprover(Host()).ask(request(), 5))
    while not calls.pump(0.01):  # what the waiting cell does
        await asyncio.sleep(0.01)
    assert await asyncio.wait_for(asked, 5) == ApprovalDecision(True, "person", scope="session")
    Host.main_thread_calls = None
    assert await StdinApprover(Host()).ask(request(), 5) == ApprovalDecision(True, "person", scope="session")


def test_the_approver_follows_the_shell() -> None:
    class Host:
        main_thread_calls: Any = None

    class Kernel:
        session = object()

    class ZMQInteractiveShell:
        kernel = Kernel()

    class TerminalInteractiveShell:
        pass

    assert isinstance(approver_for(ZMQInteractiveShell(), Host()), WidgetApprover)
    assert isinstance(approver_for(TerminalInteractiveShell(), Host()), StdinApprover)
    assert approver_for(InteractiveShell.instance(), Host()) is None
    assert approver_for(None, Host()) is None


# --------------------------------------------------------------------------- the widget approver (no kernel)


class Frontend:
    """Plays the view: draws each shown widget (``rendered``) and answers with ``answer``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any] | None, *, draw: bool = True,
                 delay: float = 0.05) -> None:
        from dsh_jupyter.ui.approval_widget import ApprovalWidget

        self.shown: list[ApprovalWidget] = []
        original = ApprovalWidget.show

        def show(widget: ApprovalWidget, *, background: bool) -> None:
            original(widget, background=background)
            self.shown.append(widget)
            if draw:
                threading.Timer(delay, self._play, (widget, answer)).start()

        monkeypatch.setattr(ApprovalWidget, "show", show)

    @staticmethod
    def _play(widget: Any, answer: dict[str, Any] | None) -> None:
        widget._message(widget, {"kind": "rendered"}, [])
        if answer is not None:
            widget._message(widget, {"kind": "answer", "callId": "someone else's"} | answer, [])  # ignored
            widget._message(widget, {"kind": "answer", "callId": widget.question["callId"]} | answer, [])


async def test_the_widget_asks_and_becomes_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    frontend = Frontend(monkeypatch, {"choice": "deny", "reason": "use a branch"})
    decision = await WidgetApprover(None).ask(request(), 5)
    assert decision == ApprovalDecision(False, "person", reason="use a branch")
    [widget] = frontend.shown
    assert widget.state == "answered" and widget.question["shown"] == "git push origin main"
    assert [c for c, _ in widget.question["choices"]] == ["once", "session", "prefix", "deny"]
    assert widget.records == [{"text": "bash `git push origin main`: refused by you: use a branch", "allowed": False}]
    assert repr(widget) == ""  # answered: the tool line says how, once (the saved copy keeps no second line)


async def test_the_widget_question_warns_marks_and_focuses_deny(monkeypatch: pytest.MonkeyPatch) -> None:
    frontend = Frontend(monkeypatch, {"choice": "deny", "reason": ""})
    attack = request(command="echo hello \u202e; rm -rf ~ #\u202c")
    assert await WidgetApprover(None).ask(attack, 5) == ApprovalDecision(False, "person")
    [widget] = frontend.shown
    question = widget.question
    assert question["warning"].startswith("This command contains 2 hidden characters (right-to-left override U+202E")
    assert question["parts"] == [["text", "echo hello "], ["mark", "⟨U+202E⟩"], ["text", "; rm -rf ~ #"],
                                 ["mark", "⟨U+202C⟩"]]
    assert question["focus"] == "deny" and [c for c, _ in question["choices"]] == ["once", "session", "deny"]
    assert widget.records[0]["text"] == "bash `echo hello ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩`: refused by you"
    plain = Frontend(monkeypatch, {"choice": "once"})
    await WidgetApprover(None).ask(request(), 5)
    assert plain.shown[0].question["focus"] == "once" and plain.shown[0].question["warning"] == ""


async def test_nobody_drawing_the_widget_refuses_promptly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approval, "RENDER_WAIT", 0.2)
    frontend = Frontend(monkeypatch, None, draw=False)
    assert await asyncio.wait_for(WidgetApprover(None).ask(request(), 60), 3) is None
    assert frontend.shown[0].records[-1]["text"].endswith("refused: nobody could answer here")


async def test_a_page_with_the_extension_gives_a_slow_browser_longer_to_draw_the_question(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A connected page means a person is looking: a question its busy browser draws after RENDER_WAIT is still
    asked (up to WATCHED_RENDER_WAIT), while a kernel without such a page refuses after RENDER_WAIT."""
    monkeypatch.setattr(approval, "RENDER_WAIT", 0.2)
    monkeypatch.setattr(approval, "WATCHED_RENDER_WAIT", 5.0)
    Frontend(monkeypatch, {"choice": "once"}, delay=0.8)
    assert await asyncio.wait_for(WidgetApprover(None, lambda: True).ask(request(), 60), 5) == \
        ApprovalDecision(True, "person")
    unwatched = Frontend(monkeypatch, {"choice": "once"}, delay=0.8)
    assert await asyncio.wait_for(WidgetApprover(None, lambda: False).ask(request(), 60), 5) is None
    assert unwatched.shown[0].records[-1]["text"].endswith("refused: nobody could answer here")
    monkeypatch.setattr(approval, "WATCHED_RENDER_WAIT", 0.3)  # still bounded: a page that never draws it
    Frontend(monkeypatch, None, draw=False)
    assert await asyncio.wait_for(WidgetApprover(None, lambda: True).ask(request(), 60), 3) is None


async def test_a_page_that_connects_while_the_question_waits_gives_it_the_longer_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's connection can arrive after the cell began (a Run All sends it on a kernel subshell as `%load_ext`
    runs): once the page is there, its slow browser gets WATCHED_RENDER_WAIT to draw the question."""
    monkeypatch.setattr(approval, "RENDER_WAIT", 0.3)
    monkeypatch.setattr(approval, "WATCHED_RENDER_WAIT", 5.0)
    monkeypatch.setattr(approval, "WATCH_RECHECK", 0.05)
    connected_at = time.monotonic() + 0.15
    Frontend(monkeypatch, {"choice": "once"}, delay=0.8)
    approver = WidgetApprover(None, lambda: time.monotonic() >= connected_at)
    assert await asyncio.wait_for(approver.ask(request(), 60), 5) == ApprovalDecision(True, "person")


def test_the_host_says_a_page_is_connected_while_the_live_document_has_a_tab(ip: InteractiveShell) -> None:
    host = ip.magics_manager.registry["DshMagics"].host

    class Live:  # the live document's connections (workspace/live_document.py): the tabs connected now
        connected = 0

    class Kernel:
        session = object()

    class ZMQInteractiveShell:
        kernel = Kernel()

    host.live_source = None
    assert host.page_connected() is False
    live = Live()
    host.live_source = live
    assert host.page_connected() is False
    live.connected = 1
    assert host.page_connected() is True
    approver = approver_for(ZMQInteractiveShell(), host)
    assert isinstance(approver, WidgetApprover) and approver.watched is not None and approver.watched() is True
    live.connected = 0
    assert approver.watched() is False


async def test_no_answer_in_time_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    frontend = Frontend(monkeypatch, None)
    decision = await asyncio.wait_for(WidgetApprover(None).ask(request(), 0.3), 3)
    assert decision == ApprovalDecision(False, "timeout", reason=NOBODY_TO_ASK)
    assert frontend.shown[0].records[-1]["text"].endswith("refused: no answer in time")


async def test_a_background_turn_asks_in_the_widget_reserved_in_its_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    frontend = Frontend(monkeypatch, None)
    approver = WidgetApprover(None)
    approver.prepare_cell(background=True)
    [slot] = frontend.shown
    await asyncio.sleep(0.2)  # drawn
    assert slot.rendered and slot.state == "idle"
    scopes: tuple[Scope, ...] = ("once", "session")
    for scope in scopes:
        threading.Timer(0.05, lambda choice=scope: slot._message(
            slot, {"kind": "answer", "callId": slot.question["callId"], "choice": choice}, [])).start()
        assert await approver.ask(request(), 5) == ApprovalDecision(True, "person", scope=scope)
    assert frontend.shown == [slot] and len(slot.records) == 2  # both questions in the one reserved widget
    approver.prepare_cell(background=False)  # a foreground turn shows its own
    Frontend(monkeypatch, {"choice": "once"})
    assert await approver.ask(request(), 5) == ApprovalDecision(True, "person")


# --------------------------------------------------------------------------- the host's policy


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    for name in ("DSH_SESSION_ID", "DSH_SESSION_JSONL", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with loaded_shell() as shell:
        yield shell


def test_the_host_gives_each_session_one_policy_and_settings_apply_at_once(ip: InteractiveShell) -> None:
    host = ip.magics_manager.registry["DshMagics"].host
    agent, _ = host.current()
    policy = agent.approvals
    assert (policy.mode, policy.timeout, policy.approver) == ("ask", 120.0, None)  # a plain shell: nobody to ask
    policy.granted_tools.add("bash")
    ip.run_line_magic("config", 'DshMagics.approval = "read-only"')
    ip.run_line_magic("config", "DshMagics.approval_timeout = 5")
    assert agent.approvals is policy and (policy.mode, policy.timeout) == ("read-only", 5.0)
    assert policy.granted_tools == {"bash"}  # grants last while the session does
    ip.run_line_magic("config", "DshMagics.max_steps = 3")
    assert agent.approvals is policy
    new, _ = host.new_session()
    assert new.approvals is not policy and new.approvals.granted_tools == set() and new.approvals.mode == "read-only"
    ip.run_line_magic("config", 'DshMagics.approval = "sometimes"')  # %config reports it; nothing changes
    assert new.approvals.mode == "read-only"
