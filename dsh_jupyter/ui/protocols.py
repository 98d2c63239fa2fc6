"""What the widgets need from the notebook host, as :class:`typing.Protocol` seams.

The picker, the prompt box and the panels depend on these small protocols, never on the host itself, so
they can be driven by a test double and the presentation package never imports the IPython host
(whose ``NotebookHost`` implements every method here under the same name).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:  # the agent package is heavy: the completer imports this module while the extension loads
    from ..agent.events import AgentEvent
    from ..references.candidates import RemoteCandidateJson

#: Receives agent events on the agent thread.
Listener: TypeAlias = "Callable[[AgentEvent], None]"


class SessionCandidates(Protocol):
    """Lists sessions to mention, in rank order, in the remote candidate form.

    Each candidate is a dict with ``sessionId``, ``label``, ``cwd`` (when known), ``sameWorkspace``,
    ``createdAt`` and ``mention``.
    """

    def candidates(self, query: str, limit: int | None = None) -> list[RemoteCandidateJson]: ...


class BodySearch(Protocol):
    """A host that can also match message bodies (it searches through the session catalog)."""

    def candidates(self, query: str, limit: int | None = None, *, body: bool = False) -> list[RemoteCandidateJson]: ...


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


__all__ = ["BodySearch", "ChatHost", "Listener", "PromptHost", "SessionCandidates"]
