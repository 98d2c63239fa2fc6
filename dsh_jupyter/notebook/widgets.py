"""Notebook widgets (anywidget): a mention picker, a prompt box and a chat panel.

This module imports anywidget; nothing else in the package imports it at load time, so loading the
extension stays fast. The views live in ``static/`` (``picker.js``, ``prompt.js``, ``chat.js``,
``widgets.css``) and set every piece of text with ``textContent``.

The widgets talk to a duck-typed notebook host:

- ``host.candidates(query, limit=None) -> list[dict]``: sessions in rank order, remote candidate
  form (``sessionId``, ``label``, ``cwd``?, ``sameWorkspace``, ``createdAt``, ``mention``); the
  picker's "search message bodies" toggle calls ``host.candidates(query, limit, body=True)``, which a
  host offers when it searches through the session catalog;
- ``host.submit_async(text, listener) -> concurrent.futures.Future``: send or steer (the host
  decides); ``listener`` receives :mod:`dsh_jupyter.agent.events` from the agent thread;
- ``host.busy -> bool`` and ``host.cancel()``.

Requests from a view arrive as anywidget commands (``anywidget.experimental.command``): each
returns ``(response, buffers)`` and never raises; failures come back as ``{"error": message}``.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anywidget
import ipywidgets
import traitlets
from anywidget.experimental import command

from dsh_jupyter.agent.events import (
    AgentEvent,
    AssistantMessage,
    MessageRecorded,
    Notice,
    ReasoningDelta,
    TextDelta,
    TitleChanged,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)

from .display import reference_summary
from .escape import host_mention

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
STEERED_NOTE = "steered into running turn"

Listener = Callable[[AgentEvent], None]


class _Timer(Protocol):
    def cancel(self) -> None: ...


def _ignore(event: AgentEvent) -> None:
    """The listener of a prompt box without a chat panel: events go nowhere."""


def _one_line_error(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def readable_prompt(text: str) -> str:
    """The prompt as the model reads it: each mention shown as ``@label`` (raw text if malformed)."""
    from dsh_jupyter.references.mentions import parse_session_reference_text

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


def submit_to_host(host: Any, text: str, listener: Listener, *, steered: bool | None = None) -> PromptSubmission:
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


# --------------------------------------------------------------------------- transcript model


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit} more characters not shown)"


def _argument_summary(arguments: str, limit: int) -> str:
    """Tool arguments on one line: ``key=value`` pairs of a JSON object, else the raw text."""
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return _one_line(str(arguments), limit)
    if isinstance(parsed, dict):
        parts = [f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in parsed.items()]
        return _one_line(", ".join(parts), limit)
    return _one_line(json.dumps(parsed, ensure_ascii=False), limit)


class TranscriptState:
    """A thread-safe fold of agent events into transcript items (plain dicts with raw text).

    Item kinds: ``user`` (text, steered), ``assistant`` (text, streaming), ``reasoning`` (text,
    streaming), ``tool`` (callId, name, summary, arguments, result, isError, done), ``context``
    (summary, references), ``notice`` (text, level) and ``end`` (reason, error). Each has a
    unique ``id``. Views escape the text; nothing here is HTML.
    """

    def __init__(self, *, max_items: int = 500, max_tool_text: int = 4000, max_args_line: int = 160) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.max_items = max_items
        self.max_tool_text = max_tool_text
        self.max_args_line = max_args_line
        self.busy = False
        self.title = ""
        #: Assistant items streamed since the last finished assistant message.
        self._message_items: list[dict[str, Any]] = []

    # -- building

    def _add(self, kind: str, **fields: Any) -> dict[str, Any]:
        item = {"id": f"i{next(self._ids)}", "kind": kind, **fields}
        self._items.append(item)
        if len(self._items) > self.max_items:
            del self._items[: len(self._items) - self.max_items]
        return item

    def _close_streaming(self) -> None:
        for item in self._items:
            if item.get("streaming"):
                item["streaming"] = False

    def _last_streaming(self, kind: str) -> dict[str, Any] | None:
        if self._items and self._items[-1]["kind"] == kind and self._items[-1].get("streaming"):
            return self._items[-1]
        return None

    def add_user(self, text: str, *, steered: bool) -> str:
        with self._lock:
            self._close_streaming()
            item = self._add("user", text=text, steered=steered)
            if steered:
                self._add("notice", text=f"Prompt {STEERED_NOTE}.", level="info")
            return item["id"]

    def add_notice(self, text: str, level: str = "info") -> None:
        with self._lock:
            self._add("notice", text=text, level=level)

    def remove(self, item_id: str) -> None:
        with self._lock:
            position = next((i for i, item in enumerate(self._items) if item["id"] == item_id), None)
            if position is not None:
                removed = self._items.pop(position)
                following = self._items[position] if position < len(self._items) else None
                if removed["kind"] == "user" and removed.get("steered") and following and following["kind"] == "notice":
                    self._items.pop(position)

    def set_busy(self, busy: bool) -> None:
        with self._lock:
            self.busy = busy
            if not busy:
                self._close_streaming()

    def apply(self, event: AgentEvent) -> bool:
        """Fold one event in; ``True`` when a turn starts or ends (the caller then updates the view at once)."""
        with self._lock:
            if isinstance(event, TextDelta):
                item = self._last_streaming("assistant")
                if item is None:
                    self._close_streaming()
                    item = self._add("assistant", text="", streaming=True)
                    self._message_items.append(item)
                item["text"] += event.text
            elif isinstance(event, ReasoningDelta):
                item = self._last_streaming("reasoning")
                if item is None:
                    self._close_streaming()
                    item = self._add("reasoning", text="", streaming=True)
                item["text"] += event.text
            elif isinstance(event, AssistantMessage):
                # The finished text replaces a single streamed item (it is authoritative); when the
                # stream was split (around a tool call) the streamed pieces stay as they are.
                self._close_streaming()
                streamed, self._message_items = self._message_items, []
                if len(streamed) == 1 and event.text:
                    streamed[0]["text"] = event.text
                elif not streamed and event.text:
                    self._add("assistant", text=event.text, streaming=False)
            elif isinstance(event, ToolStarted):
                self._close_streaming()
                self._add(
                    "tool",
                    callId=event.call_id,
                    name=event.name,
                    summary=_argument_summary(event.arguments, self.max_args_line),
                    arguments=_capped(event.arguments, self.max_tool_text),
                    result="",
                    isError=False,
                    done=False,
                )
            elif isinstance(event, ToolFinished):
                item = next(
                    (i for i in reversed(self._items) if i["kind"] == "tool" and i["callId"] == event.call_id), None
                )
                if item is None:
                    item = self._add("tool", callId=event.call_id, name=event.name, summary="", arguments="",
                                     result="", isError=False, done=False)
                item.update(result=_capped(event.text, self.max_tool_text), isError=bool(event.is_error), done=True)
            elif isinstance(event, MessageRecorded):
                self._record(event)
            elif isinstance(event, Notice):
                self._add("notice", text=event.text, level=event.level)
            elif isinstance(event, TitleChanged):
                self.title = event.title
            elif isinstance(event, TurnStarted):
                self.busy = True
                return True
            elif isinstance(event, TurnEnded):
                self.busy = False
                self._close_streaming()
                for item in self._items:
                    if item["kind"] == "tool" and not item["done"]:
                        item["done"] = True
                if event.reason != "completed":
                    self._add("end", reason=event.reason, error=event.error)
                return True
            return False

    def _record(self, event: MessageRecorded) -> None:
        message = event.message if isinstance(event.message, Mapping) else {}
        source = message.get("source")
        if not (isinstance(source, Mapping) and source.get("kind") == "session-reference"):
            return
        try:
            summary = reference_summary(source)
        except ValueError:
            log.warning("dsh: a reference context with malformed metadata was not shown", exc_info=True)
            return
        keys = ("sessionId", "label", "capturedThroughSeq", "compacted", "truncated", "omittedMessages", "omittedBytes")
        references = [
            {key: reference.get(key) for key in keys}
            for reference in source.get("references", ())
            if isinstance(reference, Mapping)
        ]
        self._add("context", summary=summary, references=references)

    def snapshot(self) -> list[dict[str, Any]]:
        """A copy safe to hand to a widget trait (each item copied; strings shared)."""
        with self._lock:
            return [dict(item) for item in self._items]


# --------------------------------------------------------------------------- update coalescing


def _thread_timer(delay: float, fn: Callable[[], None]) -> _Timer:
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()
    return timer


class UpdateCoalescer:
    """Calls ``publish`` at most ``max_rate`` times a second, always once more after the last poke.

    ``poke()`` may come from any thread (the agent thread streams tokens). The first poke after a
    quiet period publishes at once; later ones within the interval arm one timer that publishes
    the latest state; ``poke(final=True)`` publishes at once (end of a turn). ``publish`` runs in an
    empty :mod:`contextvars` context, so it is not attributed to whichever cell started the work.
    """

    def __init__(
        self,
        publish: Callable[[], None],
        *,
        max_rate: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        start_timer: Callable[[float, Callable[[], None]], _Timer] = _thread_timer,
    ) -> None:
        if not isinstance(max_rate, (int, float)) or not max_rate > 0:
            raise ValueError(f"max_rate must be a positive number of updates per second, got {max_rate!r}")
        self._publish = publish
        self.interval = 1.0 / max_rate
        self._clock = clock
        self._start_timer = start_timer
        self._lock = threading.RLock()
        self._last: float | None = None
        self._timer: _Timer | None = None
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
            contextvars.Context().run(self._publish)
        except Exception:
            log.warning("dsh: updating the chat view failed", exc_info=True)

    def _cancel_timer(self) -> None:
        self._generation += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        with self._lock:
            self._cancel_timer()


# --------------------------------------------------------------------------- widgets


class PromptBox(anywidget.AnyWidget):
    """A prompt textarea (synced ``value`` and caret ``cursor``) with a Send button.

    Send calls ``host.submit_async`` (or the ``submit`` callable a :class:`ChatPanel` passes); the
    host decides whether the prompt starts a turn or is steered into the running one. A prompt
    that fails before reaching the log is put back in the box with the error as ``status``.
    """

    _esm = STATIC / "prompt.js"
    _css = STATIC / "widgets.css"

    value = traitlets.Unicode("").tag(sync=True)
    #: Caret position in ``value`` (``-1``: at the end); mentions are inserted there.
    cursor = traitlets.Int(-1).tag(sync=True)
    placeholder = traitlets.Unicode("Ask the agent… (mention sessions with the picker; Ctrl+Enter sends)").tag(sync=True)
    #: The agent is working: the button reads "Steer".
    busy = traitlets.Bool(False).tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    status_level = traitlets.Unicode("info").tag(sync=True)

    def __init__(
        self,
        host: Any = None,
        *,
        listener: Listener | None = None,
        submit: Callable[[str], PromptSubmission] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.host = host
        self._listener = listener
        self._submit = submit
        self.last_submission: PromptSubmission | None = None

    def insert(self, text: str) -> None:
        """Insert ``text`` at the caret, with a space on each side where a word would otherwise touch it."""
        if not isinstance(text, str):
            raise TypeError(f"PromptBox.insert needs a str, got {type(text).__name__}")
        value = self.value
        at = len(value) if self.cursor < 0 or self.cursor > len(value) else self.cursor
        before, after = value[:at], value[at:]
        if before and not before[-1].isspace():
            text = " " + text
        if not after or not after[0].isspace():
            text = text + " "
        with self.hold_sync():
            self.value = before + text + after
            self.cursor = -1 if not after else len(before) + len(text)

    def submit(self) -> PromptSubmission:
        """Hand the prompt to the host and clear the box; raises (keeping the text) when that fails."""
        text = self.value
        if not text.strip():
            raise ValueError("nothing to send: the prompt box is empty; type a prompt first")
        try:
            if self._submit is not None:
                submission = self._submit(text)
            elif self.host is None:
                raise RuntimeError("this prompt box has no host: create it with PromptBox(host) or use ChatPanel(host)")
            else:
                submission = submit_to_host(self.host, text, self._listener or _ignore)
        except Exception as error:
            self._set_status(f"Not sent: {_one_line_error(error)}", "error")
            raise
        self.last_submission = submission
        with self.hold_sync():
            self.value = ""
            self.cursor = -1
            self._set_status(f"Prompt {STEERED_NOTE}." if submission.steered else "Sent.", "info")
        submission.future.add_done_callback(lambda future: self._finished(submission))
        return submission

    def _set_status(self, text: str, level: str) -> None:
        with self.hold_sync():
            self.status = text
            self.status_level = level

    def _finished(self, submission: PromptSubmission) -> None:
        future = submission.future
        if future.cancelled():
            self._set_status("Cancelled.", "info")
            return
        error = future.exception()
        if error is None:
            if self.status in ("Sent.", f"Prompt {STEERED_NOTE}."):
                self._set_status("", "info")
            return
        if not submission.recorded.is_set() and not self.value.strip():
            with self.hold_sync():
                self.value = submission.text
                self.cursor = -1
                self._set_status(f"Not sent: {_one_line_error(error)} (your prompt is back in the box)", "error")
        else:
            self._set_status(f"Turn failed: {_one_line_error(error)}", "error")

    @command
    def send_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: ``{"value": text}``; answers ``{"mode": "sent"|"steered"}`` or ``{"error"}``."""
        try:
            if isinstance(msg, Mapping) and "value" in msg:
                if not isinstance(msg["value"], str):
                    return {"error": "the prompt must be text"}, []
                self.value = msg["value"]
            submission = self.submit()
        except Exception as error:
            return {"error": _one_line_error(error)}, []
        return {"mode": submission.mode}, []


