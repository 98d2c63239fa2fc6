"""Streaming a turn into cell output: Markdown that updates in place, coalesced to a few updates a second.

The events are folded by :class:`~.transcript.Transcript`; this module only turns its items into
Markdown (and plain text for terminals) and decides where the updates go.

Agent events arrive on the agent thread. A foreground turn updates display handles under its own cell
(the agent task carries the cell's context) and freezes finished parts as separate outputs so each update
stays small. A background turn keeps one handle and sends its updates from an empty context, so they
travel under whichever cell is executing; the host re-sends a finished background view's final state
when the next cell runs (updates sent while the kernel is idle have no cell to ride on).
"""

from __future__ import annotations

import html
import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..agent import events as ev
from .escape import escape_controls
from .markdown import safe_markdown
from .transcript import (
    EndItem,
    Item,
    NoticeItem,
    ReasoningItem,
    TextItem,
    ToolItem,
    ToolStatus,
    Transcript,
    UpdateCoalescer,
    loop_timer,
)

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

#: The mark after a tool line in Markdown, and the word in plain text, for each status.
TOOL_MARKS: dict[ToolStatus, tuple[str, str]] = {
    "running": ("…", "running"),
    "ok": ("✓", "ok"),
    "error": ("✗", "error"),
    "stopped": ("⏹ stopped", "stopped"),
}
#: The body of a tool line whose turn ended before the call finished.
STOPPED_BODY = "(stopped: the turn ended before this call finished; no result was recorded)"
#: Shown while a turn has produced nothing yet.
WAITING = "…"


def _end_line(item: EndItem) -> tuple[str, bool]:
    """What a cell says when its turn ended other than ``completed``, and whether it is a quiet status line."""
    if item.reason == "interrupted":
        return "⏹ interrupted: the turn was stopped; the log is closed cleanly.", True
    if item.reason == "error":
        return f"The turn ended with an error: {item.error}", False
    if item.reason == "max-steps":
        return item.error or "stopped at the step limit", False
    if item.reason == "blocked":
        return "⛔ blocked by a hook; nothing was recorded", True
    return f"the turn ended: {item.reason}", True


class TranscriptMarkdown:
    """A display object for part of a turn: Markdown for notebooks, plain text for terminals.

    User prompts and reference contexts are not shown: a cell shows its own prompt, and the magic
    displays the reference context before the turn starts.
    """

    def __init__(self, items: Sequence[Item], show_reasoning: bool, *, waiting: bool = True) -> None:
        self.items = list(items)
        self.show_reasoning = show_reasoning
        #: Show :data:`WAITING` when there are no items (the turn is still running).
        self.waiting = waiting

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {"text/markdown": self.markdown(), "text/plain": self.plain()}

    def markdown(self) -> str:
        parts: list[str] = []
        for item in self.items:
            if isinstance(item, TextItem):
                parts.append(safe_markdown(item.text))
            elif isinstance(item, ReasoningItem):
                body = html.escape(escape_controls(item.text, one_line=False))
                state = " open" if self.show_reasoning else ""
                parts.append(f"<details{state}><summary>Reasoning</summary><pre>{body}</pre></details>")
            elif isinstance(item, ToolItem):
                mark = TOOL_MARKS[item.status][0]
                note = item.approval_note
                head = html.escape(escape_controls(f"{item.name} · {item.summary}"))
                if note:  # how it was allowed or refused (approvals)
                    mark += f" <sub>{html.escape(escape_controls(note))}</sub>"
                shown = STOPPED_BODY if item.status == "stopped" and not item.result else item.result
                body = html.escape(escape_controls(shown, one_line=False))
                parts.append(f"<details><summary>🔧 <code>{head}</code> {mark}</summary><pre>{body}</pre></details>")
            elif isinstance(item, NoticeItem):
                parts.append("> " + html.escape(escape_controls(item.text, one_line=False)))
            elif isinstance(item, EndItem):
                line, quiet = _end_line(item)
                text = html.escape(escape_controls(line, one_line=False))
                parts.append(f"<sub>{text}</sub>" if quiet else f"> {text}")
        if not parts and self.waiting:
            parts.append(f"<sub>{WAITING}</sub>")
        return "\n\n".join(p for p in parts if p)

    def plain(self) -> str:
        lines: list[str] = []
        for item in self.items:
            if isinstance(item, TextItem):
                lines.append(escape_controls(item.text, one_line=False))
            elif isinstance(item, ReasoningItem) and self.show_reasoning:
                lines.append("[reasoning] " + escape_controls(item.text, one_line=False))
            elif isinstance(item, ToolItem):
                note = f" ({item.approval_note})" if item.approval_note else ""
                lines.append(escape_controls(f"[tool {item.name}: {item.summary}] {TOOL_MARKS[item.status][1]}{note}"))
            elif isinstance(item, NoticeItem):
                lines.append(escape_controls(item.text, one_line=False))
            elif isinstance(item, EndItem):
                lines.append(escape_controls(_end_line(item)[0], one_line=False))
        if not lines and self.waiting:
            lines.append(WAITING)
        return "\n".join(lines)


