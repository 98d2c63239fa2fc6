"""The static copies of a panel's conversation (``text/html`` and ``text/plain``): what a saved notebook,
nbclient or a frontend without widgets shows where the widget cannot be drawn.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...conversation.fold import Transcript
from ...conversation.items import Answer, Checkpoint, Context, Item, Note, Prompt, Reasoning, ToolCall
from ...escape import escape_controls, html_field
from ..markdown import markdown_html, safe_html
from ..render import TranscriptMarkdown, tool_details_html
from .view_items import context_summary

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PanelFacts:
    """What a panel's header says: the session's title, short id and model, and the status word."""

    title: str = ""
    session_id: str = ""
    model: str = ""
    #: ``idle``, ``running`` or ``error``.
    status: str = "idle"
    #: The context meter (``context 12% of 200K (compacts at 80%)``; ``""``: unknown or running).
    context: str = ""

    @property
    def heading(self) -> str:
        return self.title or ("Untitled session" if self.session_id else "New session")

    @property
    def labels(self) -> list[str]:
        """The short session id, the model and the context meter (what is known of them)."""
        return [part for part in (self.session_id[:8], self.model, self.context) if part]

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
    context = _context_text(agent) if agent is not None and status != "running" else ""
    return PanelFacts(escape_controls(title), escape_controls(session_id), escape_controls(model), status, context)


#: The last context meter text of each agent, with the log position it was measured at (measuring reads the
#: whole surface, so it is redone only when the log grew).
_METERS: weakref.WeakKeyDictionary[Any, tuple[int | None, str]] = weakref.WeakKeyDictionary()


def _context_text(agent: Any) -> str:
    try:
        seq = agent.session.last_seq
        known = _METERS.get(agent)
        if known is not None and known[0] == seq:
            return known[1]
        meter = agent.context_meter()
        text = meter.text() if meter is not None else ""
        _METERS[agent] = (seq, text)
        return text
    except Exception:  # a header never breaks the panel
        log.debug("dsh: could not measure the session's context", exc_info=True)
        return ""


def _static_groups(items: Sequence[Item]) -> Iterator[tuple[str, list[Item]]]:
    """Items in runs: prompts and reference contexts alone, the rest as the cell renderer shows them (what the
    chat view shows: no checkpoints or harness notes, no context whose metadata is malformed)."""
    run: list[Item] = []
    for item in items:
        if isinstance(item, Checkpoint | Note) or (isinstance(item, Context) and context_summary(item) is None):
            continue
        if isinstance(item, Prompt | Context):
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

    Answers are :func:`~dsh_jupyter.ui.markdown.markdown_html` blocks; the rest is our markup around escaped text,
    through :func:`~dsh_jupyter.ui.markdown.safe_html`.
    """
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
        if isinstance(first, Prompt):
            text = html_field(first.text, one_line=False).replace("\n", "<br>")
            note = " <small>(steered into the running turn)</small>" if first.steered else ""
            own.append(f"<blockquote><p><strong>You</strong>{note}<br>{text}</p></blockquote>")
            continue
        if isinstance(first, Context):
            own.append(f"<p><small>{html_field(context_summary(first) or '')}</small></p>")
            continue
        for item in run:
            if isinstance(item, Answer):
                flush()
                blocks.append(markdown_html(item.text))
            elif isinstance(item, ToolCall):
                own.append(tool_details_html(item))
            elif isinstance(item, Reasoning):
                own.append(f"<details><summary>Reasoning</summary><pre>{html_field(item.text, one_line=False)}"
                           "</pre></details>")
            else:
                line = TranscriptMarkdown([item], show_reasoning=False, waiting=False).plain()
                own.append(f"<p><em>{html_field(line, one_line=False)}</em></p>")
    flush()
    return f'<div class="dsh-static dsh-static-{kind}">{"".join(blocks)}</div>'


def conversation_text(items: Sequence[Item], facts: PanelFacts, *, kind: str = "chat") -> str:
    """The ``text/plain`` copy of a panel (terminals, and frontends without HTML)."""
    lines = [escape_controls(" · ".join([f"dsh {kind}", facts.heading, *facts.details]))]
    if not items:
        lines.append("(no messages yet)")
    for _group, run in _static_groups(items):
        first = run[0]
        if isinstance(first, Prompt):
            lines.append("You: " + escape_controls(first.text, one_line=False))
        elif isinstance(first, Context):
            lines.append(escape_controls(context_summary(first) or ""))
        else:
            lines.append(TranscriptMarkdown(run, show_reasoning=False, waiting=False).plain())
    return "\n\n".join(line for line in lines if line)
