"""Secrets suite: credential values never reach a log, the catalog, a hook or a cell, whatever path they take.

The environment holds ``OPENAI_API_KEY``, ``DATABASE_URL=postgres://admin:s3cret-pw@db/x``, ``MYSQL_PWD``
and a custom ``SOMETHING_TOKEN``. A real agent prints them through the python tool (in the kernel), through
bash (``env``, ``cat /proc/$PPID/environ``), with Claude Code style hooks recording every payload and their
environment; the JSONL log, a SQLite store, the catalog database (and its body search), the hook records
and the executed notebook are then searched byte for byte.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import Reply, ScriptedModel, call

from dsh_jupyter.agent import Agent
from dsh_jupyter.agent import events as ev
from dsh_jupyter.secrets import MASK
from dsh_jupyter.store import JsonlStore, SqliteStore
from dsh_jupyter.tools import BashTool, ShellEnvRegistry, ToolRegistry
from dsh_jupyter.tools.hooks import ClaudeCodeHooks, CodexHooks, HookRunner

SCRIPTS = Path(__file__).parent / "hook_scripts"
HOOK_EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
SECRET_NAMES = ("OPENAI_API_KEY", "DATABASE_URL", "MYSQL_PWD", "SOMETHING_TOKEN")


def secret_environment() -> dict[str, str]:
    """Fresh values each run, so a hit can only come from this run."""
    tag = uuid.uuid4().hex[:12]
    return {
        "OPENAI_API_KEY": f"sk-proj-{tag}-openai",
        "DATABASE_URL": "postgres://admin:s3cret-pw@db/x",
        "MYSQL_PWD": f"mysql-{tag}-pw",
        "SOMETHING_TOKEN": f"tok-{tag}-custom",
    }


def secret_values(env: dict[str, str]) -> list[str]:
    """What must never appear: every credential value and the URL's password."""
    return [env["OPENAI_API_KEY"], env["MYSQL_PWD"], env["SOMETHING_TOKEN"], "s3cret-pw"]


def leaks(data: bytes, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s.encode() in data]


def files_under(folder: Path) -> Iterator[Path]:
    return (p for p in sorted(folder.rglob("*")) if p.is_file())


def hook_settings(folder: Path, out: Path) -> Path:
    hooks = {event: [{"hooks": [{"type": "command",
                                 "command": f"{sys.executable} {SCRIPTS / 'record.py'} {out / event}"}]}]
             for event in HOOK_EVENTS}
    path = folder / "settings.json"
    path.write_text(json.dumps({"hooks": hooks}), encoding="utf-8")
    return path


def assert_hooks_clean(out: Path, secrets: list[str]) -> None:
    for event in HOOK_EVENTS:
        assert (out / event / "stdin.bin").is_file(), f"the {event} hook did not run"
    for path in files_under(out):
        assert not leaks(path.read_bytes(), secrets), path
    for env_file in out.glob("*/env.json"):
        env = json.loads(env_file.read_text(encoding="utf-8"))
        assert not [name for name in SECRET_NAMES if name in env], env_file
    posted = b"".join(p.read_bytes() for p in (out / "PostToolUse").glob("stdin*.bin"))
    assert MASK.encode() in posted  # the payload carried the (masked) output, not nothing


# -- a real agent loop in this process: bash tool, hooks, both stores --------------------------------------
@dataclass
class Run:
    secrets: list[str]
    events: list[ev.AgentEvent]
    hooks: Path
    outputs: list[str]


