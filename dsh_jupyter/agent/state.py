"""What one agent carries (its session, store, model, tools, inbox and cancel signals) and the pieces every
part of the loop uses: emitting events, flushing the log, the next model request, waiting until cancelled.

:class:`AgentState` is the base the loop's parts build on (:mod:`.tool_calls`, :mod:`.window`, and
:class:`~.loop.Agent` itself), so each part reads and writes one state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..images import request_images
from ..models.base import ModelProvider, ModelRequest, TextDelta, ToolSpec
from ..secrets import mask_fields
from ..session import SessionLog
from ..session.events import TURN_START
from ..store.base import SessionStore, SessionWriter
from ..tools.base import ToolRegistry
from ..tools.hooks import HookContext
from . import events as ev
from .approvals import ApprovalPolicy
from .config import AgentConfig
from .hooks import HookGate
from .inbox import InboxRecord
from .prompt_submit import PromptSubmitHooks
from .request import request_messages

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Interrupted(Exception):
    """Raised inside a turn when the user interrupts it (the turn ends as ``interrupted``)."""


class AgentState:
    """One agent's state and shared machinery; :class:`~.loop.Agent` is the class hosts use."""

    def __init__(self, session: SessionLog, writer: SessionWriter | None, store: SessionStore | None,
                 model: ModelProvider, *, tools: ToolRegistry | None = None, hooks: Any = None,
                 config: AgentConfig | None = None, approvals: ApprovalPolicy | None = None) -> None:
        self.session = session
        self.writer = writer
        self.store = store
        self.model = model
        self.tools = tools if tools is not None else ToolRegistry()
        self.hooks = hooks
        self.config = config or AgentConfig()
        #: Whether each tool call may run. Without a host's policy every call runs ("auto"); the notebook host
        #: sets its own (mode "ask" by default, one policy per session).
        self.approvals = approvals if approvals is not None else ApprovalPolicy("auto")
        self.prompt_submit = PromptSubmitHooks()
        self._listeners: list[Callable[[ev.AgentEvent], None]] = []
        self._lock = threading.Lock()
        self._pending: list[InboxRecord] = []
        self._running = False
        # The running turn has looked at its inbox for the last time: steering is refused from then on (the prompt
        # starts a turn of its own once this one has ended), so nothing steered in is left behind unread.
        self._closing = False
        self._cancel_event: asyncio.Event | None = None
        self._tool_cancel: threading.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turn = sum(1 for e in session.events if e.type == TURN_START)
        #: The ``SessionStart`` source still to announce to hooks at the first turn (``None``: announced).
        self._session_start_source: str | None = "startup"
        if writer is not None:
            writer.attach(session)

    # -- identity ------------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.session.header.id

    @property
    def header(self) -> Any:
        return self.session.header

    @property
    def cwd(self) -> str | None:
        return self.session.header.cwd

    @property
    def busy(self) -> bool:
        return self._running

    def locate(self) -> Any:
        return self.store.locate(self.header) if self.store is not None else None

    def title(self) -> str | None:
        data = self.session.title()
        return data.get("title") if data else None

    # -- observers -----------------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[ev.AgentEvent], None]) -> Callable[[], None]:
        self._listeners.append(listener)

        def dispose() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return dispose

    def _emit(self, event: ev.AgentEvent) -> None:
        event = mask_fields(event)  # what hosts display never shows a secret value
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken display must never break the turn
                log.exception("agent listener failed")

    @property
    def stopping(self) -> bool:
        """Whether the user stopped the running turn (hooks and plugins that wait should give up)."""
        return self._cancel_event is not None and self._cancel_event.is_set()

    def notice(self, text: str, level: str = "info") -> None:
        """Show ``text`` to the user beside the current turn (hosts and plugins); the model never sees it."""
        self._emit(ev.Notice(self._turn, text, level))

    def inject(self, content: str | Sequence[Mapping[str, Any]], *, source: Mapping[str, Any],
               meta: Mapping[str, Any] | None = None) -> None:
        """Queue a synthetic message (host or plugin) for the next step, or the next turn when idle."""
        if not isinstance(source, Mapping) or source.get("kind") in (None, "user"):
            raise ValueError("inject() needs a non-user source such as {'kind': 'plugin', 'plugin': 'name'}")
        record = InboxRecord.create(content, source=source, kind="inject", meta=meta)
        with self._lock:
            self._pending.append(record)

    async def _complete_text(self, request: ModelRequest) -> str:
        pieces: list[str] = []
        async for item in self.model.stream(request):
            if isinstance(item, TextDelta):
                pieces.append(item.text)
        return "".join(pieces)

    def _gate(self) -> HookGate | None:
        if self.hooks is None:
            return None
        return HookGate(self.hooks, self._hook_context, self._emit)

    def _hook_context(self, turn: int | None) -> Any:
        return HookContext(header=self.header, locate=self.locate, cwd=self.cwd or ".",
                           model=self.model.info.model, turn_id=str(turn) if turn is not None else None)

    def _check_cancel(self) -> None:
        if self._cancel_event is not None and self._cancel_event.is_set():
            raise Interrupted()

    def _flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    # -- the next request ----------------------------------------------------------------------------
    def _tool_specs(self) -> list[ToolSpec]:
        return [ToolSpec(s["name"], s["description"], s["parameters"]) for s in self.tools.specs()]

    def _request(self) -> ModelRequest:
        """The next step's request: the surface as neutral messages (images loaded for a model that takes
        them, described for the others), the system prompt and the tools."""
        messages = request_images(request_messages(self.session.surface()), accepts_images=self._sends_images(),
                                  load=self._load_artifact if self.store is not None else None)
        return ModelRequest(messages, tools=self._tool_specs(), system=self.config.system_prompt,
                            max_tokens=self.config.max_tokens, purpose="turn")

    def _sends_images(self) -> bool:
        """Whether a request sends images as images (the newest of them; :func:`request_images` chooses): not to a
        model that does not take them, nor from a session without a store to load them from."""
        return bool(getattr(self.model.info, "accepts_images", False)) and self.store is not None

    def _load_artifact(self, name: str) -> bytes | None:
        return self.store.load_artifact(self.header, name) if self.store is not None else None

    def _save_artifact(self, name: str, data: bytes) -> None:
        if self.store is None:
            raise RuntimeError("this session has no store")
        self._flush()  # a database keeps artifacts beside a session row that must exist first
        self.store.save_artifact(self.header, name, data)

    async def _until_cancelled(self, awaitable: Awaitable[_T]) -> _T:
        """``awaitable``'s result, or :class:`Interrupted` (the awaitable cancelled) when the user interrupts."""
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self._cancel_event.wait()) if self._cancel_event else None
        try:
            done, _ = await asyncio.wait([t for t in (task, waiter) if t is not None],
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if waiter is not None:
                waiter.cancel()
        if task not in done:
            if not isinstance(awaitable, asyncio.Future):  # a future the caller owns is the caller's to stop
                task.cancel()
            raise Interrupted()
        return task.result()
