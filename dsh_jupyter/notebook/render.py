"""Streaming a turn into cell output: Markdown that updates in place, coalesced to a few updates a second.

Agent events arrive on the agent thread. A foreground turn updates display handles under its own cell
(the agent task carries the cell's context) and freezes finished parts as separate outputs so each update
stays small. A background turn keeps one handle and sends its updates from an empty context, so they
travel under whichever cell is executing; the host re-sends a finished background view's final state
when the next cell runs (updates sent while the kernel is idle have no cell to ride on).
"""

from __future__ import annotations

import asyncio
import contextvars
import html
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..agent import events as ev
from .escape import escape_controls
from .markdown import safe_markdown

TOOL_PREVIEW_CHARS = 4000
ARGS_PREVIEW_CHARS = 120


@dataclass
class _Segment:
    kind: str  # text | reasoning | tool | notice | status
    text: str = ""
    name: str = ""
    arguments: str = ""
    result: str | None = None
    is_error: bool = False
    level: str = "info"


def _one_line_args(name: str, arguments: str) -> str:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        if name == "bash" and isinstance(parsed.get("command"), str):
            summary = parsed["command"]
        elif name == "python" and isinstance(parsed.get("code"), str):
            summary = parsed["code"]
        else:
            summary = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    else:
        summary = arguments or ""
    summary = " ".join(summary.split())
    if len(summary) > ARGS_PREVIEW_CHARS:
        summary = summary[: ARGS_PREVIEW_CHARS - 1] + "…"
    return summary


def _clip(text: str, limit: int = TOOL_PREVIEW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


class TranscriptMarkdown:
    """A display object for part of a turn: Markdown for notebooks, plain text for terminals."""

    def __init__(self, segments: list[_Segment], show_reasoning: bool) -> None:
        self.segments = segments
        self.show_reasoning = show_reasoning

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/markdown": self.markdown(), "text/plain": self.plain()}

    def markdown(self) -> str:
        parts: list[str] = []
        for seg in self.segments:
            if seg.kind == "text":
                parts.append(safe_markdown(seg.text))
            elif seg.kind == "reasoning":
                body = html.escape(escape_controls(seg.text, one_line=False))
                state = " open" if self.show_reasoning else ""
                parts.append(f"<details{state}><summary>Reasoning</summary><pre>{body}</pre></details>")
            elif seg.kind == "tool":
                status = "…" if seg.result is None else ("✗" if seg.is_error else "✓")
                head = html.escape(escape_controls(f"{seg.name} · {_one_line_args(seg.name, seg.arguments)}"))
                body = "" if seg.result is None else html.escape(escape_controls(_clip(seg.result), one_line=False))
                parts.append(f"<details><summary>🔧 <code>{head}</code> {status}</summary><pre>{body}</pre></details>")
            elif seg.kind in ("notice", "status"):
                text = html.escape(escape_controls(seg.text, one_line=False))
                parts.append(f"<sub>{text}</sub>" if seg.kind == "status" else f"> {text}")
        return "\n\n".join(p for p in parts if p)

    def plain(self) -> str:
        lines: list[str] = []
        for seg in self.segments:
            if seg.kind == "text":
                lines.append(escape_controls(seg.text, one_line=False))
            elif seg.kind == "reasoning" and self.show_reasoning:
                lines.append("[reasoning] " + escape_controls(seg.text, one_line=False))
            elif seg.kind == "tool":
                status = "running" if seg.result is None else ("error" if seg.is_error else "ok")
                lines.append(escape_controls(f"[tool {seg.name}: {_one_line_args(seg.name, seg.arguments)}] {status}"))
            elif seg.kind in ("notice", "status"):
                lines.append(escape_controls(seg.text, one_line=False))
        return "\n".join(lines)


@dataclass
class TurnView:
    """Renders one submitted prompt's turn into the cell that submitted it."""

    show_reasoning: bool = False
    rate: float = 20.0
    background: bool = False
    segments: list[_Segment] = field(default_factory=list)
    finished: bool = False
    reason: str | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: list[Any] = []
        self._frozen = 0
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._dirty = False
        self.updates = 0

    # -- display plumbing ------------------------------------------------------------------------------
    def start(self) -> None:
        """Create the first output; call from the cell (main thread)."""
        self._new_handle()

    def _new_handle(self) -> None:
        from IPython.display import display

        handle = display(TranscriptMarkdown([_Segment("status", "…")], self.show_reasoning), display_id=True)
        self._handles.append(handle)

    def _send(self) -> None:
        with self._lock:
            segments = list(self.segments[self._frozen:])
            handle = self._handles[-1] if self._handles else None
            self._dirty = False
            self._last = time.monotonic()
        if handle is None:
            return
        if not segments:
            segments = [_Segment("status", "…")]
        obj = TranscriptMarkdown(segments, self.show_reasoning)
        self.updates += 1
        if self.background:
            contextvars.Context().run(handle.update, obj)
        else:
            handle.update(obj)

    def _schedule(self) -> None:
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        now = time.monotonic()
        with self._lock:
            self._dirty = True
            due = self._last + interval - now
            timer_pending = self._timer is not None
        if due <= 0:
            self._cancel_timer()
            self._send()
            return
        if timer_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._send()
            return
        self._timer = loop.call_later(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._dirty:
            self._send()

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _freeze(self) -> None:
        """Foreground only: finish the current output and continue in a new one below it."""
        if self.background:
            return
        self._cancel_timer()
        self._send()
        with self._lock:
            self._frozen = len(self.segments)
        self._new_handle()

    # -- events ------------------------------------------------------------------------------------------
    def note(self, text: str, level: str = "info") -> None:
        with self._lock:
            self.segments.append(_Segment("notice", text, level=level))
        self._schedule()

    def __call__(self, event: ev.AgentEvent) -> None:
        if isinstance(event, ev.TextDelta):
            self._append_piece("text", event.text)
        elif isinstance(event, ev.ReasoningDelta):
            self._append_piece("reasoning", event.text)
        elif isinstance(event, ev.ToolStarted):
            with self._lock:
                self.segments.append(_Segment("tool", name=event.name, arguments=event.arguments))
            self._schedule()
        elif isinstance(event, ev.ToolFinished):
            with self._lock:
                for seg in reversed(self.segments):
                    if seg.kind == "tool" and seg.result is None and seg.name == event.name:
                        seg.result, seg.is_error = event.text, event.is_error
                        break
            self._freeze()
        elif isinstance(event, ev.Notice):
            self.note(event.text, event.level)
        elif isinstance(event, ev.TurnEnded):
            self.finish(event.reason, event.error)

    def _append_piece(self, kind: str, text: str) -> None:
        with self._lock:
            if self.segments and self.segments[-1].kind == kind:
                self.segments[-1].text += text
            else:
                self.segments.append(_Segment(kind, text))
        self._schedule()

    def finish(self, reason: str, error: str | None = None) -> None:
        with self._lock:
            if self.finished:
                return
            self.finished, self.reason = True, reason
            if reason == "interrupted":
                self.segments.append(_Segment("status", "⏹ interrupted: the turn was stopped; the log is closed cleanly."))
            elif reason == "error":
                self.segments.append(_Segment("notice", f"The turn ended with an error: {error}", level="error"))
            elif reason == "max-steps":
                self.segments.append(_Segment("notice", error or "stopped at the step limit", level="warning"))
            elif reason == "blocked":
                self.segments.append(_Segment("status", "⛔ blocked by a hook; nothing was recorded"))
        self._cancel_timer()
        self._send()

    def refresh(self) -> None:
        """Re-send the current state (from the main thread, e.g. when the next cell starts)."""
        self._send()