@pytest.fixture(params=[("jsonl", ClaudeCodeHooks), ("sqlite", CodexHooks)], ids=["jsonl-claude", "sqlite-codex"])
def agent_run(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    kind, dialect = request.param
    env = secret_environment()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    secrets = secret_values(env)
    store = JsonlStore(tmp_path / "sessions") if kind == "jsonl" else SqliteStore(tmp_path / "s.sqlite")
    out = tmp_path / "hooks"
    tools = ToolRegistry()
    tools.register(BashTool(ShellEnvRegistry(tmp_path / "home")))
    model = ScriptedModel(
        call("bash", json.dumps({"command": "env"}), "c1"),
        call("bash", json.dumps({"command": "echo \"db=$DATABASE_URL pw=$MYSQL_PWD\"; "
                                            f"echo {env['OPENAI_API_KEY']}"}), "c2"),
        Reply(text=["the key is ", env["SOMETHING_TOKEN"], " and the URL ", env["DATABASE_URL"]]),
    )
    hooks = HookRunner([dialect(hook_settings(tmp_path, out))])
    agent = Agent.create(store, model, cwd=str(tmp_path), tools=tools, hooks=hooks)
    seen: list[ev.AgentEvent] = []
    agent.subscribe(seen.append)
    import asyncio

    result = asyncio.run(agent.send(f"check my environment, my token is {env['SOMETHING_TOKEN']}"))
    assert result.reason == "completed"
    outputs = [e.text for e in seen if isinstance(e, ev.ToolFinished)]
    asyncio.run(agent.close())
    yield Run(secrets, seen, out, outputs)


def test_tool_results_are_masked_but_still_useful(agent_run: Run) -> None:
    env_output, echo_output = agent_run.outputs
    assert "PATH=" in env_output and not leaks(env_output.encode(), agent_run.secrets)
    assert echo_output.strip().splitlines()[:2] == ["db= pw=", MASK]  # scrubbed from the shell, masked in output


def test_displayed_events_are_masked(agent_run: Run) -> None:
    shown = repr(agent_run.events).encode()
    assert not leaks(shown, agent_run.secrets)
    answer = next(e for e in agent_run.events if isinstance(e, ev.AssistantMessage) and e.text)
    assert answer.text == f"the key is {MASK} and the URL postgres://admin:{MASK}@db/x"


def test_hook_payloads_and_environment_are_clean(agent_run: Run) -> None:
    assert_hooks_clean(agent_run.hooks, agent_run.secrets)


async def test_what_a_hook_says_back_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook reads the harness's start-up environment itself and answers with it: the agent sees it masked."""
    env = secret_environment()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    script = tmp_path / "leaky_hook.sh"
    script.write_text(f"echo 'context {env['OPENAI_API_KEY']}'\necho 'blocked: {env['MYSQL_PWD']}' >&2\nexit 2\n",
                      encoding="utf-8")
    config = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": f"bash {script}"}]}]}}
    model = ScriptedModel()
    agent = Agent.create(JsonlStore(tmp_path / "s"), model, cwd=str(tmp_path),
                         hooks=HookRunner([ClaudeCodeHooks(config)]))
    seen: list[ev.AgentEvent] = []
    agent.subscribe(seen.append)
    result = await agent.send("hello")
    assert result.reason == "blocked" and result.error is not None and MASK in result.error
    assert not leaks((repr(result) + repr(seen)).encode(), secret_values(env))
    await agent.close()


def test_store_bytes_are_clean(agent_run: Run, tmp_path: Path) -> None:
    stored = [p for p in files_under(tmp_path) if p.name.startswith(("session.jsonl", "s.sqlite"))]
    assert stored
    for path in stored:
        assert not leaks(path.read_bytes(), agent_run.secrets), path
    assert any(MASK.encode() in p.read_bytes() for p in stored)


# -- a real kernel: %%dsh with the offline model, the python tool in the kernel, bash, /proc ------------------
NOTEBOOK_CELLS = [
    '%load_ext dsh_jupyter\n%config DshMagics.approval = "auto"',  # headless: nobody could allow the tools
    "%config DshMagics.claude_hooks = {settings!r}",
    "%%dsh\n/python\n```python\nimport os\nfor name in {names!r}:\n    print(name, os.environ[name])\n```",
    "%%dsh\n/bash cat /proc/$PPID/environ | tr '\\0' '\\n'",
    "%%dsh\n/bash env",
    "%%dsh\n/bash cat /proc/self/environ | tr '\\0' '\\n'; echo \"db=$DATABASE_URL\"",
    "%dsh sessions",
    '%config DshMagics.store = "sqlite"',
    "%%dsh -n\n/bash cat /proc/$PPID/environ | tr '\\0' '\\n'",
]
PYTHON_CELL = 2


@dataclass
class KernelRun:
    secrets: list[str]
    root: Path
    home: Path
    hooks: Path
    notebook: dict[str, Any]
    path: Path


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelRun]:
    from dsh_jupyter.demo import run_notebook

    root = tmp_path_factory.mktemp("secrets-nb")
    home = root / "dsh-home"
    out = root / "hooks"
    env = secret_environment()
    saved = {name: os.environ.get(name) for name in (*env, "DSH_HOME")}
    os.environ.update(env)
    os.environ["DSH_HOME"] = str(home)
    try:
        settings = hook_settings(root, out)
        cells: list[dict[str, Any]] = [
            {"cell_type": "code", "execution_count": None, "id": f"cell-{index}", "metadata": {}, "outputs": [],
             "source": text.format(settings=str(settings), names=list(SECRET_NAMES))}
            for index, text in enumerate(NOTEBOOK_CELLS)]
        notebook = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                "language": "python"}},
                    "nbformat": 4, "nbformat_minor": 5}
        source = root / "source" / "secrets.ipynb"
        source.parent.mkdir()
        source.write_text(json.dumps(notebook), encoding="utf-8")
        work = root / "work"
        executed = run_notebook(source, work, timeout=120)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield KernelRun(secret_values(env), work, home, out, json.loads(executed.read_text(encoding="utf-8")), executed)


