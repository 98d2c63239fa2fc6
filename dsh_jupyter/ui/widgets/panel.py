"""The chat and pick panels (``%dsh chat``, ``%dsh pick``): transcript, picker and prompt box in one output,
with the static copy kept current, and the ``pre_run_cell`` hook that re-sends changed copies under the
cell that starts (nbclient, VS Code drop updates sent while no cell runs).

The approval widget is imported with the first question shown in the panel.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Literal

import ipywidgets
from IPython.display import display, update_display

from ...agent.events import AgentEvent, TurnEnded, TurnStarted
from ...agent.transcript_feed import apply_event
from ...conversation.fold import Transcript
from ...conversation.limits import CELL
from ...conversation.log_feed import feed
from ..coalescer import UpdateCoalescer
from ..protocols import ChatHost
from .chat import ChatTranscript
from .picker import MentionPicker
from .prompt import PromptBox
from .static_copy import PanelFacts, conversation_html, conversation_text, session_facts
from .submission import PromptSubmission, one_line_error, readable_prompt, submit_to_host
from .view_items import view_items

log = logging.getLogger(__name__)


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


PanelKind = Literal["chat", "pick", "sidebar"]


class ChatPanel(ipywidgets.VBox):  # ipywidgets ships no type hints (see pyproject)
    """A chat with the notebook's agent: streaming transcript, mention picker and prompt box, in one output.

    Prompts go through ``host.submit_async``: a new turn when the agent is idle, a steer into the
    running turn when it is busy (the transcript then says so). Agent events arrive on the agent
    thread and reach the view at most ``max_rate`` times a second, with a final update at the end
    of each turn.

    ``kind="pick"`` (``%dsh pick``) puts the picker and the prompt box first and the answers under
    them. ``kind="sidebar"`` (the JupyterLab / Notebook 7 chat sidebar, which brings its own prompt box)
    shows only the transcript and the approval questions under it; prompts come through :meth:`submit`, and
    it follows its session's agent (:meth:`follow`), so turns sent from cells or other panels stream into it.
    Displayed, the panel's output also carries ``text/html`` and ``text/plain`` copies of the conversation,
    updated through its ``display_id`` (at most ``copy_rate`` times a second), so a saved notebook shows
    the conversation where the widget cannot be shown.
    """

    def __init__(self, host: ChatHost, *, kind: PanelKind = "chat", max_rate: float = 20.0,
                 copy_rate: float = 1.0, **kwargs: Any) -> None:
        for name in ("submit_async", "cancel", "candidates"):
            if not callable(getattr(host, name, None)):
                raise TypeError(f"ChatPanel needs a notebook host with a {name}() method")
        if kind not in ("chat", "pick", "sidebar"):
            raise ValueError(f"kind must be 'chat', 'pick' or 'sidebar', got {kind!r}")
        self.host = host
        self.kind: PanelKind = kind
        self.state = Transcript(limits=CELL)
        self.display_id = f"dsh-{kind}-{uuid.uuid4().hex}"
        self._shown = False
        self._failed = False
        self._settled = threading.Event()
        self._settled.set()
        self._last_submission: PromptSubmission | None = None
        #: The agent whose every event this panel shows (:meth:`follow`), and how to stop listening to it.
        self._followed: Any = None
        self._unfollow: Callable[[], None] | None = None
        #: The last event shown: a followed agent also hands this panel's own turns to the submission's
        #: listener, and each event is shown once.
        self._last_event: AgentEvent | None = None
        self._copy_lock = threading.Lock()
        self._copy: dict[str, str] = {}
        self.transcript = ChatTranscript(on_stop=self.stop, variant=kind)
        self.prompt = PromptBox(host, submit=self._submit)
        self.picker = MentionPicker(host, target=self.prompt)
        self._coalescer = UpdateCoalescer(self._publish, max_rate=max_rate)
        self._copies = UpdateCoalescer(self._send_static_copy, max_rate=copy_rate)
        self.prompt.observe(self._focus_changed, names="focused")
        #: Where a turn's approval question appears (between the conversation and the picker): its own box,
        #: so that showing a question never changes the panel's children (which re-creates the views after
        #: the change: the prompt box would lose its focus and the keys typed next).
        self.questions = ipywidgets.VBox()
        self.questions.add_class("dsh-panel-questions")
        order = {"pick": [self.picker, self.prompt, self.transcript, self.questions],
                 "sidebar": [self.transcript, self.questions]}.get(
            kind, [self.transcript, self.questions, self.picker, self.prompt])
        kwargs.setdefault("children", order)
        super().__init__(**kwargs)
        self.add_class("dsh-panel")
        self.add_class(f"dsh-panel-{kind}")  # the chat panel's picker is compact (widgets.css)
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
            self.state.add_notice(f"Stop failed: {one_line_error(error)}", "error")
            self._coalescer.poke(final=True)
            raise
        self.state.add_notice("Stop requested.")
        self._coalescer.poke(final=True)

    def replay(self, events: Iterable[Any]) -> None:
        """Show a session's stored events (its log) as the conversation so far: prompts, answers, tool lines
        and turn ends, folded as exports fold them (the panel of a session begun in cells or by an earlier
        kernel)."""
        for event in events:
            feed(self.state, event)
        self._coalescer.poke(final=True)

    @property
    def followed(self) -> Any:
        """The agent this panel follows (``None``: only its own prompts' turns are shown)."""
        return self._followed

    def follow(self, agent: Any, on_turn: Callable[[], None] | None = None) -> None:
        """Show every turn of ``agent``'s session as it streams, whichever frontend sent it (a ``%%dsh`` cell,
        ``%dsh chat``, this panel): the sidebar's panel. ``on_turn`` is called when a turn starts or ends.
        Following another agent stops following the previous one."""
        if agent is self._followed:
            return
        self.unfollow()

        def shown(event: AgentEvent) -> None:
            self._on_event(event)
            if on_turn is not None and isinstance(event, TurnStarted | TurnEnded):
                try:
                    on_turn()
                except Exception:
                    log.debug("dsh: the panel's turn callback failed", exc_info=True)

        self._followed = agent
        self._unfollow = agent.subscribe(shown)

    def unfollow(self) -> None:
        """Stop showing the followed agent's turns (its own prompts' turns are still shown)."""
        # ``getattr``: a panel whose construction failed is still closed when it is collected
        unfollow, self._unfollow, self._followed = getattr(self, "_unfollow", None), None, None
        if unfollow is not None:
            unfollow()

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
        self.unfollow()
        for name in ("_coalescer", "_copies"):
            coalescer = getattr(self, name, None)
            if coalescer is not None:
                coalescer.close()
        for name in ("transcript", "picker", "prompt", "questions"):
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
        so it is sent again when the next cell starts (:func:`_refresh_static_copies`). In JupyterLab and
        Notebook 7 each update re-creates the panel's views, so none is sent while the prompt box has the
        focus (the keys typed would be lost): it goes when the box loses it.
        """
        copy = self.static_copy()
        with self.transcript.hold_sync():
            self.transcript.copy_html = copy["text/html"]
            self.transcript.copy_text = copy["text/plain"]
        if not self._shown:
            return
        if self.prompt.focused and not from_cell:  # someone types: it waits for the blur, or the next cell
            _STALE_COPIES.add(self)
            return
        with self._copy_lock:
            if copy == self._copy and not (from_cell and self in _STALE_COPIES):
                return
            self._copy = copy
        bundle = super()._repr_mimebundle_()
        if bundle is None:
            return
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
            self.state.add_notice(f"Not sent: {one_line_error(error)}", "error")
            self.state.set_busy(steered)
            self._failed = True
            self._coalescer.poke(final=True)
            raise
        self._settled.clear()
        self._last_submission = submission
        submission.future.add_done_callback(self._finished)
        return submission

    def _focus_changed(self, change: dict[str, Any]) -> None:
        if not change["new"] and self in _STALE_COPIES:
            self._send_static_copy()

    def _show_question(self, widget: Any) -> None:
        """Put the approval widget of the next turn where the conversation meets the prompt box (replacing
        the previous turn's, which by then holds only the record of its answer)."""
        self.questions.children = (widget,)

    def _on_event(self, event: AgentEvent) -> None:
        """The listener the host calls from the agent thread (each event once: a followed agent's turn that
        this panel sent reaches it through both listeners, one after the other)."""
        if event is self._last_event:
            return
        self._last_event = event
        try:
            final = apply_event(self.state, event)
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
                self.state.add_notice(f"Error: {one_line_error(error)}", "error")
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
        items = view_items(self.state.snapshot())
        facts = self.facts
        with self.transcript.hold_sync():
            self.transcript.items = items
            self.transcript.busy = self.state.busy
            self.transcript.title = facts.heading
            self.transcript.details = facts.labels
            self.transcript.status = facts.status
        self.prompt.busy = self.state.busy
        self._copies.poke(final=not self.state.busy)