class TurnView:
    """Renders one submitted prompt's turn into the cell that submitted it (a listener of agent events)."""

    def __init__(self, show_reasoning: bool = False, rate: float = 20.0, background: bool = False) -> None:
        self.show_reasoning = show_reasoning
        self.background = background
        self.transcript = Transcript(max_items=None)
        self._lock = threading.Lock()
        self._handles: list[DisplayHandle] = []
        self._frozen = 0  # the last item number already shown in a finished (frozen) output
        self._upto: int | None = None  # while freezing: the last item the current output keeps
        self._coalescer = UpdateCoalescer(self._send, max_rate=rate if rate > 0 else math.inf,
                                          start_timer=loop_timer, isolate=background)

    @property
    def finished(self) -> bool:
        return self.transcript.finished

    @property
    def reason(self) -> str | None:
        return self.transcript.reason

    @property
    def updates(self) -> int:
        """How many display updates were sent (the first display not counted)."""
        return self._coalescer.updates

    # -- display plumbing ------------------------------------------------------------------------------
    def start(self) -> None:
        """Create the first output; call from the cell (main thread)."""
        self._new_handle()

    def _new_handle(self) -> None:
        from IPython.display import display

        handle = display(TranscriptMarkdown([], self.show_reasoning), display_id=True)
        if handle is not None:
            with self._lock:
                self._handles.append(handle)

    def _send(self) -> None:
        with self._lock:
            handle = self._handles[-1] if self._handles else None
            frozen, upto = self._frozen, self._upto
        if handle is None:
            return
        items = self.transcript.items_after(frozen, upto)
        handle.update(TranscriptMarkdown(items, self.show_reasoning, waiting=not self.transcript.finished))

    def _freeze(self) -> None:
        """Foreground only: finish the current output and continue in a new one below it.

        The finished output keeps the items up to the first tool call still running (each result
        then shows in the output that holds its call); the rest moves to the new output.
        """
        settled = self.transcript.settled_number()
        if self.background or settled <= self._frozen:
            self._coalescer.poke(final=True)
            return
        with self._lock:
            self._upto = settled
        self._coalescer.poke(final=True)
        with self._lock:
            self._frozen, self._upto = settled, None
        self._new_handle()
        if self.transcript.last_number > settled:
            self._coalescer.poke(final=True)

    # -- events ------------------------------------------------------------------------------------------
    def note(self, text: str, level: str = "info") -> None:
        self.transcript.add_notice(text, level)
        self._coalescer.poke()

    def __call__(self, event: ev.AgentEvent) -> None:
        boundary = self.transcript.apply(event)
        if isinstance(event, ev.ToolFinished):
            self._freeze()
        else:
            self._coalescer.poke(final=boundary)

    def finish(self, reason: str, error: str | None = None) -> None:
        """End the view's turn (when the turn could not report its end itself); idempotent."""
        self.transcript.end_turn(reason, error)
        self._coalescer.poke(final=True)

    def refresh(self) -> None:
        """Re-send the current state (from the main thread, e.g. when the next cell starts)."""
        self._coalescer.poke(final=True)
