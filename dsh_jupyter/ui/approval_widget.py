"""The approval question as an anywidget (view: ``static/approval.js`` and ``static/approval.css``).

Kept apart from the approvers (the IPython host's, which ask through it) so that
choosing an approver never imports anywidget; this module is imported only when a question is shown.
The view sends two kinds of messages: ``{"kind": "rendered"}`` once it is drawn, and ``{"kind": "answer",
"choice": once|session|prefix|deny, "reason": text}``. They are handled on the kernel's answer subshell thread
(which the host's approvers make), so everything here is thread-safe.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets
from IPython.display import display

from ..agent.approvals import ApprovalRequest
from ..clip import capped
from ..escape import display_parts, escape_controls
from .approval_choices import MAX_SHOWN, choices_for, default_choice
from .assets import STATIC

log = logging.getLogger(__name__)

RenderedListener = Callable[[], None]
AnswerListener = Callable[[dict[str, Any]], None]


class ApprovalWidget(anywidget.AnyWidget):
    """One turn's questions: the current one (``question``) and the one-line records of answered ones.

    The view and the saved text show only the question being asked: a decision is shown once, on its call's
    tool line in the transcript (:attr:`records` keeps the lines for the Python API and the tests).
    """

    _esm = STATIC / "approval.js"
    _css = STATIC / "approval.css"

    #: ``idle`` (nothing asked yet), ``asking`` or ``answered``.
    state = traitlets.Unicode("idle").tag(sync=True)
    #: The question being asked: tool, shown (exact command or code), language, reason, choices.
    question = traitlets.Dict().tag(sync=True)
    #: Answered questions, oldest first: ``{"text": one line, "allowed": bool}``.
    records: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._rendered = threading.Event()
        self._on_rendered: RenderedListener | None = None
        self._on_answer: AnswerListener | None = None
        self.shown_at = 0.0
        self._handle: Any = None
        self._isolated = False
        self.on_msg(self._message)

    def show(self, *, background: bool) -> None:
        """Display in the current cell; a background turn's later updates travel under the cell executing then."""
        self._isolated = background
        self._handle = display(self, display_id=True)
        self.shown_at = time.monotonic()

    def _republish(self) -> None:
        """Re-send the display so saved notebooks (and frontends without widgets) no longer show the question."""
        handle = self._handle
        if handle is None:
            return
        if self._isolated:
            contextvars.Context().run(handle.update, self)
        else:
            handle.update(self)

    @property
    def rendered(self) -> bool:
        """Whether a frontend has drawn this widget (somebody could answer)."""
        return self._rendered.is_set()

    @property
    def asking(self) -> bool:
        return self.state == "asking"

    def listen(self, on_rendered: RenderedListener, on_answer: AnswerListener) -> None:
        with self._lock:
            self._on_rendered, self._on_answer = on_rendered, on_answer
        if self.rendered:
            on_rendered()

    def ask(self, request: ApprovalRequest) -> None:
        shown = capped(request.shown, MAX_SHOWN)
        self.question = {
            "tool": escape_controls(request.tool), "shown": shown, "language": request.language,
            "parts": [list(part) for part in display_parts(shown)],
            "reason": escape_controls(request.reason or ""), "warning": request.warning or "",
            "choices": [[choice, escape_controls(label)] for choice, label in choices_for(request)],
            "focus": default_choice(request), "callId": request.call_id,
        }
        self.state = "asking"

    def settle(self, line: str, allowed: bool) -> None:
        """Turn the current question into its one-line record."""
        self.records = [*self.records, {"text": line, "allowed": allowed}]
        self.state = "answered"
        with self._lock:
            self._on_answer = None
        try:
            self._republish()
        except Exception:  # the widget already shows the record; the saved text is a courtesy
            log.debug("could not update the approval display", exc_info=True)

    def _message(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("kind") == "rendered":
            self._rendered.set()
            with self._lock:
                listener = self._on_rendered
            if listener is not None:
                listener()
        elif content.get("kind") == "answer" and self.asking:
            with self._lock:
                answer = self._on_answer
            if answer is not None and content.get("callId") == self.question.get("callId"):
                answer(dict(content))

    def __repr__(self) -> str:  # the text/plain form: frontends without widgets and saved notebooks
        lines: list[str] = []
        if self.asking:
            shown = "".join(str(part[1]) for part in self.question.get("parts", []))
            lines.append(f"The agent asks to run {self.question.get('tool')}: {shown}")
            if self.question.get("warning"):
                lines.append(f"Warning: {self.question['warning']}")
        if lines or self.records:  # answered: its tool line says how
            return "\n".join(lines)
        return "(approval questions of this turn appear here)"
