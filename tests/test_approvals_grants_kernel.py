"""A "commands starting with git" grant on a real kernel, through the real bash tool (nbclient).

A person (a scripted approver installed in the kernel's policy) grants ``git`` on the first question and
denies everything asked after it. Then ``git status`` and ``git log --oneline -3`` run without a question,
and each chained or hidden form asks again with its reason, so none of their ``touch`` commands runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, named_outputs

#: Commands that must ask again after a ``git`` grant, each with the words of its question.
ASKED_AGAIN = {
    "semicolon": ("git --version; touch X_semicolon", "chains a second command with `;`"),
    "and": ("git --version && touch X_and", "chains a second command with `&&`"),
    "or": ("git nope || touch X_or", "chains a second command with `||`"),
    "newline": ("git --version\ntouch X_newline", "has a second line"),
    "alias": ("git -c alias.x='!touch X_alias' x", "`git -c` loads settings that can run other commands"),
    "brace": ("git {-c,alias.y=!touch\\ X_brace} y", "brace expansion"),
    "config": ("git config alias.z '!touch X_config'", "`git config` changes settings that can run other commands"),
    "substitution": ("git log $(touch X_substitution)", "runs another command inside `$(…)`"),
    "backticks": ("git log `touch X_backticks`", "runs another command inside backticks"),
    "pipe": ("git --version | tee X_pipe", "pipes into a second command with `|`"),
    "background": ("git --version & touch X_background", "runs a command in the background with `&`"),
    "redirect": ("git --version > X_redirect", "writes to a file with `>`"),
    "assignment": ("GIT_EXTERNAL_DIFF=x git status", "sets a variable first"),
    "hidden": ("git --version \u202e; touch X_hidden #\u202c", "contains hidden characters (U+202E, U+202C)"),
}

SETUP = """%load_ext dsh_jupyter
import subprocess
subprocess.run(["git", "init", "-q"], check=True)
from dsh_jupyter.agent.approvals import ApprovalDecision

class Person:
    asked = []
    async def ask(self, request, timeout):
        self.asked.append({"shown": request.shown, "reason": request.reason, "prefix": request.prefix,
                           "warning": request.warning})
        if len(self.asked) == 1:
            return ApprovalDecision(True, "person", scope="prefix", prefix=request.prefix)
        return ApprovalDecision(False, "person", reason="asked again")

person = Person()
import dsh_jupyter.notebook.approval as approval  # the kernel's way of asking: this scripted person
approval.approver_for = lambda shell, host: person
"""


def cells() -> dict[str, str]:
    named = {"setup": SETUP, "grant": "%%dsh\n/bash git status", "status": "%%dsh\n/bash git status",
             "log": "%%dsh\n/bash git log --oneline -3"}
    for name, (command, _) in ASKED_AGAIN.items():
        named[name] = "%%dsh --no-interpolate\n/tool bash " + json.dumps({"command": command})
    named["report"] = "import json; print('ASKED=' + json.dumps(person.asked))"
    return named


@dataclass
class Run:
    outputs: dict[str, list[dict[str, Any]]]
    work: Path

    def asked(self) -> list[dict[str, Any]]:
        for out in self.outputs["report"]:
            if out.get("output_type") == "stream" and "ASKED=" in out["text"]:
                found: list[dict[str, Any]] = json.loads(out["text"].split("ASKED=", 1)[1])
                return found
        raise AssertionError(f"no report: {self.outputs['report']}")


@pytest.fixture(scope="module")
def run(kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    work = tmp_path_factory.mktemp("grants-kernel")
    named = cells()
    nb = kernel_runner.run(list(named.values()), work, env={"DSH_HOME": str(tmp_path_factory.mktemp("grants-home"))})
    yield Run(named_outputs(list(named), nb), work)


@pytest.mark.slow
def test_simple_git_commands_run_without_asking_after_the_grant(run: Run) -> None:
    asked = run.asked()
    assert asked[0]["shown"] == "git status" and asked[0]["prefix"] == "git"
    shown = [question["shown"] for question in asked]
    assert "git log --oneline -3" not in shown and shown.count("git status") == 1


@pytest.mark.slow
def test_every_chained_or_hidden_form_asks_again_with_its_reason_and_nothing_runs(run: Run) -> None:
    asked = {question["shown"]: question for question in run.asked()[1:]}
    for name, (command, words) in ASKED_AGAIN.items():
        question = asked.get(command)
        assert question is not None, f"{name}: not asked again"
        assert question["reason"].startswith("not covered by your grant for `git`: "), question
        assert words in question["reason"], question
        assert question["prefix"] is None, f"{name}: a grant was offered for it"
    assert len(asked) == len(ASKED_AGAIN)
    assert asked[ASKED_AGAIN["hidden"][0]]["warning"].startswith("This command contains 2 hidden characters")
    made = sorted(path.name for path in run.work.glob("X_*"))
    assert made == [], f"these ran: {made}"
