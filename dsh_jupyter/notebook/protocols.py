"""What the notebook surfaces need from the notebook host, as :class:`typing.Protocol` seams.

The ``@`` completer and the ``python`` tool depend on these small protocols (the widgets on those of
:mod:`dsh_jupyter.ui.protocols`, re-exported here), never on :class:`~.host.NotebookHost` itself, so
they can be driven by a test double and none of them imports the host module (which imports the
``python`` tool). The host offers every method here under the same name.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..ui.protocols import BodySearch, ChatHost, Listener, PromptHost, SessionCandidates
from ..workspace.cell_runner import MainThreadRunner


class FileCandidates(Protocol):
    """Lists files and folders relative to the notebook folder (folders end with ``/``)."""

    def file_candidates(self, query: str, limit: int = 50) -> list[str]: ...


class CompletionHost(SessionCandidates, FileCandidates, Protocol):
    """What ``@`` completion in ``%%dsh`` cells needs: sessions, then files."""


class KernelShell(Protocol):
    """The part of IPython's ``InteractiveShell`` the ``python`` tool uses."""

    @property
    def user_ns(self) -> dict[str, Any]: ...

    def transform_cell(self, raw_cell: str) -> str: ...


class PythonToolHost(Protocol):
    """What the ``python`` tool needs: the kernel's shell and, while a cell waits, its main-thread runner."""

    @property
    def shell(self) -> KernelShell: ...

    @property
    def main_thread_calls(self) -> MainThreadRunner | None: ...


__all__ = [
    "BodySearch",
    "ChatHost",
    "CompletionHost",
    "FileCandidates",
    "KernelShell",
    "Listener",
    "MainThreadRunner",
    "PromptHost",
    "PythonToolHost",
    "SessionCandidates",
]