class MentionPicker(anywidget.AnyWidget):
    """Search sessions as you type (filtered in Python) and insert their mentions into a prompt.

    ``query`` is synced with the search box; ``body`` with the "search message bodies" checkbox
    (sessions whose prompts or answers contain the words match too); ``results`` holds the candidate
    dicts of the latest search (raw labels; the view escapes them) with ``mention`` set to the mention to
    insert; ``selected`` lists the mentions chosen so far. ``choose(i)`` picks by index or session id.
    """

    _esm = STATIC / "picker.js"
    _css = STATIC / "widgets.css"

    query = traitlets.Unicode("").tag(sync=True)
    #: Also search message bodies (the view's "search message bodies" checkbox).
    body = traitlets.Bool(False).tag(sync=True)
    selected = traitlets.List(traitlets.Unicode()).tag(sync=True)
    placeholder = traitlets.Unicode("Search sessions by title, id or folder…").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    #: Bumped by :meth:`refresh` so every view searches again.
    _revision = traitlets.Int(0).tag(sync=True)
    #: Candidates of the latest search, in rank order (not synced: views get them from the command).
    results = traitlets.List(traitlets.Dict())
    #: At most this many candidates per search.
    limit = traitlets.Int(50)

    _MAX_VIEWS = 64

    def __init__(self, host: Any, *, target: PromptBox | None = None, **kwargs: Any) -> None:
        if host is None or not callable(getattr(host, "candidates", None)):
            raise TypeError("MentionPicker needs a host with a candidates(query, limit) method")
        if target is not None and not isinstance(target, PromptBox):
            raise TypeError(f"MentionPicker target must be a PromptBox or None, got {type(target).__name__}")
        self.host = host
        self.target = target
        self._last_seq: dict[str, int] = {}
        self._seq_lock = threading.Lock()
        super().__init__(**kwargs)

    # -- Python API

    def search(self, query: str, body: bool | None = None) -> list[dict[str, Any]]:
        """Ask the host for candidates matching ``query`` (a leading ``@`` is ignored); raises on failure.

        ``body`` (default: the ``body`` toggle) also matches message bodies."""
        if not isinstance(query, str):
            raise TypeError(f"the picker query must be a str, got {type(query).__name__}")
        if body is None:
            body = self.body
        elif not isinstance(body, bool):
            raise TypeError(f"body must be True or False, got {type(body).__name__}")
        needle = query.strip()
        if needle.startswith("@"):
            needle = needle[1:]
        if body:
            if not _accepts_keyword(self.host.candidates, "body"):
                raise ValueError("this notebook host cannot search message bodies (it needs the session catalog); "
                                 "untick 'search message bodies'")
            candidates = self.host.candidates(needle, self.limit, body=True)
        else:
            candidates = self.host.candidates(needle, self.limit)
        rows = []
        for candidate in candidates or ():
            try:
                rows.append({**candidate, "mention": host_mention(candidate)})
            except (ValueError, TypeError):
                log.warning("dsh: skipping a malformed session candidate %r", candidate, exc_info=True)
        return rows

    def refresh(self) -> list[dict[str, Any]]:
        """Search again for the current query (and make every view do the same)."""
        rows = self._search_and_store(self.query)
        self._revision += 1
        return rows

    def choose(self, which: int | str) -> str:
        """Pick a result by index in ``results`` or by session id; insert its mention; return it."""
        candidate = self._find(which)
        mention = candidate["mention"]
        if mention not in self.selected:
            self.selected = [*self.selected, mention]
        if self.target is not None:
            self.target.insert(mention)
        return mention

    # -- internals

    def _find(self, which: int | str) -> dict[str, Any]:
        if isinstance(which, bool) or not isinstance(which, (int, str)):
            raise TypeError(f"choose() takes a result index or a session id, got {type(which).__name__}")
        if isinstance(which, int):
            if not 0 <= which < len(self.results):
                shown = f"indexes 0–{len(self.results) - 1}" if self.results else "no results"
                raise IndexError(f"no result {which}: the picker shows {shown}; search first (picker.query = '…')")
            return self.results[which]
        for candidate in self.results:
            if candidate.get("sessionId") == which:
                return candidate
        for candidate in self.search(which):
            if candidate.get("sessionId") == which:
                return candidate
        raise ValueError(f"no session {which!r} among the candidates; check the id with %dsh sessions")

    def _search_and_store(self, query: str) -> list[dict[str, Any]]:
        try:
            rows = self.search(query)
        except Exception as error:
            log.warning("dsh: session search failed", exc_info=True)
            with self.hold_sync():
                self.error = f"Search failed: {_one_line_error(error)}"
                self.results = []
            return []
        with self.hold_sync():
            self.error = ""
            self.results = rows
        return rows

    @traitlets.observe("query")
    def _query_changed(self, change: Mapping[str, Any]) -> None:
        if "query" in self._property_lock:
            return  # typed in a view: that view asks through search_command
        self._search_and_store(change["new"])

    @traitlets.observe("body")
    def _body_changed(self, change: Mapping[str, Any]) -> None:
        if "body" in self._property_lock:
            return  # ticked in a view: that view asks through search_command
        self._search_and_store(self.query)

    def _is_stale(self, view: str, seq: Any) -> bool:
        if isinstance(seq, bool) or not isinstance(seq, int):
            return False
        with self._seq_lock:
            last = self._last_seq.get(view)
            if last is not None and seq <= last:
                return True
            self._last_seq.pop(view, None)
            self._last_seq[view] = seq
            while len(self._last_seq) > self._MAX_VIEWS:
                self._last_seq.pop(next(iter(self._last_seq)))
            return False

    @command
    def search_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: ``{"query", "seq", "view", "body"?}``; answers with the results for that ``seq``.

        ``body`` (a bool; default: the ``body`` toggle) also searches message bodies. A request whose
        ``seq`` is not newer than one already answered for the same view gets ``{"stale": true}`` and
        no search.
        """
        if not isinstance(msg, Mapping) or not isinstance(msg.get("query"), str):
            return {"error": "a search needs a text query"}, []
        body = msg.get("body", None)
        if body is not None and not isinstance(body, bool):
            return {"error": "body must be true or false"}, []
        seq, view = msg.get("seq"), str(msg.get("view", ""))
        if self._is_stale(view, seq):
            return {"seq": seq, "stale": True}, []
        query = msg["query"]
        try:
            rows = self.search(query, body)
        except Exception as error:
            log.warning("dsh: session search failed", exc_info=True)
            self.error = f"Search failed: {_one_line_error(error)}"
            return {"seq": seq, "query": query, "error": self.error}, []
        with self.hold_sync():
            self.error = ""
            self.results = rows
        return {"seq": seq, "query": query, "results": rows}, []

    @command
    def choose_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: ``{"sessionId"}`` (preferred) or ``{"index"}``; answers ``{"mention"}`` or ``{"error"}``."""
        if not isinstance(msg, Mapping):
            return {"error": "choose needs a sessionId or an index"}, []
        which = msg.get("sessionId", msg.get("index"))
        try:
            mention = self.choose(which)
        except Exception as error:
            return {"error": _one_line_error(error)}, []
        return {"mention": mention, "selected": list(self.selected)}, []


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes the keyword argument ``name`` (directly or through ``**kwargs``)."""
    import inspect

    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True  # cannot tell: let the call say
    return any(p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.kind == p.VAR_KEYWORD
               for p in parameters)


class ChatTranscript(anywidget.AnyWidget):
    """The streaming transcript view of a :class:`ChatPanel` (items, busy flag, title, Stop button)."""

    _esm = STATIC / "chat.js"
    _css = STATIC / "widgets.css"

    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *, on_stop: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_stop = on_stop

    @command
    def stop_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: the Stop button."""
        if self._on_stop is None:
            return {"error": "nothing to stop"}, []
        try:
            self._on_stop()
        except Exception as error:
            return {"error": _one_line_error(error)}, []
        return {"ok": True}, []


