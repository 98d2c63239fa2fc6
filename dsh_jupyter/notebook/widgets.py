"""Notebook widgets (anywidget): a mention picker, a prompt box and the chat and pick panels.

This module imports anywidget; nothing else in the package imports it at load time, so loading the
extension stays fast. The views live in ``static/`` (``picker.js``, ``prompt.js``, ``chat.js``,
``widgets.css``) and set every piece of text with ``textContent``; keys typed in them stay there
(Enter: newline, Ctrl/Cmd+Enter: send; the notebook's shortcuts never see them).

The widgets depend on the host protocols of :mod:`.protocols`: the picker on
:class:`~.protocols.SessionCandidates` (its "search message bodies" toggle needs a host whose
``candidates`` also takes ``body=True``, :class:`~.protocols.BodySearch`), the prompt box on
:class:`~.protocols.PromptHost` (``submit_async`` sends or steers; its listener receives
:mod:`dsh_jupyter.agent.events` from the agent thread) and the panels on :class:`~.protocols.ChatHost`.
The transcript is folded by :class:`~.transcript.Transcript`; this module only converts its items to
the form ``chat.js`` reads. Answers are Markdown: :func:`~.markdown.markdown_tree` gives the tree of
allowed elements parsed from the one sanitiser's HTML (:mod:`.markdown`), which the view builds without
parsing HTML; the static copy holds that sanitised HTML itself (:func:`~.markdown.markdown_html`).

:class:`ChatPanel` (``%dsh chat``; ``kind="pick"`` for ``%dsh pick``) is one output whose bundle also
carries ``text/html`` and ``text/plain`` copies of the conversation (:func:`conversation_html`,
:func:`conversation_text`), kept current through its ``display_id`` (nbclient, VS Code) and, in
JupyterLab and Notebook 7, by the view itself: it writes the copy into the document before each save
and replaces the dead widget with the copy when the kernel restarts.

Requests from a view arrive as anywidget commands (``anywidget.experimental.command``): each
returns ``(response, buffers)`` and never raises; failures come back as ``{"error": message}``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import anywidget
import ipywidgets
import traitlets
from anywidget.experimental import command

from dsh_jupyter.agent.events import AgentEvent, MessageRecorded

from ..escape import escape_controls, host_mention, html_field
from .markdown import DocNode, markdown_html, markdown_tree, safe_html
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


def _one_line_error(error: BaseException, prompt: str = "") -> str:
    """The error in the user's terms, as cells say it (one rule: :func:`dsh_jupyter.notebook.messages.describe`)."""
    from .messages import Said, describe

    text = describe(error, Said(prompt=prompt)).strip() or type(error).__name__
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
    """A transcript item as ``chat.js`` reads it (raw text, and answers as a document tree; the view escapes)."""
    view: dict[str, Any] = {"id": item_id(item)}
    if isinstance(item, UserItem):
        view.update(kind="user", text=item.text, steered=item.steered)
    elif isinstance(item, TextItem):
        view.update(kind="assistant", text=item.text, streaming=item.streaming,
                    doc=markdown_tree(item.text, partial=item.streaming))
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


# --------------------------------------------------------------------------- the static copy


@dataclass(frozen=True)
class PanelFacts:
    """What a panel's header says: the session's title, short id and model, and the status word."""

    title: str = ""
    session_id: str = ""
    model: str = ""
    #: ``idle``, ``running`` or ``error``.
    status: str = "idle"

    @property
    def heading(self) -> str:
        return self.title or ("Untitled session" if self.session_id else "New session")

    @property
    def labels(self) -> list[str]:
        """The short session id and the model (what is known of them)."""
        return [part for part in (self.session_id[:8], self.model) if part]

    @property
    def details(self) -> list[str]:
        return [*self.labels, self.status]


def session_facts(host: object, transcript: Transcript, status: str) -> PanelFacts:
    """The header facts of ``host``'s current session (its ``agent``, when it has one), read defensively."""
    agent = getattr(host, "agent", None)
    title, session_id, model = transcript.title, "", ""
    if agent is not None:
        try:
            title = title or str(agent.title() or "")
            session_id = str(getattr(agent, "id", "") or "")
            info = agent.model.info
            model = str(info.model) if str(info.provider) in str(info.model) else f"{info.provider} · {info.model}"
        except Exception:
            log.debug("dsh: could not read the session's header facts", exc_info=True)
    return PanelFacts(escape_controls(title), escape_controls(session_id), escape_controls(model), status)


def _static_groups(items: Sequence[Item]) -> Iterator[tuple[str, list[Item]]]:
    """Items in runs: ``user`` and ``context`` items alone, the rest as the cell renderer shows them."""
    run: list[Item] = []
    for item in items:
        if isinstance(item, (UserItem, ContextItem)):
            if run:
                yield "turn", run
                run = []
            yield item.kind, [item]
        else:
            run.append(item)
    if run:
        yield "turn", run


