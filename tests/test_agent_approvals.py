"""The approval policy: modes, hook verdicts, grants for the session, and who answered."""

from __future__ import annotations

import asyncio

import pytest

from dsh_jupyter.agent.approvals import (
    NOBODY_TO_ASK,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRequest,
    describe_call,
)


def bash(command: str) -> ApprovalRequest:
    shown, language = describe_call("bash", {"command": command})
    return ApprovalRequest("bash", "call_1", {"command": command}, shown, language)


class Person:
    def __init__(self, *answers: ApprovalDecision | None, delay: float = 0.0) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []
        self.delay = delay

    async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None:
        self.asked.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.answers.pop(0)


async def test_reading_tools_never_ask() -> None:
    person = Person()
    decision = await ApprovalPolicy("ask", person).decide(bash("ls"), "read")
    assert decision.allowed and decision.answered_by == "setting" and person.asked == []


async def test_ask_mode_without_anybody_refuses_and_names_the_setting() -> None:
    decision = await ApprovalPolicy("ask").decide(bash("touch X"), "act")
    assert not decision.allowed and decision.answered_by == "nobody"
    assert 'DshMagics.approval = "auto"' in decision.refusal(bash("touch X"))
    assert decision.reason == NOBODY_TO_ASK


async def test_auto_runs_and_read_only_refuses_acting_tools() -> None:
    assert (await ApprovalPolicy("auto").decide(bash("touch X"), "act")).allowed
    refused = await ApprovalPolicy("read-only", Person()).decide(bash("touch X"), "act")
    assert not refused.allowed and "read-only" in (refused.reason or "")
    assert (await ApprovalPolicy("read-only").decide(bash("ls"), "read")).allowed


async def test_a_person_allows_once_then_is_asked_again() -> None:
    person = Person(ApprovalDecision(True, "person"), ApprovalDecision(False, "person", reason="not that file"))
    policy = ApprovalPolicy("ask", person)
    assert (await policy.decide(bash("touch X"), "act")).allowed
    denied = await policy.decide(bash("touch X"), "act")
    assert not denied.allowed
    assert denied.refusal(bash("touch X")) == "The bash call was not run: the user denied it: not that file."
    assert len(person.asked) == 2


async def test_allow_for_the_session_covers_the_tool_or_the_command_word() -> None:
    person = Person(ApprovalDecision(True, "person", scope="prefix", prefix="git"),
                    ApprovalDecision(True, "person", scope="session"))
    policy = ApprovalPolicy("ask", person)
    await policy.decide(bash("git status"), "act")
    assert (await policy.decide(bash("git log -1"), "act")).allowed
    assert len(person.asked) == 1  # git is granted
    await policy.decide(bash("rm -r build"), "act")  # asked: granted for the whole tool now
    assert (await policy.decide(bash("make"), "act")).allowed
    assert len(person.asked) == 2


async def test_hook_verdicts() -> None:
    person = Person(ApprovalDecision(True, "person"))
    policy = ApprovalPolicy("auto", person)
    allowed = await policy.decide(bash("touch X"), "act", hook="allow")
    assert allowed.allowed and allowed.answered_by == "hook"
    await policy.decide(bash("touch X"), "act", hook="ask")  # "ask" asks even in auto mode
    assert len(person.asked) == 1
    assert not (await ApprovalPolicy("read-only").decide(bash("touch X"), "act", hook="allow")).allowed


async def test_no_answer_in_time_is_a_timeout_refusal() -> None:
    policy = ApprovalPolicy("ask", Person(ApprovalDecision(True, "person"), delay=5), timeout=0.05)
    decision = await asyncio.wait_for(policy.decide(bash("touch X"), "act"), 3)
    assert not decision.allowed and decision.answered_by == "timeout"


def test_the_decision_record_says_what_was_asked_and_who_answered() -> None:
    record = ApprovalDecision(True, "person", scope="prefix", prefix="git").to_json(bash("git push"), "ask")
    assert record == {"tool": "bash", "asked": "git push", "allowed": True, "scope": "prefix",
                      "answeredBy": "person", "mode": "ask", "prefix": "git"}


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="approval must be one of ask, auto, read-only"):
        ApprovalPolicy("sometimes")  # type: ignore[arg-type]


def test_what_a_person_is_shown() -> None:
    assert describe_call("python", {"code": "del df"}) == ("del df", "python")
    assert describe_call("notebook_edit", {"cell": "a1"})[1] == "json"
    assert bash("'unclosed").prefix is None
