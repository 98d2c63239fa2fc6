"""The first-prompt warm-up: after the loading cell, a background thread imports what the first turn needs.

``%load_ext`` itself stays light (the thread starts only once the loading cell has finished), a first turn
after the warm-up imports nothing more, a prompt sent at once still works (it waits for the warm-up instead
of doing the same work beside it), and ``warm_up = False`` turns it off. Each check runs in a fresh
interpreter: the warm-up is once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kernel_helpers import KernelRunner, output_texts

from dsh_jupyter.notebook import warmup

HEAVY = ("dsh_jupyter.agent", "dsh_jupyter.tools", "dsh_jupyter.references", "dsh_jupyter.models",
         "dsh_jupyter.catalog", "dsh_jupyter.ui.render", "mistune", "nh3")

_SHELL = """
import json, sys, threading, time
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from dsh_jupyter.notebook import warmup
ip = InteractiveShell.instance()
HEAVY = {heavy!r}
def heavy():
    return sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in HEAVY))
def threads():
    return [t.name for t in threading.enumerate() if t.name == 'dsh-warm-up']
out = {{}}
"""


def _run(tmp_path: Path, body: str) -> dict[str, object]:
    code = _SHELL.format(heavy=HEAVY) + body + "\nprint('RESULT ' + json.dumps(out))\n"
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home"), "IPYTHONDIR": str(tmp_path / "ipython")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout
    result: dict[str, object] = json.loads(lines[-1][len("RESULT "):])
    return result


def test_load_ext_itself_starts_nothing_and_imports_nothing_heavy(tmp_path: Path) -> None:
    result = _run(tmp_path, """
ip.run_line_magic('load_ext', 'dsh_jupyter')
time.sleep(0.5)
out['heavy'], out['threads'] = heavy(), threads()
""")
    assert result == {"heavy": [], "threads": []}


def test_the_warm_up_runs_after_the_loading_cell_and_covers_the_first_turn(tmp_path: Path) -> None:
    result = _run(tmp_path, """
ip.user_ns["HEAVY"] = HEAVY
ip.run_cell("%load_ext dsh_jupyter\\nimport sys\\nat_load = [m for m in HEAVY if m in sys.modules]")
out['at_load'] = ip.user_ns['at_load']
out['started'] = bool(threads()) or all(m in sys.modules for m in warmup.FIRST_TURN_MODULES)
warmup.wait()
out['missing'] = [m for m in warmup.FIRST_TURN_MODULES if m not in sys.modules]
out['loop'] = [t.name for t in threading.enumerate() if t.name == 'dsh-agent']
from dsh_jupyter import secrets
out['masker'] = secrets.default_masker()._seen is not None
before = set(sys.modules)
with capture_output():
    ip.run_cell("%%dsh\\nhello there")
import glob
out['answer'] = any('hello there' in open(f, encoding='utf-8').read()
                    for f in glob.glob('.dsh/sessions/**/*.jsonl', recursive=True))
out['new'] = sorted(m for m in set(sys.modules) - before
                    if m.startswith(('dsh_jupyter', 'mistune', 'nh3', 'filelock', 'simdjson')))
""")
    assert result["at_load"] == [], "the loading cell itself imported heavy modules"
    assert result["started"] is True
    assert result["missing"] == []
    assert result["loop"] == ["dsh-agent"], "the agent thread's loop is left for the first prompt to start"
    assert result["masker"] is True, "the secret masker's values are left for the first logged event to build"
    assert result["answer"] is True
    assert result["new"] == [], "the first turn imported modules the warm-up should have (add them to " \
                                "FIRST_TURN_MODULES)"


def test_warm_up_false_in_the_loading_cell_turns_it_off(tmp_path: Path) -> None:
    result = _run(tmp_path, """
ip.run_cell("%load_ext dsh_jupyter\\n%config DshMagics.warm_up = False")
ip.run_cell("x = 1")
time.sleep(0.5)
out['warmed'] = [m for m in ('dsh_jupyter.agent', 'dsh_jupyter.ui.render', 'mistune', 'nh3') if m in sys.modules]
out['threads'] = threads() + [t.name for t in threading.enumerate() if t.name == 'dsh-agent']
""")
    assert result == {"warmed": [], "threads": []}


def test_a_prompt_waits_for_a_running_warm_up_and_the_work_runs_once() -> None:
    gate, calls = threading.Event(), []

    def work() -> None:
        calls.append(1)
        gate.wait(10)

    warm = warmup._WarmUp()
    warm.wait()  # never started: returns at once
    assert warm.start(work) and not warm.start(work)
    assert warm.running
    waited = threading.Thread(target=warm.wait)
    waited.start()
    time.sleep(0.2)
    assert waited.is_alive(), "wait() returned while the warm-up was still running"
    gate.set()
    waited.join(10)
    assert not waited.is_alive() and not warm.running and calls == [1]


def test_a_failing_warm_up_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise ImportError("no such module")

    warm = warmup._WarmUp()
    with caplog.at_level("DEBUG", logger="dsh_jupyter.notebook.warmup"):
        warm.start(broken)
        warm.wait()
    assert not warm.running
    assert any("warm-up stopped early" in record.getMessage() for record in caplog.records)


def test_a_prompt_sent_at_once_after_load_ext_works_on_a_real_kernel(tmp_path: Path,
                                                                     kernel_runner: KernelRunner) -> None:
    nb = kernel_runner.run(["%load_ext dsh_jupyter", "%%dsh\nhello at once", "%%dsh\nand again"], tmp_path)
    first, second = (" ".join(output_texts(nb.cells[i].outputs, "text/plain", "text/markdown")) for i in (1, 2))
    assert "hello at once" in first and "and again" in second
    assert "Error" not in first + second and "dsh:" not in first