def cell_text(cell: dict[str, Any]) -> str:
    return json.dumps(cell.get("outputs", []), ensure_ascii=False)



@pytest.mark.slow
def test_kernel_tools_ran_and_their_output_is_masked(kernel_run: KernelRun) -> None:
    cells: list[dict[str, Any]] = kernel_run.notebook["cells"]
    proc = cell_text(cells[3])
    assert "OPENAI_API_KEY=" in proc and MASK in proc  # bash read the kernel's start-up environment …
    assert "MYSQL_PWD=" + MASK in proc and "postgres://admin:" + MASK + "@db/x" in proc  # … and saw it masked
    assert "PATH=" in cell_text(cells[4])
    assert "db=" in cell_text(cells[5])
    for index, cell in enumerate(cells):
        if index != PYTHON_CELL:
            assert not leaks(cell_text(cell).encode(), kernel_run.secrets), (index, cell["source"])


@pytest.mark.slow
def test_kernel_python_tool_cell_display_is_masked(kernel_run: KernelRun) -> None:
    assert not leaks(cell_text(kernel_run.notebook["cells"][PYTHON_CELL]).encode(), kernel_run.secrets)


@pytest.mark.slow
def test_kernel_python_tool_result_is_masked_in_the_log(kernel_run: KernelRun) -> None:
    logs = list((kernel_run.root / ".dsh" / "sessions").glob("*/session.jsonl"))
    assert logs
    results = [json.loads(line) for log in logs for line in log.read_text(encoding="utf-8").splitlines()]
    python_results = [r for r in results if r.get("type") == "tool/result" and "OPENAI_API_KEY" in json.dumps(r)]
    assert python_results and all(MASK in json.dumps(r) for r in python_results)


@pytest.mark.slow
def test_kernel_logs_and_sqlite_store_bytes_are_clean(kernel_run: KernelRun) -> None:
    stored = [p for p in files_under(kernel_run.root / ".dsh")]
    assert any(p.name == "session.jsonl" for p in stored) and any(p.suffix == ".sqlite" for p in stored)
    for path in stored:
        assert not leaks(path.read_bytes(), kernel_run.secrets), path


@pytest.mark.slow
def test_kernel_hooks_saw_no_secret(kernel_run: KernelRun) -> None:
    assert_hooks_clean(kernel_run.hooks, kernel_run.secrets)


@pytest.mark.slow
def test_catalog_database_and_body_search_hold_no_secret(kernel_run: KernelRun) -> None:
    from catalog_helpers import cataloged

    from dsh_jupyter.catalog import Catalog
    from dsh_jupyter.references import ReferenceTarget

    store = JsonlStore(kernel_run.root / ".dsh" / "sessions")
    catalog = Catalog(kernel_run.home / "catalog.sqlite", background=False)
    try:
        catalog.ensure_store(store.root, budget=None)
        target = ReferenceTarget("someone-else", str(kernel_run.root))
        assert cataloged(catalog, [store], target, "masked", body=True)  # the bodies were indexed
        for secret in kernel_run.secrets:
            assert cataloged(catalog, [store], target, secret, body=True) == [], secret
    finally:
        catalog.close()
    for path in kernel_run.home.glob("catalog.sqlite*"):
        assert not leaks(path.read_bytes(), kernel_run.secrets), path
