"""Handing a prompt to the host: the one submit path of the prompt box and the chat panel, and the
error line a widget shows when it fails.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_jupyter.references.mentions import parse_session_reference_text

from ...agent.events import AgentEvent, MessageRecorded
from ..messages import Said, describe
from ..protocols import Listener, PromptHost


def one_line_error(error: BaseException, prompt: str = "") -> str:
    """The error in the user's terms, as cells say it (one rule: :func:`dsh_jupyter.ui.messages.describe`)."""
    text = describe(error, Said(prompt=prompt)).strip() or type(error).__name__
    return text.splitlines()[0]


def readable_prompt(text: str) -> str:
    """The prompt as the model reads it: each mention shown as ``@label`` (raw text if malformed)."""
    try:
        return parse_session_reference_text(text).text
    except Exception:
        return text


# --------------------------------------------------------------------------- submissions


@dataclass
class PromptSubmission:
    """One prompt handed to the host: its future, whether it was steered, and whether it was recorded."""

    text: str
    future: concurrent.futures.Future[Any]
    steered: bool
    recorded: threading.Event = field(default_factory=threading.Event)

    @property
    def mode(self) -> str:
        return "steered" if self.steered else "sent"


def submit_to_host(host: PromptHost, text: str, listener: Listener, *, steered: bool | None = None) -> PromptSubmission:
    """Send ``text`` through the host; it is a steer when the host was busy just before.

    ``steered`` overrides that reading of ``host.busy`` (for a caller that already read it).

    ``PromptSubmission.recorded`` is set when the host reports the prompt entering the log (a
    :class:`MessageRecorded` event of a user message), so a failure before that can give the
    text back to the user.
    """
    if steered is None:
        steered = bool(host.busy)
    recorded = threading.Event()  # made first: the agent thread may report before submit_async returns

    def watch(event: AgentEvent) -> None:
        if isinstance(event, MessageRecorded):
            source = event.message.get("source") if isinstance(event.message, Mapping) else None
            if isinstance(source, Mapping) and source.get("kind") == "user":
                recorded.set()
        listener(event)

    future = host.submit_async(text, watch)
    if not isinstance(future, concurrent.futures.Future):
        raise TypeError(f"host.submit_async must return a concurrent.futures.Future, got {type(future).__name__}")
    submission = PromptSubmission(text=text, future=future, steered=steered, recorded=recorded)
    return submission
