"""Approvals on a real kernel run headless (nbclient): nobody can answer, so asking refuses promptly.

One notebook per test module: the default mode refuses ``/bash touch X`` within seconds (X absent; the
cell and the log say it needed approval), ``auto`` runs it, ``read-only`` refuses python and bash but lets
the agent read, and a Claude Code style PreToolUse hook that answers "ask" is refused the same way.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, named_outputs, output_text

SCRIPTS = Path(__file__).parent / "hook_scripts"


def cells(work: Path) -> dict[str, str]:
    hooks = work / "claude-settings.json"
    group = {"matcher": "bash", "hooks": [{"type": "command",
                                           "command": f"{sys.executable} {SCRIPTS / 'guard_commands.py'}"}]}
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    return {
        "load": "%load_ext dsh_jupyter\nimport time",
        "clock": "started = time.monotonic()",
        "ask": "%%dsh\nmake the file\n/bash touch X_ask",
        "elapsed": "print(f'elapsed={time.monotonic() - started:.2f}')",
        "auto mode": "%config DshMagics.approval = \"auto\"\n%dsh new",
        "auto": "%%dsh\n/bash touch X_auto",
        "read-only mode": "%config DshMagics.approval = \"read-only\"\n%dsh new",
        "read-only bash": "%%dsh\n/bash touch X_ro",
        "read-only python": "%%dsh\n/python\n```python\nopen('X_py', 'w').close()\n```",
        "read-only read": "%%dsh\n/tool bash_output {\"job_id\": \"7\"}",
        "hook mode": f"%config DshMagics.approval = \"auto\"\n%config DshMagics.claude_hooks = {str(hooks)!r}\n"
                     "%dsh new",
        "hook ask": "%%dsh\n/bash git push",
        "hook allow": "%%dsh\n/bash ls -d .",
    }


@dataclass
class Run:
    outputs: dict[str, list[dict[str, Any]]]
    work: Path

    def text(self, name: str) -> str:
        """The cell as rendered (HTML where there is some), its entities decoded (tags kept)."""
        return html.unescape(output_text(self.outputs[name], "text/html", "text/plain", first=True))

    def results(self) -> list[dict[str, Any]]:
        """Every tool result of every session, oldest session first."""
        found: list[tuple[str, dict[str, Any]]] = []
        for log in (self.work / ".dsh" / "sessions").glob("*/session.jsonl"):
            events = [json.loads(line) for line in log.read_text().splitlines()]
            created = events[0].get("timestamp") or events[0].get("createdAt") or ""
            found += [(str(created) + f"{e['seq']:06d}", e["data"]) for e in events[1:] if e["type"] == "tool/result"]
        return [data for _, data in sorted(found, key=lambda pair: pair[0])]


@pytest.fixture(scope="module")
def run(kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    work = tmp_path_factory.mktemp("approvals-kernel")
    home = tmp_path_factory.mktemp("approvals-home")
    named = cells(work)
    nb = kernel_runner.run(list(named.values()), work, env={"DSH_HOME": str(home)})
    yield Run(named_outputs(list(named), nb), work)


def approvals(run: Run) -> list[dict[str, Any]]:
    return [r.get("meta", {}).get("approval", {}) for r in run.results()]


def result_text(data: dict[str, Any]) -> str:
    return str(data["message"]["content"][0]["content"][0]["text"])


@pytest.mark.slow
def test_default_mode_refuses_headless_within_seconds(run: Run) -> None:
    assert not (run.work / "X_ask").exists()
    elapsed = float(re.search(r"elapsed=([\d.]+)", run.text("elapsed")).group(1))  # type: ignore[union-attr]
    assert elapsed < 15, elapsed
    cell = run.text("ask")
    assert "refused: needs approval" in cell and 'DshMagics.approval = \\"auto\\"' not in cell
    assert "needs the user's approval" in cell
    # The decision is said once, on the tool line: no second, grey record line under it.
    assert "bash `touch X_ask`: refused: nobody could answer here" not in cell
    first = run.results()[0]
    assert first["meta"]["approval"]["answeredBy"] == "nobody" and first["meta"]["approval"]["mode"] == "ask"
    assert 'DshMagics.approval = "auto"' in result_text(first) and first["meta"]["denied"] is True


@pytest.mark.slow
def test_auto_runs_it(run: Run) -> None:
    assert (run.work / "X_auto").exists()
    record = approvals(run)[1]
    assert record["allowed"] is True and record["mode"] == "auto"


@pytest.mark.slow
def test_read_only_refuses_python_and_bash_but_lets_the_agent_read(run: Run) -> None:
    assert not (run.work / "X_ro").exists() and not (run.work / "X_py").exists()
    bash, python, read = approvals(run)[2:5]
    assert (bash["tool"], bash["allowed"], bash["answeredBy"]) == ("bash", False, "setting")
    assert (python["tool"], python["allowed"], python["answeredBy"]) == ("python", False, "setting")
    assert (read["tool"], read["allowed"]) == ("bash_output", True)
    assert "refused: approval is read-only" in run.text("read-only bash")
    assert "no background job" in result_text(run.results()[4])


@pytest.mark.slow
def test_a_hook_that_asks_is_refused_headless_and_one_that_allows_runs(run: Run) -> None:
    asked, allowed = approvals(run)[5:7]
    assert (asked["allowed"], asked["answeredBy"], asked["asked"]) == (False, "nobody", "git push")
    assert 'DshMagics.approval = "auto"' in result_text(run.results()[5])
    assert (allowed["allowed"], allowed["answeredBy"]) == (True, "hook")
    assert "refused: needs approval" in run.text("hook ask")
