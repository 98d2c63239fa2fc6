"""Notebook widgets (anywidget): a mention picker, a prompt box and a chat panel.

This module imports anywidget; nothing else in the package imports it at load time, so loading the
extension stays fast. The views live in ``static/`` (``picker.js``, ``prompt.js``, ``chat.js``,
``widgets.css``) and set every piece of text with ``textContent``.

The widgets depend on the host protocols of :mod:`.protocols`: the picker on
:class:`~.protocols.SessionCandidates` (its "search message bodies" toggle needs a host whose
``candidates`` also takes ``body=True``, :class:`~.protocols.BodySearch`), the prompt box on
:class:`~.protocols.PromptHost` (``submit_async`` sends or steers; its listener receives
:mod:`dsh_jupyter.agent.events` from the agent thread) and the chat panel on
:class:`~.protocols.ChatHost`. The chat transcript is folded by :class:`~.transcript.Transcript`;
this module only converts its items to the form ``chat.js`` reads.

Requests from a view arrive as anywidget commands (``anywidget.experimental.command``): each
returns ``(response, buffers)`` and never raises; failures come back as ``{"error": message}``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anywidget
import ipywidgets
import traitlets
from anywidget.experimental import command

from dsh_jupyter.agent.events import AgentEvent, MessageRecorded

from .escape import host_mention
from .protocols import BodySearch, ChatHost, Listener, PromptHost, SessionCandidates
from .transcript import (
    STEERED_NOTE,
    ContextItem,
    Item,
    NoticeItem,
    ReasoningItem,
    TextItem,
    ToolItem,
    Transcript,
    UpdateCoalescer,
    UserItem,
    item_id,
)

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")


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


# --------------------------------------------------------------------------- the chat view's item form


def view_item(item: Item) -> dict[str, Any]:
    """A transcript item as ``chat.js`` reads it (raw text; the view escapes)."""
    view: dict[str, Any] = {"id": item_id(item)}
    if isinstance(item, UserItem):
        view.update(kind="user", text=item.text, steered=item.steered)
    elif isinstance(item, TextItem):
        view.update(kind="assistant", text=item.text, streaming=item.streaming)
    elif isinstance(item, ReasoningItem):
        view.update(kind="reasoning", text=item.text, streaming=item.streaming)
    elif isinstance(item, ToolItem):
        view.update(kind="tool", callId=item.call_id, name=item.name, summary=item.summary,
                    arguments=item.arguments, result=item.result, isError=item.is_error, done=item.done,
                    status=item.status)
    elif isinstance(item, ContextItem):
        view.update(kind="context", summary=item.summary, references=[dict(r) for r in item.references])
    elif isinstance(item, NoticeItem):
        view.update(kind="notice", text=item.text, level=item.level)
    else:
        view.update(kind="end", reason=item.reason, error=item.error)
    return view


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
    placeholder = traitlets.Unicode(
        "Ask the agent… (mention sessions with the picker; Ctrl+Enter sends)"
    ).tag(sync=True)
    #: The agent is working: the button reads "Steer".
    busy = traitlets.Bool(False).tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    status_level = traitlets.Unicode("info").tag(sync=True)

    def __init__(
        self,
        host: PromptHost | None = None,
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

    def __init__(self, host: SessionCandidates, *, target: PromptBox | None = None, **kwargs: Any) -> None:
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
            candidates = cast(BodySearch, self.host).candidates(needle, self.limit, body=True)
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
        mention = str(candidate["mention"])
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
    return any((p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) or p.kind == p.VAR_KEYWORD
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

    def __init__(self, host: ChatHost, *, max_rate: float = 20.0, **kwargs: Any) -> None:
        for name in ("submit_async", "cancel", "candidates"):
            if not callable(getattr(host, name, None)):
                raise TypeError(f"ChatPanel needs a notebook host with a {name}() method")
        self.host = host
        self.state = Transcript()
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
        user_item = self.state.add_user(readable_prompt(text), steered=steered)
        self._coalescer.poke()
        try:
            submission = submit_to_host(self.host, text, self._on_event, steered=steered)
        except Exception as error:
            self.state.remove(user_item)
            self.state.add_notice(f"Not sent: {_one_line_error(error)}", "error")
            self._coalescer.poke(final=True)
            raise
        submission.future.add_done_callback(self._finished)
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
        items = [view_item(item) for item in self.state.snapshot()]
        busy, title = self.state.busy, self.state.title
        with self.transcript.hold_sync():
            self.transcript.items = items
            self.transcript.busy = busy
            self.transcript.title = title
        self.prompt.busy = busy


__all__ = [
    "STEERED_NOTE",
    "ChatPanel",
    "ChatTranscript",
    "MentionPicker",
    "PromptBox",
    "PromptSubmission",
    "readable_prompt",
    "submit_to_host",
    "view_item",
]
