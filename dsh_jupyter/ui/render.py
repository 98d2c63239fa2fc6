"""Streaming a turn into cell output: rendered Markdown that updates in place, a few updates a second.

The events are folded by :class:`~dsh_jupyter.conversation.fold.Transcript`; this module only turns its items into
HTML (answers through :func:`~.markdown.markdown_html`, our own markup through
:func:`~.markdown.safe_html`: ``text/html``, no ``text/markdown``, see :mod:`.markdown` for why) and
plain text for terminals, and decides where the updates go.

Every turn's last output ends with a footer (:class:`TurnFooter`): the session's title and short id,
the model, the status (running, then done, interrupted, error, blocked), the duration and the tokens
the provider reported. It is part of the output bundle, so a saved notebook keeps it; the same facts
travel as JSON in the output's metadata under :data:`TURN_MIME` for front ends.

Agent events arrive on the agent thread. A foreground turn updates display handles under its own cell
(the agent task carries the cell's context) and freezes finished parts as separate outputs so each update
stays small. A background turn keeps one handle and sends its updates from an empty context, so they
travel under whichever cell is executing; the host re-sends a finished background view's final state
when the next cell runs (updates sent while the kernel is idle have no cell to ride on).

``IPython.display`` is imported when a view is first shown, so the renderer works without IPython
(exports, the CLI).
"""

from __future__ import annotations

import html
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from ..agent import events as ev
from ..agent.transcript_feed import apply_event
from ..clip import one_line
from ..conversation.fold import Transcript
from ..conversation.items import Answer, Item, Notice, Reasoning, ToolCall, ToolStatus, TurnEnd
from ..conversation.limits import CELL
from ..conversation.usage import ContextMeter, TokenUsage, format_cost
from ..escape import escape_controls, html_field
from .coalescer import UpdateCoalescer, loop_timer
from .markdown import markdown_html, safe_html

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from ..models.base import ModelInfo

#: The mark after a tool line in HTML, and the word in plain text, for each status.
TOOL_MARKS: dict[ToolStatus, tuple[str, str]] = {
    "running": ("…", "running"),
    "ok": ("✓", "ok"),
    "error": ("✗", "error"),
    "stopped": ("■ stopped", "stopped"),
}
#: The body of a tool line whose turn ended before the call finished.
STOPPED_BODY = "(stopped: the turn ended before this call finished; no result was recorded)"
#: Shown while a turn has produced nothing yet.
WAITING = "…"


def _end_line(item: TurnEnd) -> tuple[str, bool]:
    """What a cell says when its turn ended other than ``completed``, and whether it is a quiet status line."""
    if item.reason == "interrupted":
        return "■ interrupted: the turn was stopped; the log is closed cleanly.", True
    if item.reason == "error":
        return f"The turn ended with an error: {item.error}", False
    if item.reason == "max-steps":
        return item.error or "stopped at the step limit", False
    if item.reason == "blocked":
        return "⊘ blocked by a hook; nothing was recorded", True
    return f"the turn ended: {item.reason}", True


# --------------------------------------------------------------------------- the turn footer

#: The metadata key (a MIME-style name) under which a turn's output carries its footer facts as JSON.
TURN_MIME = "application/vnd.dsh.turn+json"
#: How many characters of a session title the footer shows.
MAX_FOOTER_TITLE = 60
#: How many characters of a session id the footer shows (``%dsh resume`` accepts this prefix).
SHORT_ID = 8

#: What the footer says for each way a turn stands: (mark, word).
STATUS_WORDS: dict[str, tuple[str, str]] = {
    "running": ("●", "running"),
    "completed": ("✓", "done"),
    "interrupted": ("■", "interrupted"),
    "error": ("✗", "error"),
    "blocked": ("⊘", "blocked"),
    "max-steps": ("‖", "stopped at the step limit"),
    # a footer saved while its turn ran, whose end the session log did not know (ui/saved_footer.py)
    "unfinished": ("○", "unfinished when saved"),
}


