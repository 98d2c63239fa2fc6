"""The one fold of a conversation into ordered :data:`~.items.Item` objects.

Both inputs feed it through the same methods: live agent events (:mod:`dsh_jupyter.agent.transcript_feed`:
text and reasoning arrive as deltas, a tool's progress as start, approval and finish) and stored session
events (:mod:`.log_feed`: whole messages, the call and its result, approvals in the result's ``meta``).
The fold keeps its texts within the view's :class:`~.limits.Limits`.

A prompt typed into a widget is added at once (:meth:`Transcript.add_user`, ``pending``) and confirmed when
the log records it, so a prompt shows as soon as it is sent and only once. Tool calls are matched by call
id, so two calls of the same tool in one step keep their own results; a call still running when its turn
ends gets the ``stopped`` status.

Thread-safe: the live input arrives on the agent thread while views read copies (:meth:`Transcript.snapshot`,
:meth:`Transcript.items_after`) from any thread. Pure Python: no IPython or widget import.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from ..clip import capped
from ..session.messages import (
    SESSION_REFERENCE_KIND,
    blocks_text,
    display_content,
    is_checkpoint_source,
    is_direct_user_source,
)
from .calls import argument_summary
from .items import (
    Answer,
    Checkpoint,
    Context,
    Item,
    Note,
    Notice,
    Prompt,
    Reasoning,
    ToolCall,
    TurnEnd,
    clip,
    item_id,
)
from .limits import CELL, Limits
from .usage import TokenUsage

#: Said in the transcript when a prompt is steered into the running turn.
STEERED_NOTE = "steered into running turn"

_ItemT = TypeVar("_ItemT", Prompt, Answer, Reasoning, Checkpoint, Note, ToolCall, Context, Notice, TurnEnd)


class Transcript:
    """A thread-safe fold of a conversation into ordered items (see the module docstring).

    ``limits``: how much of each text the items keep (:mod:`.limits`). ``max_items`` (``None``: no limit)
    drops the oldest items.
    """

    def __init__(self, *, limits: Limits = CELL, max_items: int | None = 500,
                 clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._items: list[Item] = []
        self._numbers = itertools.count(1)
        self.limits = limits
        self.max_items = max_items
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
        #: Answer items streamed since the last finished assistant message.
        self._message_items: list[Answer] = []
        #: The one item still streaming (a new streamed item closes the previous one).
        self._open: Answer | Reasoning | None = None

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
            return self._settled()

    @property
    def last_number(self) -> int:
        """The number of the newest item (0 when there is none)."""
        with self._lock:
            return self._items[-1].number if self._items else 0

    def take_settled(self, hold: int | None = None) -> list[Item]:
        """Remove and return the items up to the first tool call still running (a streaming reader writes them
        and forgets them); past ``hold`` items held behind a running call, the oldest go as they are."""
        with self._lock:
            items = self._items
            count = next((i for i, item in enumerate(items) if isinstance(item, ToolCall) and item.status == "running"),
                         len(items))
            if hold is not None and len(items) - count > hold:
                count = len(items) - hold
            if count == 0:
                return []
            taken, self._items = items[:count], items[count:]
            return taken

    def take_all(self) -> list[Item]:
        """Remove and return every item."""
        with self._lock:
            taken, self._items = self._items, []
            return taken

    # -- the user side (widgets and the host)

    def add_user(self, text: str, *, steered: bool) -> str:
        """A prompt sent from a widget, shown at once; returns its id (for :meth:`remove` if sending fails)."""
        with self._lock:
            self._close_streaming()
            item = self._add(Prompt(self._next(), text, steered=steered, pending=True))
            clip(item, self.limits.text)
            if steered:
                self._add(Notice(self._next(), f"Prompt {STEERED_NOTE}."))
            return item_id(item)

    def add_notice(self, text: str, level: str = "info") -> None:
        with self._lock:
            self._add(Notice(self._next(), text, level))

    def remove(self, identifier: str) -> None:
        """Take back a prompt (and its steered note) that never reached the host."""
        with self._lock:
            position = next((i for i, item in enumerate(self._items) if item_id(item) == identifier), None)
            if position is None:
                return
            removed = self._items.pop(position)
            following = self._items[position] if position < len(self._items) else None
            if isinstance(removed, Prompt) and removed.steered and isinstance(following, Notice):
                self._items.pop(position)

    def set_busy(self, busy: bool) -> None:
        with self._lock:
            self.busy = busy
            if not busy:
                self._close_streaming()

    def end_turn(self, reason: str, error: str | None = None) -> bool:
        """End a turn that could not report its own end (``reason`` as in :meth:`turn_ended`).

        Returns ``False`` (and changes nothing) when the latest turn already ended.
        """
        with self._lock:
            if self.reason is not None:
                return False
            self._end(reason, error)
            return True

    # -- the conversation (both inputs)

    def turn_started(self) -> None:
        with self._lock:
            self.busy, self.reason = True, None
            self.usage, self.started_at, self.ended_at = None, self._clock(), None

    def turn_ended(self, reason: str, error: str | None = None) -> None:
        """A turn ended (``completed``, ``interrupted``, ``error``, ``blocked``, ``max-steps``): tools still
        running are ``stopped``; a reason other than ``completed`` adds a :class:`~.items.TurnEnd`. Every end
        counts: a prompt blocked by a hook ends without having started."""
        with self._lock:
            self._end(reason, error)

    def set_title(self, title: str) -> None:
        with self._lock:
            self.title = title

    def text_delta(self, text: str) -> None:
        """More answer text streamed."""
        with self._lock:
            last = self._open
            if not (isinstance(last, Answer) and self._items and self._items[-1] is last):
                self._close_streaming()
                last = self._open = self._add(Answer(self._next()))
                self._message_items.append(last)
            last.text += text
            clip(last, self.limits.text)

    def reasoning_delta(self, text: str, *, whole: bool = False) -> None:
        """More reasoning text; ``whole``: a message's reasoning in one piece (as the log keeps it)."""
        with self._lock:
            last = self._open
            if whole or not (isinstance(last, Reasoning) and self._items and self._items[-1] is last):
                self._close_streaming()
                last = self._add(Reasoning(self._next(), streaming=not whole))
                self._open = None if whole else last
            last.text += text
            clip(last, self.limits.text)

    def assistant_message(self, text: str, usage: Mapping[str, object] | None = None) -> None:
        """A finished assistant message: its text replaces a single streamed answer (it is authoritative);
        when the stream was split (around a tool call) the streamed pieces stay as they are; a message that
        was not streamed becomes an answer unless its text is blank (a message that only called tools)."""
        with self._lock:
            self._close_streaming()
            streamed, self._message_items = self._message_items, []
            if len(streamed) == 1 and text:
                streamed[0].text, streamed[0].cut = text, 0
                clip(streamed[0], self.limits.text)
            elif not streamed and text.strip():
                clip(self._add(Answer(self._next(), text, streaming=False)), self.limits.text)
            if usage is not None:
                self.usage = (self.usage or TokenUsage()).add(usage)

    def tool_started(self, call_id: str, name: str, arguments: str) -> None:
        with self._lock:
            self._close_streaming()
            limits = self.limits
            kept = arguments if limits.arguments is None else capped(arguments, limits.arguments)
            self._add(ToolCall(self._next(), call_id, name, argument_summary(name, arguments, limits.summary), kept))

    def approval(self, call_id: str, record: Mapping[str, Any]) -> None:
        """Who allowed or refused a call (the log's ``meta.approval`` record)."""
        with self._lock:
            tool = self._tool(call_id)
            if tool is not None:
                tool.approval = dict(record)

    def tool_finished(self, call_id: str, name: str, text: str, *, is_error: bool, stopped: bool = False,
                      unmatched: bool = True) -> None:
        """A call's result; ``stopped``: the log recorded that its outcome is unknown (``text`` says why).
        A result whose call is not held (dropped by ``max_items``, or never seen) is shown on its own unless
        ``unmatched`` is false."""
        with self._lock:
            item = self._tool(call_id)
            if item is None:
                if not unmatched:
                    return
                item = self._add(ToolCall(self._next(), call_id, name, "", ""))
            limit = self.limits.output
            item.result = text if limit is None else capped(text, limit)
            item.result_cut = 0 if limit is None else max(0, len(text) - limit)
            item.status = "stopped" if stopped else "error" if is_error else "ok"

    def message(self, message: Mapping[str, Any]) -> None:
        """A user-role message entered the log: a prompt (confirming the oldest pending one), a compaction
        checkpoint, a harness note, or a reference context (with the prompt it was baked into, if any)."""
        source = message.get("source")
        with self._lock:
            if isinstance(source, Mapping) and source.get("kind") == SESSION_REFERENCE_KIND:
                self._add(Context(self._next(), dict(source)))
                envelope = message.get("envelope")
                if isinstance(envelope, Mapping) and isinstance(envelope.get("displayContent"), list):
                    self._prompt(blocks_text(display_content(message)))  # the prompt the snapshots were baked in
                return
            text = blocks_text(display_content(message))
            if not text.strip():
                return
            if is_checkpoint_source(source):
                clip(self._add(Checkpoint(self._next(), text)), self.limits.text)
            elif is_direct_user_source(source):
                self._prompt(text)
            else:
                clip(self._add(Note(self._next(), text)), self.limits.text)

    # -- internals (called with the lock held)

    def _next(self) -> int:
        return next(self._numbers)

    def _add(self, item: _ItemT) -> _ItemT:
        self._items.append(item)
        if self.max_items is not None and len(self._items) > self.max_items:
            del self._items[: len(self._items) - self.max_items]
        return item

    def _settled(self) -> int:
        settled = 0
        for item in self._items:
            if isinstance(item, ToolCall) and item.status == "running":
                break
            settled = item.number
        return settled

    def _prompt(self, text: str) -> None:
        pending = next((i for i in self._items if isinstance(i, Prompt) and i.pending), None)
        if pending is not None:
            pending.pending = False  # the widget's prompt, now in the log: shown once, as it was typed
            return
        self._close_streaming()
        clip(self._add(Prompt(self._next(), text)), self.limits.text)

    def _close_streaming(self) -> None:
        if self._open is not None:
            self._open.streaming = False
            self._open = None

    def _tool(self, call_id: str) -> ToolCall | None:
        return next((i for i in reversed(self._items) if isinstance(i, ToolCall) and i.call_id == call_id), None)

    def _end(self, reason: str, error: str | None) -> None:
        self.busy, self.reason = False, reason
        self.ended_at = self._clock()
        self._close_streaming()
        self._message_items = []
        for item in self._items:
            if isinstance(item, ToolCall) and item.status == "running":
                item.status = "stopped"
        if reason != "completed":
            self._add(TurnEnd(self._next(), reason, error))


__all__ = ["STEERED_NOTE", "Transcript"]
