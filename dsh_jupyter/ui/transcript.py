"""One transcript model for every notebook surface: agent events in, ordered items out.

The ``%%dsh`` cell renderer (:mod:`.render`) and the chat widget (:mod:`.widgets`) both fold agent
events (:mod:`dsh_jupyter.agent.events`) through :class:`Transcript` and only decide how its items
look. Items are plain dataclasses holding raw text (nothing here is HTML or Markdown; each view
escapes). Tool calls are matched by call id, so two calls of the same tool in one step keep their own
results; a call still running when its turn ends gets the ``stopped`` status.

:class:`UpdateCoalescer` is the rate limit between the model and a view: agent events mark the view
dirty, and the view is flushed at most ``max_rate`` times a second, always once more after the last
change.

Pure Python: no IPython, ipywidgets or anywidget import, so it loads with the extension at no cost.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeVar

from ..agent import events as ev
from ..clip import capped, one_line
from .display import reference_summary

log = logging.getLogger(__name__)

#: How a tool call stands: still running, finished (``ok`` or ``error``), or cut off by the end of its turn.
ToolStatus = Literal["running", "ok", "error", "stopped"]

#: Tool results and full arguments are kept up to this many characters.
MAX_TOOL_TEXT = 4000
#: The one-line argument summary of a tool call is at most this long.
MAX_ARGS_LINE = 120
#: Said in the transcript when a prompt is steered into the running turn.
STEERED_NOTE = "steered into running turn"
#: What a context item keeps of each referenced session's metadata.
_REFERENCE_KEYS = ("sessionId", "label", "capturedThroughSeq", "compacted", "truncated", "omittedMessages",
                   "omittedBytes")


# --------------------------------------------------------------------------- text helpers


def approval_note(record: Mapping[str, object] | None) -> str | None:
    """A decision record (``meta.approval``) in a few words: "allowed once by you", "refused: needs approval".

    ``None`` for calls nobody needed to approve (reading tools, and every call when approval is ``auto``).
    """
    if not record:
        return None
    by, scope, prefix = record.get("answeredBy"), record.get("scope"), record.get("prefix")
    if record.get("allowed"):
        if by == "person":
            if scope == "prefix" and prefix:
                return f"allowed by you for commands starting with {prefix}"
            return "allowed for this session by you" if scope == "session" else "allowed once by you"
        if by == "hook":
            return "allowed by a hook"
        return "allowed for this session" if scope == "session" else None  # auto and reading tools: nothing
    reason = record.get("reason")
    if by == "person":
        return f"refused by you: {reason}" if reason else "refused by you"
    if by == "hook":
        return "refused by a hook"
    if by == "setting":
        return "refused: approval is read-only"
    if by == "timeout":
        return "refused: needs approval (no answer in time)"
    return "refused: needs approval"


def argument_summary(name: str, arguments: str, limit: int = MAX_ARGS_LINE) -> str:
    """A tool call's arguments on one line.

    The command of ``bash`` and the code of ``python`` are shown as written; other JSON objects as
    ``key=value`` pairs; anything else (not JSON, not an object) as its raw text.
    """
    try:
        parsed: object = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return one_line(str(arguments), limit)
    if isinstance(parsed, dict):
        primary = {"bash": "command", "python": "code"}.get(name)
        value = parsed.get(primary) if primary else None
        if isinstance(value, str):
            return one_line(value, limit)
        return one_line(", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items()), limit)
    return one_line(json.dumps(parsed, ensure_ascii=False), limit)


# --------------------------------------------------------------------------- items


@dataclass
class UserItem:
    """A prompt typed into a widget (cells show their own prompt)."""

    number: int
    text: str
    steered: bool = False
    kind: Literal["user"] = "user"


@dataclass
class TextItem:
    """Answer text; ``streaming`` while more of it may still arrive."""

    number: int
    text: str = ""
    streaming: bool = True
    kind: Literal["text"] = "text"


@dataclass
class ReasoningItem:
    number: int
    text: str = ""
    streaming: bool = True
    kind: Literal["reasoning"] = "reasoning"


@dataclass
class ToolItem:
    """One tool call, matched to its result by ``call_id``."""

    number: int
    call_id: str
    name: str
    summary: str
    arguments: str
    result: str = ""
    status: ToolStatus = "running"
    kind: Literal["tool"] = "tool"
    #: The approval decision (the log's ``meta.approval`` record), once there is one.
    approval: dict[str, object] | None = None

    @property
    def done(self) -> bool:
        return self.status != "running"

    @property
    def approval_note(self) -> str | None:
        """How the call was allowed or refused, in a few words (``None`` when there is nothing to say)."""
        return approval_note(self.approval)

    @property
    def is_error(self) -> bool:
        return self.status == "error"


@dataclass
class ContextItem:
    """A reference context entered the log: its one-line summary and the referenced sessions (raw labels)."""

    number: int
    summary: str
    references: list[dict[str, object]] = field(default_factory=list)
    kind: Literal["context"] = "context"


@dataclass
class NoticeItem:
    number: int
    text: str
    level: str = "info"
    kind: Literal["notice"] = "notice"


@dataclass
class EndItem:
    """A turn ended other than ``completed``: ``interrupted``, ``error``, ``blocked`` or ``max-steps``."""

    number: int
    reason: str
    error: str | None = None
    kind: Literal["end"] = "end"


Item = UserItem | TextItem | ReasoningItem | ToolItem | ContextItem | NoticeItem | EndItem


_ItemT = TypeVar("_ItemT", UserItem, TextItem, ReasoningItem, ToolItem, ContextItem, NoticeItem, EndItem)


def item_id(item: Item) -> str:
    """The stable id a view keys an item by (``i1``, ``i2``, …)."""
    return f"i{item.number}"


# --------------------------------------------------------------------------- usage


@dataclass(frozen=True)
class TokenUsage:
    """Token counts summed over a turn's model calls (``cached``/``reasoning`` ``None``: never reported)."""

    input: int = 0
    output: int = 0
    cached: int | None = None
    reasoning: int | None = None
    cost: float | None = None  # as the provider reported it (``None``: it never did)

    def add(self, usage: Mapping[str, object]) -> TokenUsage:
        """These counts plus one model call's ``usage`` object (session format); bad values count as absent."""

        def count(key: str) -> int | None:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

        def plus(total: int | None, key: str) -> int | None:
            value = count(key)
            return total if value is None else (total or 0) + value

        cost = usage.get("cost")
        paid = cost if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0 else None
        return TokenUsage(self.input + (count("inputTokens") or 0), self.output + (count("outputTokens") or 0),
                          plus(self.cached, "cacheReadTokens"), plus(self.reasoning, "reasoningTokens"),
                          self.cost if paid is None else (self.cost or 0.0) + float(paid))

    def to_json(self) -> dict[str, int | float]:
        """The session format's names: ``inputTokens``, ``outputTokens``, ``cacheReadTokens``?,
        ``reasoningTokens``?, ``cost``?."""
        record: dict[str, int | float] = {"inputTokens": self.input, "outputTokens": self.output}
        if self.cached is not None:
            record["cacheReadTokens"] = self.cached
        if self.reasoning is not None:
            record["reasoningTokens"] = self.reasoning
        if self.cost is not None:
            record["cost"] = self.cost
        return record


