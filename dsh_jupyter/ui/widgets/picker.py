"""The mention picker widget (view: ``static/picker.js``): search sessions as you type, insert mentions.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

import anywidget
import traitlets
from anywidget.experimental import command
from ipywidgets import widget_serialization

from ...escape import escape_controls, host_mention
from ...session.header import notebook_label
from ..assets import STATIC
from ..protocols import BodySearch, SessionCandidates
from .prompt import PromptBox
from .submission import one_line_error

log = logging.getLogger(__name__)


def _shown_row(candidate: Mapping[str, Any]) -> dict[str, str | None]:
    """A candidate's label, notebook, id and cwd as the picker shows them (controls escaped, hidden characters
    marked)."""
    session_id, label, cwd = candidate.get("sessionId"), candidate.get("label"), candidate.get("cwd")
    notebook = notebook_label(candidate.get("notebook")) if isinstance(candidate.get("notebook"), str) else None
    return {"label": escape_controls(label if isinstance(label, str) else str(session_id)),
            "notebook": escape_controls(notebook) if notebook is not None else None,
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
    #: The prompt box the mentions go into (``None``: they are only recorded in ``selected``). Synced so that a view
    #: sends the box's text and caret as its page shows them with each pick (:meth:`choose_command`).
    target = traitlets.Instance(PromptBox, allow_none=True).tag(sync=True, **widget_serialization)

    _MAX_VIEWS = 64

    def __init__(self, host: SessionCandidates, *, target: PromptBox | None = None, **kwargs: Any) -> None:
        if host is None or not callable(getattr(host, "candidates", None)):
            raise TypeError("MentionPicker needs a host with a candidates(query, limit) method")
        if target is not None and not isinstance(target, PromptBox):
            raise TypeError(f"MentionPicker target must be a PromptBox or None, got {type(target).__name__}")
        self.host = host
        self._last_seq: dict[str, int] = {}
        self._seq_lock = threading.Lock()
        super().__init__(target=target, **kwargs)

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
        return self._choose(which, None)

    def _choose(self, which: int | str, shown: tuple[str, int] | None) -> str:
        candidate = self._find(which)
        mention = str(candidate["mention"])
        if mention not in self.selected:
            self.selected = [*self.selected, mention]
        if self.target is not None:
            self.target.insert(mention, shown=shown)
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
                self.error = f"Search failed: {one_line_error(error)}"
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
            self.error = f"Search failed: {one_line_error(error)}"
            return {"seq": seq, "query": query, "error": self.error}, []
        with self.hold_sync():
            self.error = ""
            self.results = rows
        return {"seq": seq, "query": query, "results": rows}, []

    @command
    def choose_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: ``{"sessionId"}`` (preferred) or ``{"index"}``, with the prompt box's ``text`` and ``cursor``
        as the page shows them (the box's updates can still be on their way: ipywidgets holds them back while the
        kernel is busy, and this command overtakes them); answers ``{"mention"}`` or ``{"error"}``."""
        if not isinstance(msg, Mapping):
            return {"error": "choose needs a sessionId or an index"}, []
        which = msg.get("sessionId", msg.get("index"))
        text, cursor = msg.get("text"), msg.get("cursor")
        shown = (text, cursor) if isinstance(text, str) and type(cursor) is int else None
        try:
            mention = self._choose(which, shown)
        except Exception as error:
            return {"error": one_line_error(error)}, []
        return {"mention": mention, "selected": list(self.selected)}, []


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes the keyword argument ``name`` (directly or through ``**kwargs``)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True  # cannot tell: let the call say
    return any((p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) or p.kind == p.VAR_KEYWORD
               for p in parameters)
