"""The prompt box widget (view: ``static/prompt.js``): editable text with Send, steering into a running turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anywidget
import traitlets
from anywidget.experimental import command

from ...agent.events import AgentEvent
from ...conversation.fold import STEERED_NOTE
from ..assets import STATIC
from ..protocols import Listener, PromptHost
from .submission import PromptSubmission, one_line_error, submit_to_host


def _ignore(event: AgentEvent) -> None:
    """The listener of a prompt box without a chat panel: events go nowhere."""



class PromptBox(anywidget.AnyWidget):
    """A prompt box (synced ``value`` and caret ``cursor``) with a Send button.

    The view shows each mention in ``value`` as a chip reading ``@label``; ``value`` keeps the markup.

    Send calls ``host.submit_async`` (or the ``submit`` callable a :class:`ChatPanel` passes); the
    host decides whether the prompt starts a turn or is steered into the running one. A prompt
    that fails before reaching the log is put back in the box with the error as ``status``.
    """

    _esm = STATIC / "prompt.js"
    _css = STATIC / "widgets.css"

    value = traitlets.Unicode("").tag(sync=True)
    #: Caret position in ``value`` (``-1``: at the end); mentions are inserted there.
    cursor = traitlets.Int(-1).tag(sync=True)
    #: The kernel's last change of ``value``: the text it started from (``base``) and its number (``n``). A view
    #: typed into meanwhile merges the change into what it shows instead of dropping the keys typed since. A
    #: ``joiner`` (a prompt given back: a newline) goes between the kernel's text and keys typed right after it.
    kernel_edit = traitlets.Dict({"base": "", "n": 0}).tag(sync=True)
    #: The number of the kernel's latest edit (``kernel_edit["n"]``) the view had applied when it last sent ``value``
    #: (set by the views). A view's ``value`` sent before an edit reached it (ipywidgets holds a model's updates back
    #: while the kernel works on the one before; a pick, another widget's command, overtakes them) and holding just
    #: the text that edit started from is older than the edit: the kernel keeps the edit (:meth:`_value_from_view`).
    seen_edit = traitlets.Int(0).tag(sync=True)
    #: A prompt a view sent that did not reach the log (``text``, and its number ``n``): the view puts it back
    #: above what its box shows and marks it ``applied``. The kernel cannot do that itself: what the page shows
    #: may not have reached it (ipywidgets holds a view's updates back while the kernel is busy).
    returned = traitlets.Dict({"text": "", "n": 0, "applied": True}).tag(sync=True)
    placeholder = traitlets.Unicode(
        "Ask the agent… (mention sessions with the picker; Ctrl+Enter sends)"
    ).tag(sync=True)
    #: The agent is working: the button reads "Steer".
    busy = traitlets.Bool(False).tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    status_level = traitlets.Unicode("info").tag(sync=True)
    #: A view has the keyboard focus (set by the view): what would re-create the views waits meanwhile.
    focused = traitlets.Bool(False).tag(sync=True)

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
        self._edits = 0  # the kernel's changes of ``value`` so far (``kernel_edit["n"]``)
        self._edit_cursor = -1  # the caret its latest change left
        self._returns = 0  # prompts a view sent and the kernel gave back (``returned["n"]``)

    def insert(self, text: str, *, shown: tuple[str, int] | None = None) -> None:
        """Insert ``text`` at the caret, with a space on each side where a word would otherwise touch it.

        ``shown``: the box's text and caret as a view showed them (newer than ``value`` and ``cursor`` while the
        view's updates are on their way); the insertion goes there."""
        if not isinstance(text, str):
            raise TypeError(f"PromptBox.insert needs a str, got {type(text).__name__}")
        value, cursor = (self.value, self.cursor) if shown is None else shown
        at = len(value) if cursor < 0 or cursor > len(value) else cursor
        before, after = value[:at], value[at:]
        if before and not before[-1].isspace():
            text = " " + text
        if not after or not after[0].isspace():
            text = text + " "
        self._set_text(before + text + after, -1 if not after else len(before) + len(text), base=value)

    def submit(self, sent: str | None = None) -> PromptSubmission:
        """Hand the prompt to the host and clear the box; raises (keeping the text) when that fails.

        ``sent`` is the text a view sent: that view emptied its box itself, so ``value`` is left to it
        (set here, it could overwrite what the user types next, or bring back the text just sent)."""
        text = self.value if sent is None else sent
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
            self._set_status(f"Not sent: {one_line_error(error, text)}", "error")
            raise
        self.last_submission = submission
        with self.hold_sync():
            if sent is None:
                self._set_text("", -1)
            self._set_status(f"Prompt {STEERED_NOTE}." if submission.steered else "Sent.", "info")
        from_view = sent is not None
        submission.future.add_done_callback(lambda future: self._finished(submission, from_view=from_view))
        return submission

    def _set_text(self, value: str, cursor: int, *, base: str | None = None, joiner: str = "") -> None:
        """The kernel's change of ``value`` (and ``cursor``), sent with the text it started from (``kernel_edit``):
        ``base``, or else ``value`` as the kernel has it; ``joiner``: see :attr:`kernel_edit`."""
        with self.hold_sync():
            self._edits += 1
            self._edit_cursor = cursor
            edit = {"base": self.value if base is None else base, "n": self._edits}
            self.kernel_edit = {**edit, "joiner": joiner} if joiner else edit
            self.value = value
            self.cursor = cursor

    @traitlets.observe("value")
    def _value_from_view(self, change: Mapping[str, Any]) -> None:
        """A view's ``value`` that left it before the kernel's latest edit reached it, and holds nothing typed since
        the text that edit started from, is older than the edit: the edit's text stays (sent again as an edit, so a
        view that already showed the older text takes it back, merged with anything typed since)."""
        if "value" not in self._property_lock or self.seen_edit >= self._edits:
            return  # the kernel's own change, or a view's that knew the kernel's latest edit
        older, edited = change["new"], change["old"]
        if older == self.kernel_edit.get("base") and edited != older:
            self._set_text(edited, self._edit_cursor, base=older)

    def _set_status(self, text: str, level: str) -> None:
        with self.hold_sync():
            self.status = text
            self.status_level = level

    def _finished(self, submission: PromptSubmission, *, from_view: bool = False) -> None:
        future = submission.future
        if future.cancelled():
            self._set_status("Cancelled.", "info")
            return
        error = future.exception()
        if error is None:
            if self.status in ("Sent.", f"Prompt {STEERED_NOTE}."):
                self._set_status("", "info")
            return
        if not submission.recorded.is_set():
            # Back above whatever was typed since it was sent.
            why = one_line_error(error, submission.text)
            with self.hold_sync():
                if from_view:
                    self._returns += 1
                    self.returned = {"text": submission.text, "n": self._returns, "applied": False}
                else:  # the kernel emptied the box: what it holds now came after (a view merges what it has not seen)
                    # The views' rule (givenBack in labextension/src/merge.ts): anything typed stays, blanks too.
                    typed = self.value
                    back = f"{submission.text}\n{typed}" if typed else submission.text
                    self._set_text(back, -1, joiner="\n")
                self._set_status(f"Not sent: {why} (your prompt is back in the box)", "error")
        else:
            self._set_status(f"Turn failed: {one_line_error(error)}", "error")

    @command
    def send_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: ``{"value": text}``; answers ``{"mode": "sent"|"steered"}`` or ``{"error"}``."""
        try:
            sent = msg.get("value") if isinstance(msg, Mapping) else None
            if sent is not None and not isinstance(sent, str):
                return {"error": "the prompt must be text"}, []
            submission = self.submit(sent)
        except Exception as error:
            return {"error": one_line_error(error)}, []
        return {"mode": submission.mode}, []
