"""A turn footer saved while its turn ran: what the saved file says instead of "● running".

A notebook saved mid-turn keeps the footer its output had at that moment. Read later (reopened, or turned
into HTML by nbconvert) that footer would claim a turn still runs that ended long ago, or that died with its
kernel. The server extension runs :func:`settle_saved_footers` on every notebook it saves (a ContentsManager
pre-save hook, :mod:`dsh_jupyter.server`): each footer still "running" in the copy written to disk says how the
turn ended when the session log knows it (:func:`turn_outcome`), and "unfinished when saved" when it does not.
The page that saved keeps its live footer; the next save after the turn ends writes the final one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..conversation.log_feed import turn_end_reason
from ..session.events import TURN_END, TURN_START, Event
from .render import STATUS_WORDS, TURN_MIME, TurnFooter

#: The footer status of a turn that was running when its notebook was saved and whose end is unknown.
UNFINISHED = "unfinished"
#: What a footer settled from the session log adds: the output above it stops where the save caught it.
SAVED_MID_TURN = "saved mid-turn: the rest is in the session log (%dsh export)"
#: How much earlier than the footer's start a turn's log record may be (the footer's clock is in seconds).
START_SLACK_SECONDS = 2.0

#: How the plain-text footer of a running turn begins.
RUNNING_PLAIN = " ".join(STATUS_WORDS["running"]) + " · "
_FOOTER_HTML = re.compile(r'<sub class="dsh-turn-footer">.*?</sub>', re.DOTALL)

#: ``(session id, turn start in epoch seconds)`` → ``(how the turn ended, when in epoch seconds)`` or ``None``.
Outcome = Callable[[str, float], tuple[str, float] | None]


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def footer_of(facts: Mapping[str, Any]) -> TurnFooter | None:
    """The footer an output's :data:`~.render.TURN_MIME` metadata describes (``None`` when malformed)."""
    session_id, status = facts.get("sessionId"), facts.get("status")
    if not isinstance(session_id, str) or not session_id or not isinstance(status, str):
        return None
    def text(name: str) -> str:
        value = facts.get(name)
        return value if isinstance(value, str) else ""

    return TurnFooter(session_id, text("title"), text("provider"), text("model"), status,
                      _epoch(facts.get("startedAt")), _epoch(facts.get("endedAt")))


def turn_outcome(events: Iterable[Event], started_at: float) -> tuple[str, float] | None:
    """How the turn that started at ``started_at`` (epoch seconds) ended, and when, if ``events`` (a session's
    log) say so: the first turn logged from then on, and its end; ``None`` while it has none."""
    since = (started_at - START_SLACK_SECONDS) * 1000
    started = False
    for event in events:
        if not started:
            started = event.type == TURN_START and event.time >= since
        elif event.type == TURN_END:
            reason, _error = turn_end_reason(event.data if isinstance(event.data, Mapping) else {})
            return reason, event.time / 1000
    return None


def settled_footer(footer: TurnFooter, outcome: tuple[str, float] | None) -> TurnFooter:
    """``footer`` (running) as a saved copy says it: its logged end, or :data:`UNFINISHED`."""
    if outcome is None:
        return replace(footer, status=UNFINISHED, ended_at=None, usage=None)
    status, ended_at = outcome
    return replace(footer, status=status, ended_at=ended_at, usage=None, note=SAVED_MID_TURN)


def _settle_output(output: MutableMapping[str, Any], outcome: Outcome) -> bool:
    metadata = output.get("metadata")
    facts = metadata.get(TURN_MIME) if isinstance(metadata, Mapping) else None
    if not isinstance(facts, Mapping) or facts.get("status") != "running":
        return False
    footer = footer_of(facts)
    data = output.get("data")
    if footer is None or not isinstance(data, MutableMapping) or not isinstance(metadata, MutableMapping):
        return False
    try:
        ended = outcome(footer.session_id, footer.started_at) if footer.started_at is not None else None
    except Exception:  # a log that cannot be read says nothing: the turn is "unfinished when saved"
        ended = None
    settled = settled_footer(footer, ended)
    html_text, plain = data.get("text/html"), data.get("text/plain")
    if isinstance(html_text, str):
        data["text/html"] = _FOOTER_HTML.sub(lambda _match: settled.html(), html_text, count=1)
    if isinstance(plain, str):
        head, _, last = plain.rpartition("\n")
        if last.startswith(RUNNING_PLAIN):
            data["text/plain"] = f"{head}\n{settled.plain()}" if head else settled.plain()
    metadata[TURN_MIME] = {**facts, **settled.to_json()}
    return True


def settle_saved_footers(notebook: Mapping[str, Any], outcome: Outcome) -> int:
    """Rewrite, in place, each footer of ``notebook`` (nbformat JSON) that says its turn is running; returns
    how many were rewritten. ``outcome`` reads the session log (an error there counts as "not known")."""
    settled = 0
    cells = notebook.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        outputs = cell.get("outputs") if isinstance(cell, Mapping) else None
        for output in outputs if isinstance(outputs, list) else []:
            if isinstance(output, MutableMapping) and _settle_output(output, outcome):
                settled += 1
    return settled


__all__ = ["SAVED_MID_TURN", "UNFINISHED", "footer_of", "settle_saved_footers", "settled_footer", "turn_outcome"]
