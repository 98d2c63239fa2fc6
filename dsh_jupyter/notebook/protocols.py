"""What the notebook surfaces need from the notebook host, as :class:`typing.Protocol` seams.

The widgets, the ``@`` completer and the ``python`` tool depend on these small protocols, never on
:class:`~.host.NotebookHost` itself, so they can be driven by a test double and none of them imports
the host module (which imports the ``python`` tool). The host offers every method here under the same
name.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:  # the agent package is heavy: the completer imports this module while the extension loads
    from ..agent.events import AgentEvent

_T = TypeVar("_T")

#: Receives agent events on the agent thread.
Listener: TypeAlias = "Callable[[AgentEvent], None]"


class SessionCandidates(Protocol):
    """Lists sessions to mention, in rank order, in the remote candidate form.

    Each candidate is a dict with ``sessionId``, ``label``, ``cwd`` (when known), ``sameWorkspace``,
    ``createdAt`` and ``mention``.
    """

    def candidates(self, query: str, limit: int | None = None) -> list[dict[str, Any]]: ...


class BodySearch(Protocol):
    """A host that can also match message bodies (it searches through the session catalog)."""

    def candidates(self, query: str, limit: int | None = None, *, body: bool = False) -> list[dict[str, Any]]: ...


class FileCandidates(Protocol):
    """Lists files and folders relative to the notebook folder (folders end with ``/``)."""

    def file_candidates(self, query: str, limit: int = 50) -> list[str]: ...


class CompletionHost(SessionCandidates, FileCandidates, Protocol):
    """What ``@`` completion in ``%%dsh`` cells needs: sessions, then files."""


class PromptHost(Protocol):
    """Takes prompts: sends one (idle) or steers it into the running turn (busy)."""

    @property
    def busy(self) -> bool: ...

    def submit_async(self, text: str, listener: Listener) -> concurrent.futures.Future[Any]:
        """Prepare and send ``text``; ``listener`` receives the turn's events on the agent thread."""
        ...


class ChatHost(PromptHost, SessionCandidates, Protocol):
    """What a chat panel needs: prompts, mentions and a way to stop the running turn."""

    def cancel(self) -> None: ...


class MainThreadRunner(Protocol):
    """Runs callables on the kernel's main thread (while a foreground cell waits and pumps them)."""

    def submit(self, fn: Callable[[], _T]) -> concurrent.futures.Future[_T]: ...


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