class _HasModelInfo(Protocol):
    @property
    def info(self) -> ModelInfo: ...


class TurnSession(Protocol):
    """What the footer names about the session a turn runs in (the agent offers each of these)."""

    @property
    def id(self) -> str: ...

    @property
    def model(self) -> _HasModelInfo: ...

    def title(self) -> str | None: ...


def _count(value: int) -> str:
    return f"{value:,}"


def format_duration(seconds: float) -> str:
    """``under 0.1 s``, ``0.4 s``, ``12.5 s``, ``2 min 5 s``, ``1 h 3 min``."""
    if seconds < 0.05:
        return "under 0.1 s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _clock_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().strftime("%H:%M:%S")


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True)
class TurnFooter:
    """The facts of one turn at one moment, as the footer line and as JSON.

    ``status`` is ``running`` or how the turn ended (a :class:`~dsh_jupyter.agent.events.TurnEnded`
    reason); ``started_at``/``ended_at`` are epoch seconds (``None`` when unknown).
    """

    session_id: str
    title: str
    provider: str
    model: str
    status: str
    started_at: float | None
    ended_at: float | None
    usage: TokenUsage | None = None
    #: How full the window is for the next request (``None``: unknown, or the turn is still running).
    context: ContextMeter | None = None
    #: A last fact to add in words (a footer settled when its notebook was saved mid-turn).
    note: str | None = None

    @property
    def short_id(self) -> str:
        return self.session_id[:SHORT_ID]

    @property
    def model_label(self) -> str:
        """``offline``, ``deepseek:deepseek-chat``: the model as ``--model`` spells it."""
        return self.model if self.model in (self.provider, "") else f"{self.provider}:{self.model}"

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    def _timing(self) -> str | None:
        if self.status in ("running", "unfinished"):
            word = "since" if self.status == "running" else "started"
            return None if self.started_at is None else f"{word} {_clock_time(self.started_at)}"
        duration = self.duration
        return None if duration is None else format_duration(duration)

    def _tokens(self) -> str | None:
        usage = self.usage
        if usage is None:
            return None
        parts = [f"{_count(usage.input)} in", f"{_count(usage.output)} out"]
        if usage.cached is not None:
            parts.append(f"{_count(usage.cached)} cached")
        cost = "" if usage.cost is None else f" · {'' if usage.cost <= 0 else 'cost '}{format_cost(usage.cost)}"
        return "tokens " + ", ".join(parts) + cost

    def _facts(self) -> list[str]:
        """The parts after the status and the session, plain text (controls escaped, not HTML-escaped)."""
        context = self.context.text() if self.context is not None else None
        facts = (self.model_label, self._timing(), self._tokens(), context, self.note)
        return [escape_controls(fact) for fact in facts if fact]

    def _status(self) -> str:
        mark, word = STATUS_WORDS.get(self.status, ("", self.status))
        return f"{mark} {word}".strip()

    def _title(self) -> str:
        return escape_controls(one_line(self.title, MAX_FOOTER_TITLE)) if self.title.strip() else "untitled session"

    def plain(self) -> str:
        session = f"{self._title()} ({escape_controls(self.short_id)})"
        return " · ".join([escape_controls(self._status()), session, *self._facts()])

    def html(self) -> str:
        """One small line of inline HTML (:func:`~.markdown.safe_html` keeps ``sub``, ``span``, ``code``, classes)."""
        state = html.escape(self.status)
        status = f'<span class="dsh-turn-status dsh-turn-{state}">{html.escape(self._status())}</span>'
        session = (f'<span class="dsh-turn-session">{html.escape(self._title())}</span> '
                   f"(<code>{html.escape(escape_controls(self.short_id))}</code>)")
        facts = [status, session, *(html.escape(fact) for fact in self._facts())]
        return f'<sub class="dsh-turn-footer">{" · ".join(facts)}</sub>'

    def to_json(self) -> dict[str, object]:
        """Raw values for front ends (``sessionId`` in full; a front end escapes what it shows)."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "provider": self.provider,
            "model": self.model,
            "status": self.status,
            "startedAt": _iso(self.started_at),
            "endedAt": _iso(self.ended_at),
            "durationSeconds": None if self.duration is None else round(self.duration, 3),
            "usage": None if self.usage is None else self.usage.to_json(),
            "context": None if self.context is None else self.context.to_json(),
            **({"note": self.note} if self.note else {}),
        }


#: The class of a tool line's approval note ("allowed once by you"): small and grey, on the summary's baseline.
TOOL_NOTE_CLASS = "dsh-tool-note"
#: The mark before a tool line (U+2699: in the fonts every desktop ships, unlike the wrench emoji).
TOOL_GLYPH = "\u2699"


def tool_details_html(item: ToolCall) -> str:
    """One tool call as a collapsed ``<details>``: its summary, its mark, how it was approved, its result."""
    mark = TOOL_MARKS[item.status][0]
    if item.approval_note:  # how it was allowed or refused (approvals), on the summary's baseline
        mark += f' <small class="{TOOL_NOTE_CLASS}">{html_field(item.approval_note)}</small>'
    shown = STOPPED_BODY if item.status == "stopped" and not item.result else item.result or ""
    head = html_field(f"{item.name} · {item.summary}")
    return (f"<details><summary>{TOOL_GLYPH} <code>{head}</code> {mark}</summary>"
            f"<pre>{html_field(shown, one_line=False)}</pre></details>")


class TranscriptMarkdown:
    """A display object for part of a turn: its Markdown rendered to safe HTML for notebooks, plain text
    for terminals.

    User prompts and reference contexts are not shown: a cell shows its own prompt, and the magic
    displays the reference context before the turn starts. Nor are compaction checkpoints and harness notes
    (the agent's notice says a compaction happened; exports show both).
    """

    def __init__(self, items: Sequence[Item], show_reasoning: bool, *, waiting: bool = True,
                 footer: TurnFooter | None = None) -> None:
        self.items = list(items)
        self.show_reasoning = show_reasoning
        #: Show :data:`WAITING` when there are no items (the turn is still running).
        self.waiting = waiting
        #: The turn footer, shown last (only the turn's last output has one).
        self.footer = footer

    def _repr_mimebundle_(self, include: object = None, exclude: object = None
                          ) -> tuple[dict[str, str], dict[str, object]]:
        metadata: dict[str, object] = {TURN_MIME: self.footer.to_json()} if self.footer is not None else {}
        return {"text/html": self.html(), "text/plain": self.plain()}, metadata

    def _parts(self) -> list[Answer | str]:
        """Each part: an answer (its Markdown), or our own markup around escaped text."""
        parts: list[Answer | str] = []
        for item in self.items:
            if isinstance(item, Answer):
                parts.append(item)
            elif isinstance(item, Reasoning):
                body = html.escape(escape_controls(item.text, one_line=False))
                state = " open" if self.show_reasoning else ""
                parts.append(f"<details{state}><summary>Reasoning</summary><pre>{body}</pre></details>")
            elif isinstance(item, ToolCall):
                parts.append(tool_details_html(item))
            elif isinstance(item, Notice):  # ours, with `code` spans around what the user typed
                parts.append(f"<blockquote>{markdown_html(item.text)}</blockquote>")
            elif isinstance(item, TurnEnd):
                line, quiet = _end_line(item)
                text = html.escape(escape_controls(line, one_line=False))
                parts.append(f"<p><sub>{text}</sub></p>" if quiet else f"<blockquote><p>{text}</p></blockquote>")
        if not parts and self.waiting and self.footer is None:  # a footer says "running" itself
            parts.append(f"<p><sub>{WAITING}</sub></p>")
        if self.footer is not None:
            parts.append(f"<p>{self.footer.html()}</p>")
        return parts

    def html(self) -> str:
        """The parts as one ``<div class="dsh-turn">`` of inert blocks (``""`` when there is nothing)."""
        blocks = [markdown_html(part.text, partial=part.streaming) if isinstance(part, Answer) else safe_html(part)
                  for part in self._parts()]
        return f'<div class="dsh-turn">{"".join(blocks)}</div>' if blocks else ""

    def plain(self) -> str:
        lines: list[str] = []
        for item in self.items:
            if isinstance(item, Answer):
                lines.append(escape_controls(item.text, one_line=False))
            elif isinstance(item, Reasoning) and self.show_reasoning:
                lines.append("[reasoning] " + escape_controls(item.text, one_line=False))
            elif isinstance(item, ToolCall):
                note = f" ({item.approval_note})" if item.approval_note else ""
                lines.append(escape_controls(f"[tool {item.name}: {item.summary}] {TOOL_MARKS[item.status][1]}{note}"))
            elif isinstance(item, Notice):
                lines.append(escape_controls(item.text, one_line=False))
            elif isinstance(item, TurnEnd):
                lines.append(escape_controls(_end_line(item)[0], one_line=False))
        if not lines and self.waiting and self.footer is None:
            lines.append(WAITING)
        if self.footer is not None:
            lines.append(self.footer.plain())
        return "\n".join(lines)


class TurnView:
    """Renders one submitted prompt's turn into the cell that submitted it (a listener of agent events)."""

    def __init__(self, show_reasoning: bool = False, rate: float = 20.0, background: bool = False,
                 session: TurnSession | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.show_reasoning = show_reasoning
        self.background = background
        #: The session the turn runs in (``None``: no footer, e.g. in tests of the items alone).
        self.session = session
        self._clock = clock
        self._shown_at: float | None = None  # when the view was first displayed (before the turn starts)
        self.transcript = Transcript(limits=CELL, max_items=None, clock=clock)
        self._lock = threading.Lock()
        self._handles: list[DisplayHandle] = []
        self._frozen = 0  # the last item number already shown in a finished (frozen) output
        self._upto: int | None = None  # while freezing: the last item the current output keeps
        self._meter: ContextMeter | None = None  # the context meter, measured once when the turn ends
        self._meter_done = False
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
        self._shown_at = self._clock()
        self._new_handle()

    def footer(self) -> TurnFooter | None:
        """The footer for the turn as it stands now (``None`` without a session)."""
        session = self.session
        if session is None:
            return None
        transcript = self.transcript
        info = session.model.info
        try:
            title = transcript.title or session.title() or ""
        except Exception:  # a footer never breaks the turn's output
            title = transcript.title
        started = transcript.started_at if transcript.started_at is not None else self._shown_at
        return TurnFooter(session.id, title, info.provider, info.model, transcript.reason or "running",
                          started, transcript.ended_at, transcript.usage,
                          context=self._context_meter() if transcript.reason else None)

    def _context_meter(self) -> ContextMeter | None:
        """The session's context meter once the turn has ended (an estimate over the whole surface: not
        redone for every streamed update)."""
        if self._meter_done:
            return self._meter
        self._meter_done = True
        measure = getattr(self.session, "context_meter", None)
        if callable(measure):
            try:
                meter = measure()
            except Exception:  # a footer never breaks the turn's output
                meter = None
            self._meter = meter if isinstance(meter, ContextMeter) else None
        return self._meter

    def _new_handle(self) -> None:
        from IPython.display import display

        handle = display(TranscriptMarkdown([], self.show_reasoning, footer=self.footer()),
                         display_id=True)
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
        footer = self.footer() if upto is None else None  # an output being frozen leaves the footer to the next
        handle.update(TranscriptMarkdown(items, self.show_reasoning, waiting=not self.transcript.finished,
                                         footer=footer))

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
        boundary = apply_event(self.transcript, event)
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