class ChatPanel(ipywidgets.VBox):
    """A chat with the notebook's agent: streaming transcript, mention picker and prompt box.

    Prompts go through ``host.submit_async``: a new turn when the agent is idle, a steer into the
    running turn when it is busy (the transcript then says so). Agent events arrive on the agent
    thread and reach the view at most ``max_rate`` times a second, with a final update at the end
    of each turn.
    """

    def __init__(self, host: Any, *, max_rate: float = 20.0, **kwargs: Any) -> None:
        for name in ("submit_async", "cancel", "candidates"):
            if not callable(getattr(host, name, None)):
                raise TypeError(f"ChatPanel needs a notebook host with a {name}() method")
        self.host = host
        self.state = TranscriptState()
        self.transcript = ChatTranscript(on_stop=self.stop)
        self.prompt = PromptBox(host, submit=self._submit)
        self.picker = MentionPicker(host, target=self.prompt)
        self._coalescer = UpdateCoalescer(self._publish, max_rate=max_rate)
        kwargs.setdefault("children", [self.transcript, self.picker, self.prompt])
        super().__init__(**kwargs)

    # -- Python API

    def submit(self, text: str | None = None) -> PromptSubmission:
        """Send ``text`` (default: the prompt box's text) as the prompt box's Send button does."""
        if text is not None:
            if not isinstance(text, str):
                raise TypeError(f"the prompt must be a str, got {type(text).__name__}")
            self.prompt.value = text
            self.prompt.cursor = -1
        return self.prompt.submit()

    def stop(self) -> None:
        """Cancel the running turn (the Stop button)."""
        try:
            self.host.cancel()
        except Exception as error:
            self.state.add_notice(f"Stop failed: {_one_line_error(error)}", "error")
            self._coalescer.poke(final=True)
            raise
        self.state.add_notice("Stop requested.")
        self._coalescer.poke(final=True)

    @property
    def items(self) -> list[dict[str, Any]]:
        """The transcript items as last sent to the view."""
        return list(self.transcript.items)

    def close(self) -> None:
        """Close the panel and its three widgets (also runs when a half-built panel is collected)."""
        coalescer = getattr(self, "_coalescer", None)
        if coalescer is not None:
            coalescer.close()
        for name in ("transcript", "picker", "prompt"):
            child = getattr(self, name, None)
            if child is not None:
                child.close()
        super().close()

    # -- internals

    def _submit(self, text: str) -> PromptSubmission:
        steered = bool(self.host.busy)
        item_id = self.state.add_user(readable_prompt(text), steered=steered)
        self._coalescer.poke()
        try:
            submission = submit_to_host(self.host, text, self._on_event, steered=steered)
        except Exception as error:
            self.state.remove(item_id)
            self.state.add_notice(f"Not sent: {_one_line_error(error)}", "error")
            self._coalescer.poke(final=True)
            raise
        submission.future.add_done_callback(lambda future: self._finished(future))
        return submission

    def _on_event(self, event: AgentEvent) -> None:
        """The listener the host calls from the agent thread."""
        try:
            final = self.state.apply(event)
        except Exception:
            log.warning("dsh: could not show agent event %r", event, exc_info=True)
            return
        self._coalescer.poke(final=final)

    def _finished(self, future: concurrent.futures.Future[Any]) -> None:
        if future.cancelled():
            self.state.add_notice("Cancelled.")
        else:
            error = future.exception()
            if error is not None:
                self.state.add_notice(f"Error: {_one_line_error(error)}", "error")
        try:
            busy = bool(self.host.busy)
        except Exception:
            busy = False
        self.state.set_busy(busy)
        self._coalescer.poke(final=True)

    def _publish(self) -> None:
        items = self.state.snapshot()
        busy, title = self.state.busy, self.state.title
        with self.transcript.hold_sync():
            self.transcript.items = items
            self.transcript.busy = busy
            self.transcript.title = title
        self.prompt.busy = busy


__all__ = [
    "ChatPanel",
    "ChatTranscript",
    "MentionPicker",
    "PromptBox",
    "STEERED_NOTE",
    "PromptSubmission",
    "TranscriptState",
    "UpdateCoalescer",
    "readable_prompt",
    "submit_to_host",
]
