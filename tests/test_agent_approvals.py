"""The approval policy: modes, hook verdicts, grants for the session, and who answered."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# --------------------------------------------------------------------------- what a grant covers

#: Each command a "commands starting with git" grant must not cover, with the words its question gives.
NOT_COVERED = {
    "git --version; touch X": "chains a second command with `;`",
    "git --version && touch X": "chains a second command with `&&`",
    "git --version || touch X": "chains a second command with `||`",
    "git --version\ntouch X": "has a second line",
    "git log | sh": "pipes into a second command with `|`",
    "git gc &": "runs a command in the background with `&`",
    "git -c alias.x='!touch X' x": "`git -c` loads settings that can run other commands",
    "git -calias.x=!touch\\ X x": "`git -c` loads settings",
    "git --config-env=alias.x=EVIL x": "`git --config-env` loads settings",
    "git --exec-path=/tmp/evil status": "`git --exec-path` loads settings",
    "git -C /tmp/evil status": "`git -C` loads settings",
    "git --git-dir=/tmp/evil/.git status": "`git --git-dir` loads settings",
    "git config alias.x '!touch X'": "`git config` changes settings that can run other commands",
    "git config --global core.pager 'touch X'": "`git config` changes settings",
    "git rebase --exec 'touch X' HEAD~1": "`git rebase --exec` runs other commands",
    "git rebase -x'touch X' HEAD~1": "`git rebase -x` runs other commands",
    "git grep -O'touch X' needle": "`git grep -O` runs other commands",
    "git submodule foreach 'touch X'": "`git submodule foreach` runs other commands",
    "git bisect run touch X": "`git bisect run` runs other commands",
    "git fetch --upload-pack='touch X' origin": "`git fetch --upload-pack` runs other commands",
    "git clone -c core.fsmonitor='touch X' repo": "`git clone -c` runs other commands",
    "git log $(touch X)": "runs another command inside `$(…)`",
    'git log "$(touch X)"': "runs another command inside `$(…)`",
    "git log `touch X`": "runs another command inside backticks",
    "git diff <(touch X) f": "runs another command inside `<(…)`",
    "git log > X": "writes to a file with `>`",
    "git log >> X": "writes to a file with `>>`",
    "git log &> X": "writes to a file with `&>`",
    "VAR=x git status": "sets a variable first (`VAR=x`)",
    "GIT_DIR=/tmp/evil git status": "sets a variable first",
    "git ${X:-status}": "expands a variable (`${X:-status}`)",
    "git {-c,alias.x=!touch\\ X} x": "brace expansion",
    "git -{c,} x": "brace expansion",
    "git $'\\x2dc' alias.x=!touch x": "`$'…'` quoting",
    'git $"-c" alias.x=!touch x': "`$\"…\"` quoting",
    "git status \u202e; touch X #\u202c": "contains hidden characters (U+202E, U+202C)",
    "{ git status; touch X; }": "is a shell construct",
    "if git status; then touch X; fi": "is a shell construct",
    "(git status; touch X)": "is a shell construct",
    "git log <<EOF\n$(touch X)\nEOF": "here-document",
}


@pytest.mark.parametrize("command", sorted(NOT_COVERED))
async def test_a_prefix_grant_asks_again_for_anything_but_one_simple_command(command: str) -> None:
    person = Person(ApprovalDecision(True, "person", scope="prefix", prefix="git"),
                    ApprovalDecision(False, "person"))
    policy = ApprovalPolicy("ask", person)
    await policy.decide(bash("git status"), "act")
    assert ("bash", "git") in policy.granted_prefixes
    decision = await policy.decide(bash(command), "act")
    assert not decision.allowed and len(person.asked) == 2, "asked again"
    why = person.asked[1].reason or ""
    assert why.startswith("not covered by your grant for `git`: the command ") or why.startswith(
        "not covered by your grant for `git`: `git"), why
    assert NOT_COVERED[command] in why
    assert person.asked[1].prefix is None  # and no grant is offered for it


async def test_simple_git_commands_stay_covered() -> None:
    person = Person(ApprovalDecision(True, "person", scope="prefix", prefix="git"))
    policy = ApprovalPolicy("ask", person)
    await policy.decide(bash("git status"), "act")
    for command in ("git status", "git log --oneline -3", "git diff HEAD~1 -- src/", "git log -c",
                    "git log --format='%h {a,b}'", 'git log --format="%h {x}"', "git add src/*.py",
                    "git cherry-pick -x abc123", "git push -u origin main", "git add -u", "git grep -o needle",
                    "git submodule update --init", "git bisect good",
                    "git commit -m 'fix: a; b && $(not run)'", "git status 2>&1", "git log 2>/dev/null",
                    "git apply < fix.patch", "  git status  ", "git status\n", "'git' status"):
        decision = await policy.decide(bash(command), "act")
        assert decision.allowed and decision.answered_by == "setting", command
    assert len(person.asked) == 1


async def test_the_program_word_is_matched_exactly() -> None:
    person = Person(ApprovalDecision(True, "person", scope="prefix", prefix="git"),
                    *[ApprovalDecision(False, "person")] * 3)
    policy = ApprovalPolicy("ask", person)
    await policy.decide(bash("git status"), "act")
    for command in ("git-foo status", "/tmp/git status", "g\u200bit status"):
        assert not (await policy.decide(bash(command), "act")).allowed
    assert len(person.asked) == 4
    assert all(asked.reason is None for asked in person.asked[1:])  # no grant of theirs: an ordinary question
    assert person.asked[3].warning == ("This command contains 1 hidden character (zero width space U+200B), shown "
                                       "as ⟨U+…⟩ marks: what runs is not what it looks like.")


def test_a_grant_is_offered_only_for_one_simple_command_of_a_plain_program() -> None:
    assert bash("git status").prefix == "git"
    assert bash("git log --oneline -3").prefix == "git"
    for command in (*NOT_COVERED, "/tmp/git status", "bash -c 'touch X'", "sudo git status", "env git status",
                    "eval git status", "xargs rm", "python -c 'import os'", "echo $((1 + 2))", "git 'unclosed"):
        assert bash(command).prefix is None, command


_WORD = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_./="), min_size=1, max_size=8)
_OPERATOR = st.sampled_from([";", "&&", "||", "|", "&", "\n", "|&", " ; ", " && "])


@settings(max_examples=300, deadline=None)
@given(before=st.lists(_WORD, min_size=0, max_size=3), operator=_OPERATOR,
       after=st.lists(_WORD, min_size=1, max_size=3))
def test_a_command_with_an_unquoted_operator_is_never_covered(before: list[str], operator: str,
                                                               after: list[str]) -> None:
    from dsh_jupyter.agent.grants import covered_by

    command = " ".join(["git", *before]) + operator + " ".join(after)
    assert covered_by(command, "git") is not None
    assert bash(command).prefix is None


@settings(max_examples=200, deadline=None)
@given(words=st.lists(_WORD.filter(lambda w: not w.startswith("-")), min_size=0, max_size=4),
       hidden=st.sampled_from(["\u202e", "\u2066", "\u200b", "\u2060", "\ufeff", "\U000e0041", "\u00ad"]),
       where=st.integers(min_value=0, max_value=40))
def test_a_hidden_character_anywhere_is_never_covered(words: list[str], hidden: str, where: int) -> None:
    from dsh_jupyter.agent.grants import covered_by

    plain = " ".join(["git", "status", *words])
    assert covered_by(plain, "git") is None
    at = min(where, len(plain))
    command = plain[:at] + hidden + plain[at:]
    problem = covered_by(command, "git")
    assert problem is not None


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


# --------------------------------------------------------------------------- in the agent loop

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import Reply, ScriptedModel, call, say  # noqa: E402

from dsh_jupyter.agent import Agent  # noqa: E402
from dsh_jupyter.agent import events as ev  # noqa: E402
from dsh_jupyter.store import JsonlStore  # noqa: E402
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry  # noqa: E402
from dsh_jupyter.tools.hooks import ClaudeCodeHooks, HookRunner  # noqa: E402

SCRIPTS = Path(__file__).parent / "hook_scripts"


class Shell(Tool):
    name = "bash"
    description = "Pretend shell."
    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
        self.ran: list[str] = []

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        self.ran.append(arguments["command"])
        return ToolOutput("ran " + arguments["command"])


class Reader(Shell):
    name = "peek"
    effect = "read"


def agent_with(tmp_path: Path, policy: ApprovalPolicy, *calls: Reply, hooks: Any = None
               ) -> tuple[Agent, Shell, ScriptedModel, list[ev.AgentEvent]]:
    tools = ToolRegistry()
    shell = Shell()
    tools.register(shell)
    tools.register(Reader())
    model = ScriptedModel(*calls, say("done"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), tools=tools, approvals=policy,
                         hooks=hooks)
    seen: list[ev.AgentEvent] = []
    agent.subscribe(seen.append)
    return agent, shell, model, seen


def results(agent: Agent) -> list[dict[str, Any]]:
    return [e.data for e in agent.session.events if e.type == "tool/result"]


def bash_call(command: str, call_id: str = "c1") -> Reply:
    return call("bash", json.dumps({"command": command}), call_id)


def test_tools_declare_their_effect() -> None:
    tools = ToolRegistry()
    tools.register(Shell())
    tools.register(Reader())
    assert (tools.effect("bash"), tools.effect("peek"), tools.effect("missing")) == ("act", "read", "read")


async def test_the_agent_runs_everything_without_a_host_policy(tmp_path: Path) -> None:
    tools = ToolRegistry()
    shell = Shell()
    tools.register(shell)
    agent = Agent.create(JsonlStore(tmp_path / "s"), ScriptedModel(bash_call("ls"), say("ok")), cwd=str(tmp_path),
                         tools=tools)
    await agent.send("go")
    assert shell.ran == ["ls"] and agent.approvals.mode == "auto"


async def test_a_refusal_is_the_result_the_model_sees_and_the_log_says_why(tmp_path: Path) -> None:
    agent, shell, model, seen = agent_with(tmp_path, ApprovalPolicy("ask"), bash_call("touch X"))
    result = await agent.send("make X")
    assert result.reason == "completed" and shell.ran == []
    [data] = results(agent)
    block = data["message"]["content"][0]
    assert block["isError"] is True and 'DshMagics.approval = "auto"' in block["content"][0]["text"]
    assert data["meta"]["approval"] == {"tool": "bash", "asked": "touch X", "allowed": False, "scope": "once",
                                        "answeredBy": "nobody", "mode": "ask", "reason": NOBODY_TO_ASK}
    assert "needs the user's approval" in json.dumps(model.requests[1].messages[-1])
    decided = [e for e in seen if isinstance(e, ev.ApprovalDecided)]
    assert [(e.call_id, e.record["allowed"]) for e in decided] == [("c1", False)]


async def test_a_person_allows_once_and_denies_with_a_reason_the_model_reads(tmp_path: Path) -> None:
    person = Person(ApprovalDecision(True, "person"), ApprovalDecision(False, "person", reason="use /tmp instead"))
    agent, shell, model, _ = agent_with(tmp_path, ApprovalPolicy("ask", person), bash_call("touch A", "c1"),
                                        bash_call("touch B", "c2"))
    await agent.send("make files")
    assert shell.ran == ["touch A"] and [r.shown for r in person.asked] == ["touch A", "touch B"]
    first, second = results(agent)
    assert first["meta"]["approval"]["answeredBy"] == "person" and first["meta"]["approval"]["allowed"] is True
    assert second["meta"] == {"denied": True, "approval": {
        "tool": "bash", "asked": "touch B", "allowed": False, "scope": "once", "answeredBy": "person",
        "mode": "ask", "reason": "use /tmp instead"}}
    assert "the user denied it: use /tmp instead" in json.dumps(model.requests[2].messages[-1])


async def test_reading_tools_run_in_read_only_mode_and_acting_ones_are_refused(tmp_path: Path) -> None:
    agent, shell, _, _ = agent_with(tmp_path, ApprovalPolicy("read-only"), bash_call("touch X", "c1"),
                                    call("peek", json.dumps({"command": "look"}), "c2"))
    await agent.send("try")
    refused, read = results(agent)
    assert shell.ran == [] and read["message"]["content"][0]["content"][0]["text"] == "ran look"
    assert refused["meta"]["approval"]["answeredBy"] == "setting" and not refused["meta"]["approval"]["allowed"]
    assert read["meta"]["approval"]["allowed"] is True


def guard_hooks() -> HookRunner:
    group = {"matcher": "bash", "hooks": [{"type": "command",
                                           "command": f"{sys.executable} {SCRIPTS / 'guard_commands.py'}"}]}
    return HookRunner([ClaudeCodeHooks({"hooks": {"PreToolUse": [group]}})])


async def test_hook_ask_asks_allow_skips_the_question_and_deny_refuses(tmp_path: Path) -> None:
    person = Person(ApprovalDecision(True, "person"))
    agent, shell, _, _ = agent_with(tmp_path, ApprovalPolicy("auto", person), bash_call("git push", "c1"),
                                    bash_call("ls -l", "c2"), bash_call("rm -rf /data", "c3"), hooks=guard_hooks())
    await agent.send("ship it")
    assert shell.ran == ["git push", "ls -l"]
    assert [(r.shown, r.reason) for r in person.asked] == [("git push", "pushing needs a human")]
    pushed, listed, removed = (r["meta"]["approval"] for r in results(agent))
    assert (pushed["answeredBy"], listed["answeredBy"], removed["answeredBy"]) == ("person", "hook", "hook")
    assert removed["allowed"] is False and "destructive" in removed["reason"]


async def test_hook_ask_with_nobody_to_answer_refuses_with_the_approval_message(tmp_path: Path) -> None:
    agent, shell, _, _ = agent_with(tmp_path, ApprovalPolicy("auto"), bash_call("git push"), hooks=guard_hooks())
    await agent.send("ship it")
    [data] = results(agent)
    assert shell.ran == [] and 'DshMagics.approval = "auto"' in data["message"]["content"][0]["content"][0]["text"]


async def test_interrupting_while_a_question_waits_ends_the_turn(tmp_path: Path) -> None:
    person = Person(ApprovalDecision(True, "person"), delay=30)
    agent, shell, _, _ = agent_with(tmp_path, ApprovalPolicy("ask", person), bash_call("touch X"))
    turn = asyncio.ensure_future(agent.send("make X"))
    while not person.asked:
        await asyncio.sleep(0.01)
    agent.cancel()
    result = await asyncio.wait_for(turn, 5)
    assert result.reason == "interrupted" and shell.ran == []


class Described(Shell):
    """A tool that tells the person what its call does (and one whose description breaks)."""

    name = "described"

    def describe(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        if arguments.get("command") == "boom":
            raise RuntimeError("describing failed")
        return f"# would run\n{arguments.get('command')}", "diff"


async def test_the_question_shows_the_tools_own_description(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    class Note:
        async def ask(self, request: ApprovalRequest, timeout: float) -> ApprovalDecision | None:
            asked.append(request)
            return ApprovalDecision(True, "person")

    tools = ToolRegistry()
    tools.register(Described())
    model = ScriptedModel(call("described", json.dumps({"command": "ls"}), "c1"),
                          call("described", json.dumps({"command": "boom"}), "c2"), say("done"))
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path), tools=tools,
                         approvals=ApprovalPolicy("ask", Note()))
    await agent.send("go")
    assert (asked[0].shown, asked[0].language) == ("# would run\nls", "diff")
    assert asked[1].language == "json" and '"command": "boom"' in asked[1].shown  # a failing one: the generic form