def conversation_html(items: Sequence[Item], facts: PanelFacts, *, kind: str = "chat") -> str:
    """The ``text/html`` copy of a panel: header and conversation, readable without the widget.

    Answers are :func:`~.markdown.markdown_html` blocks; the rest is our markup around escaped text,
    through :func:`~.markdown.safe_html`.
    """
    from .render import TranscriptMarkdown, tool_details_html

    heading = html_field(f"dsh {kind} · {facts.heading}")
    details = html_field(" · ".join(facts.details))
    blocks: list[str] = []
    own = [f"<p><strong>{heading}</strong>" + (f" <small>{details}</small>" if details else "") + "</p>"]

    def flush() -> None:
        if own:
            blocks.append(safe_html("".join(own)))
            own.clear()

    if not items:
        own.append("<p><em>No messages yet.</em></p>")
    for _group, run in _static_groups(items):
        first = run[0]
        if isinstance(first, UserItem):
            text = html_field(first.text, one_line=False).replace("\n", "<br>")
            note = " <small>(steered into the running turn)</small>" if first.steered else ""
            own.append(f"<blockquote><p><strong>You</strong>{note}<br>{text}</p></blockquote>")
            continue
        if isinstance(first, ContextItem):
            own.append(f"<p><small>{html_field(first.summary)}</small></p>")
            continue
        for item in run:
            if isinstance(item, TextItem):
                flush()
                blocks.append(markdown_html(item.text))
            elif isinstance(item, ToolItem):
                own.append(tool_details_html(item))
            elif isinstance(item, ReasoningItem):
                own.append(f"<details><summary>Reasoning</summary><pre>{html_field(item.text, one_line=False)}"
                           "</pre></details>")
            else:
                line = TranscriptMarkdown([item], show_reasoning=False, waiting=False).plain()
                own.append(f"<p><em>{html_field(line, one_line=False)}</em></p>")
    flush()
    return f'<div class="dsh-static dsh-static-{kind}">{"".join(blocks)}</div>'


def conversation_text(items: Sequence[Item], facts: PanelFacts, *, kind: str = "chat") -> str:
    """The ``text/plain`` copy of a panel (terminals, and frontends without HTML)."""
    from .render import TranscriptMarkdown

    lines = [escape_controls(" · ".join([f"dsh {kind}", facts.heading, *facts.details]))]
    if not items:
        lines.append("(no messages yet)")
    for _group, run in _static_groups(items):
        first = run[0]
        if isinstance(first, UserItem):
            lines.append("You: " + escape_controls(first.text, one_line=False))
        elif isinstance(first, ContextItem):
            lines.append(escape_controls(first.summary))
        else:
            lines.append(TranscriptMarkdown(run, show_reasoning=False, waiting=False).plain())
    return "\n\n".join(line for line in lines if line)


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
            self._set_status(f"Not sent: {_one_line_error(error, text)}", "error")
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
                why = _one_line_error(error, submission.text)
                self._set_status(f"Not sent: {why} (your prompt is back in the box)", "error")
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


def _shown_row(candidate: dict[str, Any]) -> dict[str, str | None]:
    """A candidate's label, id and cwd as the picker shows them (controls escaped, hidden characters marked)."""
    session_id, label, cwd = candidate.get("sessionId"), candidate.get("label"), candidate.get("cwd")
    return {"label": escape_controls(label if isinstance(label, str) else str(session_id)),
            "sessionId": escape_controls(str(session_id)),
            "cwd": escape_controls(cwd) if isinstance(cwd, str) else None}


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
                rows.append({**candidate, "mention": host_mention(candidate), "shown": _shown_row(candidate)})
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
    """The streaming transcript view of a :class:`ChatPanel`: header (title, session, model, status, Stop) and items.

    ``variant`` ``"pick"`` (under a ``%dsh pick`` prompt box) shows nothing until the first prompt is sent.
    """

    _esm = STATIC / "chat.js"
    _css = STATIC / "widgets.css"

    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    #: Short session id, model and status word, shown after the title.
    details = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: ``idle``, ``running`` or ``error`` (styles the status badge).
    status = traitlets.Unicode("idle").tag(sync=True)
    variant = traitlets.Unicode("chat").tag(sync=True)
    #: The model id of the panel whose output the view keeps up to date in the notebook document.
    panel_id = traitlets.Unicode("").tag(sync=True)
    #: The panel's static copy (``text/html`` and ``text/plain``), for the view to write into that output.
    copy_html = traitlets.Unicode("").tag(sync=True)
    copy_text = traitlets.Unicode("").tag(sync=True)

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