# --------------------------------------------------------------------------- the model


class Transcript:
    """A thread-safe fold of agent events into ordered :data:`Item` objects.

    Agent events arrive on the agent thread (:meth:`apply`); views read copies (:meth:`snapshot`,
    :meth:`items_after`) from any thread. ``max_items`` (``None``: no limit) drops the oldest items.
    """

    def __init__(self, *, max_items: int | None = 500, max_tool_text: int = MAX_TOOL_TEXT,
                 max_args_line: int = MAX_ARGS_LINE, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._items: list[Item] = []
        self._numbers = itertools.count(1)
        self.max_items = max_items
        self.max_tool_text = max_tool_text
        self.max_args_line = max_args_line
        #: A turn is running (the host may also say so through :meth:`set_busy`).
        self.busy = False
        self.title = ""
        #: How the latest turn ended (``None`` while it runs or before any turn ended).
        self.reason: str | None = None
        #: Token counts of the latest turn (``None`` until a model call reported usage).
        self.usage: TokenUsage | None = None
        #: When the latest turn started and ended (``clock`` time, epoch seconds by default).
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._clock = clock
        #: Text items streamed since the last finished assistant message.
        self._message_items: list[TextItem] = []

    # -- reading

    @property
    def finished(self) -> bool:
        """The latest turn has ended."""
        return self.reason is not None

    def snapshot(self) -> list[Item]:
        """Copies of the items, safe to read while the agent thread adds more."""
        with self._lock:
            return [replace(item) for item in self._items]

    def items_after(self, number: int, upto: int | None = None) -> list[Item]:
        """Copies of the items added after item ``number`` (0: all), up to item ``upto`` (``None``: the newest)."""
        with self._lock:
            return [replace(item) for item in self._items
                    if item.number > number and (upto is None or item.number <= upto)]

    def settled_number(self) -> int:
        """The newest item number up to which every tool call has finished (what a view may freeze)."""
        with self._lock:
            settled = 0
            for item in self._items:
                if isinstance(item, ToolItem) and item.status == "running":
                    break
                settled = item.number
            return settled

    @property
    def last_number(self) -> int:
        """The number of the newest item (0 when there is none)."""
        with self._lock:
            return self._items[-1].number if self._items else 0

    # -- building from the user side

    def add_user(self, text: str, *, steered: bool) -> str:
        """A prompt sent from a widget; returns its id (for :meth:`remove` if sending fails)."""
        with self._lock:
            self._close_streaming()
            item = self._add(UserItem(self._next(), text, steered))
            if steered:
                self._add(NoticeItem(self._next(), f"Prompt {STEERED_NOTE}."))
            return item_id(item)

    def add_notice(self, text: str, level: str = "info") -> None:
        with self._lock:
            self._add(NoticeItem(self._next(), text, level))

    def remove(self, identifier: str) -> None:
        """Take back a user item (and its steered note) whose prompt never reached the host."""
        with self._lock:
            position = next((i for i, item in enumerate(self._items) if item_id(item) == identifier), None)
            if position is None:
                return
            removed = self._items.pop(position)
            following = self._items[position] if position < len(self._items) else None
            if isinstance(removed, UserItem) and removed.steered and isinstance(following, NoticeItem):
                self._items.pop(position)

    def set_busy(self, busy: bool) -> None:
        with self._lock:
            self.busy = busy
            if not busy:
                self._close_streaming()

    def end_turn(self, reason: str, error: str | None = None) -> bool:
        """End a turn that could not report its own end (``reason`` as in :class:`~dsh_jupyter.agent.events.TurnEnded`).

        Tools still running are marked ``stopped``; a reason other than ``completed`` adds an
        :class:`EndItem`. Returns ``False`` (and changes nothing) when the latest turn already ended.
        """
        with self._lock:
            if self.reason is not None:
                return False
            self._end(reason, error)
            return True

    # -- building from agent events

    def apply(self, event: ev.AgentEvent) -> bool:
        """Fold one event in; ``True`` when a turn starts or ends (a view then updates at once)."""
        with self._lock:
            if isinstance(event, ev.TextDelta):
                text = self._streaming_text()
                text.text += event.text
            elif isinstance(event, ev.ReasoningDelta):
                last = self._items[-1] if self._items else None
                if not (isinstance(last, ReasoningItem) and last.streaming):
                    self._close_streaming()
                    last = self._add(ReasoningItem(self._next()))
                last.text += event.text
            elif isinstance(event, ev.AssistantMessage):
                self._finish_message(event.text)
                if event.usage is not None:
                    self.usage = (self.usage or TokenUsage()).add(event.usage)
            elif isinstance(event, ev.ToolStarted):
                self._close_streaming()
                self._add(ToolItem(self._next(), event.call_id, event.name,
                                   argument_summary(event.name, event.arguments, self.max_args_line),
                                   capped(event.arguments, self.max_tool_text)))
            elif isinstance(event, ev.ToolFinished):
                self._finish_tool(event)
            elif isinstance(event, ev.ApprovalDecided):
                tool = self._tool_item(event.call_id)
                if tool is not None:
                    tool.approval = dict(event.record)
            elif isinstance(event, ev.MessageRecorded):
                self._record(event)
            elif isinstance(event, ev.Notice):
                self._add(NoticeItem(self._next(), event.text, event.level))
            elif isinstance(event, ev.TitleChanged):
                self.title = event.title
            elif isinstance(event, ev.TurnStarted):
                self.busy, self.reason = True, None
                self.usage, self.started_at, self.ended_at = None, self._clock(), None
                return True
            elif isinstance(event, ev.TurnEnded):
                self._end(event.reason, event.error)
                return True
            return False

    # -- internals (called with the lock held)

    def _next(self) -> int:
        return next(self._numbers)

    def _add(self, item: _ItemT) -> _ItemT:
        self._items.append(item)
        if self.max_items is not None and len(self._items) > self.max_items:
            del self._items[: len(self._items) - self.max_items]
        return item

    def _close_streaming(self) -> None:
        for item in self._items:
            if isinstance(item, (TextItem, ReasoningItem)):
                item.streaming = False

    def _streaming_text(self) -> TextItem:
        last = self._items[-1] if self._items else None
        if isinstance(last, TextItem) and last.streaming:
            return last
        self._close_streaming()
        item = self._add(TextItem(self._next()))
        self._message_items.append(item)
        return item

    def _finish_message(self, text: str) -> None:
        # The finished text replaces a single streamed item (it is authoritative); when the stream was
        # split (around a tool call) the streamed pieces stay as they are.
        self._close_streaming()
        streamed, self._message_items = self._message_items, []
        if len(streamed) == 1 and text:
            streamed[0].text = text
        elif not streamed and text:
            self._add(TextItem(self._next(), text, streaming=False))

    def _tool_item(self, call_id: str) -> ToolItem | None:
        return next((i for i in reversed(self._items) if isinstance(i, ToolItem) and i.call_id == call_id), None)

    def _finish_tool(self, event: ev.ToolFinished) -> None:
        item = self._tool_item(event.call_id)
        if item is None:  # its start was dropped (max_items) or never seen
            item = self._add(ToolItem(self._next(), event.call_id, event.name, "", ""))
        item.result = capped(event.text, self.max_tool_text)
        item.status = "error" if event.is_error else "ok"

    def _end(self, reason: str, error: str | None) -> None:
        # Every TurnEnded event counts: a prompt blocked by a hook ends without having started.
        self.busy, self.reason = False, reason
        self.ended_at = self._clock()
        self._close_streaming()
        self._message_items = []
        for item in self._items:
            if isinstance(item, ToolItem) and item.status == "running":
                item.status = "stopped"
        if reason != "completed":
            self._add(EndItem(self._next(), reason, error))

    def _record(self, event: ev.MessageRecorded) -> None:
        message = event.message if isinstance(event.message, Mapping) else {}
        source = message.get("source")
        if not (isinstance(source, Mapping) and source.get("kind") == "session-reference"):
            return
        try:
            summary = reference_summary(source)
        except ValueError:
            log.warning("dsh: a reference context with malformed metadata was not shown", exc_info=True)
            return
        references = [
            {key: reference.get(key) for key in _REFERENCE_KEYS}
            for reference in source.get("references", ())
            if isinstance(reference, Mapping)
        ]
        self._add(ContextItem(self._next(), summary, references))


# --------------------------------------------------------------------------- update coalescing


class Timer(Protocol):
    def cancel(self) -> None: ...


StartTimer = Callable[[float, Callable[[], None]], Timer]


def thread_timer(delay: float, fn: Callable[[], None]) -> Timer:
    """Run ``fn`` after ``delay`` seconds on a daemon thread."""
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()
    return timer


def loop_timer(delay: float, fn: Callable[[], None]) -> Timer:
    """Run ``fn`` after ``delay`` seconds on the running asyncio loop (in the caller's context), else a thread."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return thread_timer(delay, fn)
    return loop.call_later(delay, fn)


class UpdateCoalescer:
    """Calls ``publish`` at most ``max_rate`` times a second, always once more after the last poke.

    ``poke()`` may come from any thread (the agent thread streams tokens). The first poke after a
    quiet period publishes at once; later ones within the interval arm one timer that publishes the
    latest state; ``poke(final=True)`` publishes at once (end of a turn, a frozen part of a cell).

    ``isolate=True`` runs ``publish`` in an empty :mod:`contextvars` context, so it is not attributed
    to whichever cell started the work; ``False`` runs it in the context of the poke (or of the
    timer). ``max_rate`` may be ``math.inf`` (no limit).
    """

    def __init__(
        self,
        publish: Callable[[], None],
        *,
        max_rate: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        start_timer: StartTimer = thread_timer,
        isolate: bool = True,
    ) -> None:
        if isinstance(max_rate, bool) or not isinstance(max_rate, (int, float)) or not max_rate > 0:
            raise ValueError(f"max_rate must be a positive number of updates per second, got {max_rate!r}")
        self._publish = publish
        self.interval = 1.0 / max_rate
        self._clock = clock
        self._start_timer = start_timer
        self._isolate = isolate
        self._lock = threading.RLock()
        self._last: float | None = None
        self._timer: Timer | None = None
        self._generation = 0
        self._pending = False
        self.updates = 0

    def poke(self, *, final: bool = False) -> None:
        with self._lock:
            self._pending = True
            now = self._clock()
            if final or self._last is None or now - self._last >= self.interval:
                self._publish_now(now)
            elif self._timer is None:
                generation = self._generation
                self._timer = self._start_timer(self.interval - (now - self._last), lambda: self._fire(generation))

    def flush(self) -> None:
        """Publish now if anything changed since the last update."""
        with self._lock:
            if self._pending:
                self._publish_now(self._clock())

    def close(self) -> None:
        """Drop a pending timer (nothing is published after this unless poked again)."""
        with self._lock:
            self._cancel_timer()

    def _fire(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return
            self._timer = None
            if self._pending:
                self._publish_now(self._clock())

    def _publish_now(self, now: float) -> None:
        self._cancel_timer()
        self._pending = False
        self._last = now
        self.updates += 1
        try:
            if self._isolate:
                contextvars.Context().run(self._publish)
            else:
                self._publish()
        except Exception:
            log.warning("dsh: updating the transcript view failed", exc_info=True)

    def _cancel_timer(self) -> None:
        self._generation += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


__all__ = [
    "MAX_ARGS_LINE",
    "MAX_TOOL_TEXT",
    "STEERED_NOTE",
    "ContextItem",
    "EndItem",
    "Item",
    "NoticeItem",
    "ReasoningItem",
    "TextItem",
    "TokenUsage",
    "ToolItem",
    "ToolStatus",
    "Transcript",
    "UpdateCoalescer",
    "UserItem",
    "argument_summary",
    "item_id",
    "loop_timer",
    "thread_timer",
]
