"""The host seams: the notebook host and the test double satisfy the protocols the surfaces depend on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from import_helpers import module_imports
from notebook_helpers import FakeHost

from dsh_jupyter.notebook import completer, python_tool
from dsh_jupyter.notebook.config import DshSettings
from dsh_jupyter.notebook.host import NotebookHost
from dsh_jupyter.notebook.protocols import ChatHost, CompletionHost, PromptHost, PythonToolHost, SessionCandidates
from dsh_jupyter.ui.widgets import panel, picker, prompt, submission


def as_chat_host(host: ChatHost) -> ChatHost:
    return host


def as_completion_host(host: CompletionHost) -> CompletionHost:
    return host


def as_python_tool_host(host: PythonToolHost) -> PythonToolHost:
    return host


def test_the_notebook_host_offers_every_protocol(tmp_path: Path) -> None:
    # Checked statically by mypy (these calls type-check only if the host satisfies each protocol)
    # and here by name, so a renamed host method fails a test as well as the type check.
    host = NotebookHost(DshSettings(), shell=None, cwd=str(tmp_path))
    try:
        surfaces: list[object] = [as_chat_host(host), as_completion_host(host), as_python_tool_host(host)]
        assert all(surface is host for surface in surfaces)
        for name in ("busy", "submit_async", "cancel", "candidates", "file_candidates", "shell",
                     "main_thread_calls"):
            assert hasattr(host, name), f"the notebook host lacks {name}"
        assert host.main_thread_calls is None and host.busy is False
    finally:
        host.close()


def test_the_test_double_offers_the_widget_protocols() -> None:
    fake = FakeHost()
    prompt: PromptHost = fake
    chat: ChatHost = fake
    mentions: SessionCandidates = fake
    completion: CompletionHost = fake
    assert {id(prompt), id(chat), id(mentions), id(completion)} == {id(fake)}


@pytest.mark.parametrize("module", [panel, picker, prompt, submission, completer, python_tool])
def test_surfaces_take_typed_hosts(module: object) -> None:
    source = Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8")
    assert not re.search(r"\bhost\w*\s*:\s*Any\b", source)
    imported = module_imports(Path(str(getattr(module, "__file__", ""))), str(getattr(module, "__name__", "")))
    host = NotebookHost.__module__
    assert not any(name == host or name.startswith(host + ".") for name in imported), imported


def test_the_protocols_load_nothing_heavy() -> None:
    import subprocess
    import sys

    code = ("import sys, dsh_jupyter.notebook.protocols; "
            "print(sorted(m for m in sys.modules if m.startswith('dsh_jupyter.agent') or m == 'IPython'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # the completer imports them while %load_ext runs