#: Panels whose static copy changed since it was last sent under a running cell.
_STALE_COPIES: weakref.WeakSet[ChatPanel] = weakref.WeakSet()
_HOOKED: weakref.WeakSet[Any] = weakref.WeakSet()


def _refresh_static_copies() -> None:
    """``pre_run_cell``: re-send changed static copies, riding on the cell that starts (nbclient, VS Code)."""
    for panel in list(_STALE_COPIES):
        panel.refresh_static_copy()


def _hook_cell_runs() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    shell = get_ipython()
    if shell is None or shell in _HOOKED:
        return
    shell.events.register("pre_run_cell", lambda *args: _refresh_static_copies())
    _HOOKED.add(shell)


PanelKind = Literal["chat", "pick"]


class ChatPanel(ipywidgets.VBox):  # ipywidgets ships no type hints (see pyproject)
    """A chat with the notebook's agent: streaming transcript, mention picker and prompt box, in one output.

    Prompts go through ``host.submit_async``: a new turn when the agent is idle, a steer into the
    running turn when it is busy (the transcript then says so). Agent events arrive on the agent
    thread and reach the view at most ``max_rate`` times a second, with a final update at the end
    of each turn.

    ``kind="pick"`` (``%dsh pick``) puts the picker and the prompt box first and the answers under
    them. Displayed, the panel's output also carries ``text/html`` and ``text/plain`` copies of the
    conversation, updated through its ``display_id`` (at most ``copy_rate`` times a second), so a
    saved notebook shows the conversation where the widget cannot be shown.
    """

    def __init__(self, host: ChatHost, *, kind: PanelKind = "chat", max_rate: float = 20.0,
                 copy_rate: float = 1.0, **kwargs: Any) -> None:
        for name in ("submit_async", "cancel", "candidates"):
            if not callable(getattr(host, name, None)):
                raise TypeError(f"ChatPanel needs a notebook host with a {name}() method")
        if kind not in ("chat", "pick"):
            raise ValueError(f"kind must be 'chat' or 'pick', got {kind!r}")
        self.host = host
        self.kind: PanelKind = kind
        self.state = Transcript()
        self.display_id = f"dsh-{kind}-{uuid.uuid4().hex}"
        self._shown = False
        self._failed = False
        self._settled = threading.Event()
        self._settled.set()
        self._last_submission: PromptSubmission | None = None
        self._copy_lock = threading.Lock()
        self._copy: dict[str, str] = {}
        self.transcript = ChatTranscript(on_stop=self.stop, variant=kind)
        self.prompt = PromptBox(host, submit=self._submit)
        self.picker = MentionPicker(host, target=self.prompt)
        self._coalescer = UpdateCoalescer(self._publish, max_rate=max_rate)
        self._copies = UpdateCoalescer(self._send_static_copy, max_rate=copy_rate)
        order = [self.picker, self.prompt, self.transcript] if kind == "pick" else [
            self.transcript, self.picker, self.prompt]
        kwargs.setdefault("children", order)
        super().__init__(**kwargs)
        self.add_class("dsh-panel")
        self.transcript.panel_id = self.model_id
        self._publish()
        self._send_static_copy()

    # -- Python API

    def submit(self, text: str | None = None) -> PromptSubmission:
        """Send ``text`` (default: the prompt box's text) as the prompt box's Send button does."""
        if text is not None:
            if not isinstance(text, str):
                raise TypeError(f"the prompt must be a str, got {type(text).__name__}")
            self.prompt.value = text
            self.prompt.cursor = -1
        return self.prompt.submit()

    def wait(self, timeout: float | None = None) -> Any:
        """Wait until the latest prompt's turn has finished and the view shows it; return its outcome.

        Raises what the turn raised, or :class:`TimeoutError` after ``timeout`` seconds.
        """
        submission = self._last_submission
        if submission is None:
            return None
        try:
            result = submission.future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the turn is still running after {timeout} s; "
                               "call wait() again, or press Stop to end it") from None
        finally:
            if submission.future.done():
                self._settled.wait(timeout)
                self.refresh_static_copy()
        return result

    def choose(self, which: int | str) -> str:
        """Insert the mention of a picker result (its index or session id) into the prompt box; return it."""
        return self.picker.choose(which)

    @property
    def selected(self) -> list[str]:
        """The mentions chosen in the picker so far."""
        return list(self.picker.selected)

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

    @property
    def facts(self) -> PanelFacts:
        """What the header says now."""
        status = "running" if self.state.busy else "error" if self._failed or self.state.reason == "error" else "idle"
        return session_facts(self.host, self.state, status)

    def static_copy(self) -> dict[str, str]:
        """The ``text/html`` and ``text/plain`` copies of the conversation as it stands."""
        items, facts = self.state.snapshot(), self.facts
        return {"text/html": conversation_html(items, facts, kind=self.kind),
                "text/plain": conversation_text(items, facts, kind=self.kind)}

    def refresh_static_copy(self) -> None:
        """Send the static copy now if it changed or may have been dropped (call from a running cell)."""
        self._send_static_copy(from_cell=True)

    def close(self) -> None:
        """Close the panel and its three widgets (also runs when a half-built panel is collected)."""
        for name in ("_coalescer", "_copies"):
            coalescer = getattr(self, name, None)
            if coalescer is not None:
                coalescer.close()
        for name in ("transcript", "picker", "prompt"):
            child = getattr(self, name, None)
            if child is not None:
                child.close()
        super().close()

    # -- display

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:  # closed: only the copy is left
            return self.static_copy()
        return {**bundle, **self.static_copy()}

    def _ipython_display_(self) -> None:
        """Show the widget and its static copy as one output, under :attr:`display_id`."""
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        with self._copy_lock:
            self._copy = {k: v for k, v in (bundle or {}).items() if k in ("text/html", "text/plain")}
        display(bundle, raw=True, display_id=self.display_id)
        self._shown = True
        _hook_cell_runs()

    def _send_static_copy(self, *, from_cell: bool = False) -> None:
        """Bring the static copy up to date: in the view (which writes it into the notebook document
        where the frontend allows) and in the output, through :attr:`display_id`.

        ``from_cell``: called from a running cell, so the update is delivered. An update sent from the
        agent thread while no cell runs has no cell to ride on and may be dropped (nbclient, VS Code),
        so it is sent again when the next cell starts (:func:`_refresh_static_copies`).
        """
        copy = self.static_copy()
        with self.transcript.hold_sync():
            self.transcript.copy_html = copy["text/html"]
            self.transcript.copy_text = copy["text/plain"]
        if not self._shown:
            return
        with self._copy_lock:
            if copy == self._copy and not (from_cell and self in _STALE_COPIES):
                return
            self._copy = copy
        bundle = super()._repr_mimebundle_()
        if bundle is None:
            return
        from IPython.display import update_display

        update_display({**bundle, **copy}, raw=True, display_id=self.display_id)
        if from_cell:
            _STALE_COPIES.discard(self)
        else:
            _STALE_COPIES.add(self)

    # -- internals

    def _submit(self, text: str) -> PromptSubmission:
        steered = bool(self.host.busy)
        user_item = self.state.add_user(readable_prompt(text), steered=steered)
        self._failed = False
        self.state.set_busy(True)  # the header says "running" at once
        self._coalescer.poke()
        slot = getattr(self.host, "approval_slot_in", None)
        if callable(slot) and not steered:  # questions of this turn appear in the panel, above its prompt box
            slot(self._show_question)
        try:
            submission = submit_to_host(self.host, text, self._on_event, steered=steered)
        except Exception as error:
            self.state.remove(user_item)
            self.state.add_notice(f"Not sent: {_one_line_error(error)}", "error")
            self.state.set_busy(steered)
            self._failed = True
            self._coalescer.poke(final=True)
            raise
        self._settled.clear()
        self._last_submission = submission
        submission.future.add_done_callback(self._finished)
        return submission

    def _show_question(self, widget: Any) -> None:
        """Put the approval widget of the next turn where the conversation meets the prompt box (replacing
        the previous turn's, which by then holds only the record of its answer)."""
        from .approval_widget import ApprovalWidget

        current: tuple[Any, ...] = self.children  # type: ignore[has-type]  # an untyped ipywidgets trait
        parts = [part for part in current if not isinstance(part, ApprovalWidget)]
        at = parts.index(self.picker) if self.kind == "chat" else len(parts)
        self.children = (*parts[:at], widget, *parts[at:])

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
                self._failed = True
        try:
            busy = bool(self.host.busy)
        except Exception:
            busy = False
        self.state.set_busy(busy)
        self._coalescer.poke(final=True)
        if future is (self._last_submission.future if self._last_submission else None):
            self._settled.set()

    def _publish(self) -> None:
        items = [view_item(item) for item in self.state.snapshot()]
        facts = self.facts
        with self.transcript.hold_sync():
            self.transcript.items = items
            self.transcript.busy = self.state.busy
            self.transcript.title = facts.heading
            self.transcript.details = facts.labels
            self.transcript.status = facts.status
        self.prompt.busy = self.state.busy
        self._copies.poke(final=not self.state.busy)


__all__ = [
    "STEERED_NOTE",
    "ChatPanel",
    "ChatTranscript",
    "DocNode",
    "MentionPicker",
    "PanelFacts",
    "PromptBox",
    "PromptSubmission",
    "conversation_html",
    "conversation_text",
    "markdown_tree",
    "readable_prompt",
    "session_facts",
    "submit_to_host",
    "view_item",
]
