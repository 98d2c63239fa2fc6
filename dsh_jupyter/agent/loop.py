"""The agent loop: one agent per session, turns of model steps and tool calls, written to the log.

Host-independent: hosts (the notebook, tests, the command line) hand it content through
:meth:`Agent.send` / :meth:`Agent.steer` / :meth:`Agent.inject` and watch :class:`~.events.AgentEvent`
values through :meth:`Agent.subscribe`. The core never parses mention syntax and never displays anything.

Every coroutine here runs on one asyncio loop (the host's agent thread). ``steer``, ``inject`` and
``cancel`` are safe to call from other threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..images import request_images, result_blocks
from ..models.base import (
    BlockCollector,
    ModelError,
    ModelProvider,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolSpec,
)
from ..secrets import mask_fields, watch_model
from ..session import Event, SessionLog
from ..session.events import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    SESSION_TITLE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    ReplaceOp,
)
from ..session.messages import (
    assistant_message,
    blocks_text,
    compaction_source,
    text_block,
    tool_result_message,
    user_message,
)
from ..store.base import SessionStore, SessionWriter
from ..tools.base import ToolExecution, ToolOutput, ToolRegistry, parse_arguments
from . import events as ev
from .approvals import ApprovalDecision, ApprovalPolicy, ApprovalRequest, describe_call
from .compaction import (
    COMPACTION_INSTRUCTIONS,
    COMPACTION_REQUEST,
    answer_reserve,
    checkpoint_content,
    chunk_lines,
    chunk_prompt,
    compaction_input_limit,
    plan_compaction,
    transcript_lines,
)
from .hooks import HOOK_FEEDBACK_SOURCE, HookGate
from .inbox import REQUEST_DELIMITER, InboxRecord, Placement, thaw
from .prompt_submit import Allow, Block, PromptSubmission, PromptSubmitHooks
from .request import estimate_tokens, request_messages, text_tokens
from .titles import (
    FALLBACK_SOURCE,
    TITLE_INSTRUCTIONS,
    USER_TITLE_SOURCE,
    clean_title,
    fallback_title,
    provider_title_source,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_SYSTEM_PROMPT = (
    "You are an assistant working inside a Jupyter notebook session. Be concise and concrete. "
    "Use the tools you are given when they help; explain what you found."
)


class AgentBusyError(RuntimeError):
    """send() was called while a turn is running; use steer() to add to the running turn."""


class AgentIdleError(RuntimeError):
    """steer() was called while no turn is running; use send() to start one."""


@dataclass
class AgentConfig:
    """Loop settings (hosts expose them as traitlets)."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    placement: Placement = "separate"
    max_steps: int = 25
    #: Compact automatically when the next request would pass this fraction of the context window
    #: (``None`` turns automatic compaction off).
    auto_compact_fraction: float | None = 0.8
    #: Direct prompts kept after a checkpoint (older ones are summarised).
    compact_keep_recent: int = 1
    model_titles: bool = True
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.placement not in ("separate", "prompt-prefix"):
            raise ValueError(f"placement must be 'separate' or 'prompt-prefix', got {self.placement!r}")
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if self.auto_compact_fraction is not None and not 0 < self.auto_compact_fraction <= 1:
            raise ValueError("auto_compact_fraction must be in (0, 1], or None to turn it off")


@dataclass
class TurnResult:
    """How a turn ended: ``reason`` (completed, interrupted, error, blocked, max-steps) and its text."""

    turn: int
    reason: str
    text: str = ""
    error: str | None = None
    seqs: list[int] = field(default_factory=list)


class _Interrupted(Exception):
    pass


class Agent:
    """Drives one session. Create with :meth:`create` (new session) or :meth:`resume`."""

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
        self._cancel_event: asyncio.Event | None = None
        self._tool_cancel: threading.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turn = sum(1 for e in session.events if e.type == TURN_START)
        #: The ``SessionStart`` source still to announce to hooks at the first turn (``None``: announced).
        self._session_start_source: str | None = "startup"
        if writer is not None:
            writer.attach(session)

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def create(cls, store: SessionStore, model: ModelProvider, *, cwd: str | None = None,
               **kwargs: Any) -> Agent:
        from ..session import SessionHeader

        header = SessionHeader.new(cwd)
        return cls(SessionLog(header), store.create(header), store, model, **kwargs)

    @classmethod
    def resume(cls, store: SessionStore, session_id: str, model: ModelProvider, **kwargs: Any) -> Agent:
        session, writer = store.open(session_id)
        agent = cls(session, None, store, model, **kwargs)
        agent.writer = writer  # store.open already attached the writer to the log
        agent._session_start_source = "resume"
        return agent

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

    # -- the inbox -----------------------------------------------------------------------------------
    async def send(self, content: str | Sequence[Mapping[str, Any]], *, contexts: Sequence[Mapping[str, Any]] = (),
                   source: Mapping[str, Any] | None = None, placement: Placement | None = None) -> TurnResult:
        """Start a turn with a direct prompt (and its prepared reference contexts)."""
        return await self.begin(content, contexts=contexts, source=source, placement=placement)

    def begin(self, content: str | Sequence[Mapping[str, Any]], *, contexts: Sequence[Mapping[str, Any]] = (),
              source: Mapping[str, Any] | None = None,
              placement: Placement | None = None) -> Coroutine[Any, Any, TurnResult]:
        """Reserve the agent for a new turn now (thread-safe) and return the coroutine that runs it.

        Hosts that start a turn on another thread call this first, so that a prompt submitted right after
        sees the agent busy and is steered instead of racing to start a second turn. The coroutine must be
        awaited (or scheduled) once.
        """
        record = InboxRecord.create(content, source=source, contexts=contexts,
                                    placement=placement or self.config.placement, kind="prompt")
        with self._lock:
            if self._running:
                raise AgentBusyError("a turn is already running in this session; steer() into it or wait for it")
            self._running = True
        return self._run_turn(record)

    def steer(self, content: str | Sequence[Mapping[str, Any]], *, contexts: Sequence[Mapping[str, Any]] = (),
              source: Mapping[str, Any] | None = None, placement: Placement | None = None) -> None:
        """Queue content for the next step of the running turn (thread-safe)."""
        record = InboxRecord.create(content, source=source, contexts=contexts,
                                    placement=placement or self.config.placement, kind="steer")
        with self._lock:
            if not self._running:
                raise AgentIdleError("no turn is running to steer into; send() starts a new turn")
            self._pending.append(record)

    def inject(self, content: str | Sequence[Mapping[str, Any]], *, source: Mapping[str, Any],
               meta: Mapping[str, Any] | None = None) -> None:
        """Queue a synthetic message (host or plugin) for the next step, or the next turn when idle."""
        if not isinstance(source, Mapping) or source.get("kind") in (None, "user"):
            raise ValueError("inject() needs a non-user source such as {'kind': 'plugin', 'plugin': 'name'}")
        record = InboxRecord.create(content, source=source, kind="inject", meta=meta)
        with self._lock:
            self._pending.append(record)

    def cancel(self) -> None:
        """Interrupt the running turn (thread-safe); it ends as ``interrupted`` and drops queued input."""
        tool_cancel = self._tool_cancel
        if tool_cancel is not None:
            tool_cancel.set()
        event, loop = self._cancel_event, self._loop
        if event is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed: nothing is left to interrupt
                loop.call_soon_threadsafe(event.set)

    # -- titles --------------------------------------------------------------------------------------
    def set_title(self, title: str) -> None:
        """A title chosen by the user; it wins over later automatic titles."""
        clean = clean_title(title)
        if not clean:
            raise ValueError("a session title cannot be empty")
        self._write_title(clean, USER_TITLE_SOURCE, [])
        self._flush()

    def _title_source_kind(self) -> str | None:
        data = self.session.title()
        source = data.get("source") if data else None
        return source.get("kind") if isinstance(source, Mapping) else None

    def _write_title(self, title: str, source: Mapping[str, Any], message_seqs: list[int]) -> None:
        self.session.append(SESSION_TITLE, {"title": title, "messageSeqs": message_seqs, "source": dict(source)})
        self._emit(ev.TitleChanged(self._turn, title, dict(source)))

    async def _model_title(self, prompt: str, message_seq: int) -> None:
        request = ModelRequest([user_message(prompt)], system=TITLE_INSTRUCTIONS, purpose="title", max_tokens=32)
        try:
            text = await self._complete_text(request)
        except (TimeoutError, ModelError) as exc:
            self._emit(ev.Notice(self._turn, f"could not get a title from the model: {exc}", "warning"))
            return
        title = clean_title(text)
        if title and self._title_source_kind() != "user":
            info = self.model.info
            self._write_title(title, provider_title_source(info.provider, info.model), [message_seq])

    async def _complete_text(self, request: ModelRequest) -> str:
        pieces: list[str] = []
        async for item in self.model.stream(request):
            if isinstance(item, TextDelta):
                pieces.append(item.text)
        return "".join(pieces)

    # -- compaction ----------------------------------------------------------------------------------
    async def compact(self, *, keep_recent: int | None = None) -> bool:
        """Summarise the older surface into a checkpoint; False when there is nothing to compact."""
        if self._running:
            raise AgentBusyError("cannot compact while a turn is running; wait for it or interrupt it")
        self._loop = asyncio.get_running_loop()
        done = await self._compact(None, keep_recent)
        self._flush()
        return done

    async def _compact(self, turn: int | None, keep_recent: int | None) -> bool:
        plan = plan_compaction(self.session.surface(),
                               self.config.compact_keep_recent if keep_recent is None else keep_recent)
        if plan is None:
            return False
        compaction_id = str(uuid.uuid4())
        shadowed_seqs = [e.seq for e in plan.shadowed]
        history = request_images(request_messages(plan.shadowed), accepts_images=False, load=None)  # text only
        request = ModelRequest([*history, user_message(COMPACTION_REQUEST)], system=COMPACTION_INSTRUCTIONS,
                               purpose="compaction")
        window = self.model.info.context_window
        if window and estimate_tokens(request.messages, request.system) > compaction_input_limit(window):
            summary = await self._summarise_in_parts(history, window)
        else:
            summary = (await self._complete_text(request)).strip()
        if not summary:
            raise ModelError("bad_stream", "the model returned an empty summary; compaction was not applied")
        start = self.session.append(COMPACTION_START, {"compactionId": compaction_id, "turn": turn})
        info = self.model.info
        summary_blocks = [text_block(summary)]
        summary_event = self.session.append(COMPACTION_SUMMARY, {
            "compactionId": compaction_id, "summary": summary_blocks, "rawOutput": summary,
            "shadowedRange": {"start": plan.start, "end": plan.end}, "shadowedSeqs": shadowed_seqs,
            "shadowedTokenCount": estimate_tokens(history), "provider": info.provider, "model": info.model,
        })
        checkpoint = user_message(checkpoint_content(summary), compaction_source(compaction_id))
        event = self.session.append(USER_MESSAGE, checkpoint, surface_op=ReplaceOp(plan.start, plan.end),
                                    source_event_seqs=[start.seq, summary_event.seq, *shadowed_seqs])
        self.session.append(COMPACTION_END, {"compactionId": compaction_id, "turn": turn})
        self._emit(ev.MessageRecorded(self._turn, event.seq, checkpoint))
        self._emit(ev.Notice(self._turn, f"compacted {len(shadowed_seqs)} earlier messages into a checkpoint"))
        return True

    async def _summarise_in_parts(self, history: Sequence[dict[str, Any]], window: int) -> str:
        """A summary of ``history`` for a window too small to read it at once: part by part, each request
        carrying the summary so far (see :mod:`.compaction`)."""
        summary_tokens = max(32, window // 16)
        overhead = estimate_tokens([user_message(COMPACTION_REQUEST)], COMPACTION_INSTRUCTIONS) + 32
        part_tokens = max(64, compaction_input_limit(window) - overhead - summary_tokens)
        parts = chunk_lines(transcript_lines(history, part_tokens), part_tokens)
        summary = ""
        for index, part in enumerate(parts):
            request = ModelRequest(
                [user_message(chunk_prompt(part, index, len(parts), summary, summary_tokens)),
                 user_message(COMPACTION_REQUEST)],
                system=COMPACTION_INSTRUCTIONS, max_tokens=summary_tokens, purpose="compaction")
            summary = (await self._complete_text(request)).strip() or summary
        return summary

    def _window_limit(self) -> int | None:
        """Most estimated tokens a request may carry before the model's window (less room for the answer)."""
        window = self.model.info.context_window
        return window - answer_reserve(window) if window else None

    def _request_size(self, messages: Sequence[dict[str, Any]]) -> int:
        """Estimated tokens of a turn request with ``messages``: they, the system prompt and the tool specs."""
        tools = sum(text_tokens(f"{s.name} {s.description} {s.parameters!r}") for s in self._tool_specs())
        return estimate_tokens(messages, self.config.system_prompt) + tools

    def _needs_compaction(self, extra_text: str = "") -> bool:
        fraction = self.config.auto_compact_fraction
        window = self.model.info.context_window
        limit = self._window_limit()
        if fraction is None or not window or limit is None:
            return False
        size = self._request_size(request_messages(self.session.surface())) + text_tokens(extra_text)
        return size > min(window * fraction, limit)

    async def _fit_window(self, turn: int, extra_text: str = "") -> None:
        """Compact when the next request would not fit: older turns first, then everything if still too big."""
        try:
            await self._compact(turn, None)
            if self._needs_compaction(extra_text):
                await self._compact(turn, 0)
        except ModelError as exc:
            self._emit(ev.Notice(turn, f"automatic compaction failed: {exc}", "warning"))

    def _prompt_overflow(self, content: Sequence[dict[str, Any]],
                         contexts: Sequence[Mapping[str, Any]]) -> str | None:
        """Why a prompt cannot fit the model's window even alone (``None`` when it fits)."""
        limit = self._window_limit()
        if limit is None:
            return None
        messages = [user_message(list(c.get("content", [])), c.get("source") or {}) for c in contexts]
        size = self._request_size([*messages, user_message(list(content))])
        if size <= limit:
            return None
        info = self.model.info
        window = info.context_window or 0
        what = "the prompt with its referenced sessions" if contexts else "the prompt"
        return (f"{what} is about {size:,} tokens, but the {info.provider} model {info.model} has a {window:,}-token "
                f"window (about {limit:,} for the prompt, the rest for the answer); nothing was sent: shorten it, "
                "reference fewer sessions, or use a model with a larger window")

    # -- writing messages ----------------------------------------------------------------------------
    def _record_message(self, content: list[dict[str, Any]], source: Mapping[str, Any],
                        **extra: Any) -> Event:
        message = user_message(content, source, **extra)
        event = self.session.append(USER_MESSAGE, message)
        self._emit(ev.MessageRecorded(self._turn, event.seq, message))
        return event

    def _record_inbox(self, record: InboxRecord, content: list[dict[str, Any]] | None = None) -> Event | None:
        """Write one record per its placement; returns the direct message event."""
        direct = content if content is not None else thaw(record.content)
        source = thaw(record.source)
        contexts = [thaw(c) for c in record.contexts]
        if record.kind == "inject":
            extra = {"meta": thaw(record.meta)} if record.meta else {}
            return self._record_message(direct, source, **extra)
        if not contexts:
            return self._record_message(direct, source)
        if record.placement == "prompt-prefix":
            baked: list[dict[str, Any]] = []
            for context in contexts:
                baked.extend(context.get("content", []))
            baked.append(text_block(REQUEST_DELIMITER))
            baked.extend(direct)
            envelope = {"displayContent": direct,
                        "prefixContexts": [{"source": c.get("source")} for c in contexts]}
            return self._record_message(baked, source, envelope=envelope)
        for context in contexts:
            self._record_message(list(context.get("content", [])), context.get("source") or {})
        return self._record_message(direct, source)

    def _drain(self) -> list[InboxRecord]:
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    # -- the turn ------------------------------------------------------------------------------------
    async def _run_turn(self, record: InboxRecord) -> TurnResult:
        self._loop = asyncio.get_running_loop()
        watch_model(self.model)  # its key is masked whatever the variable is called
        self._cancel_event = asyncio.Event()
        self._tool_cancel = threading.Event()
        turn = self._turn + 1
        try:
            gate = self._gate()
            source, self._session_start_source = self._session_start_source, None
            if gate is not None and source is not None:
                for context in (await gate.session_start(self._turn, source)).contexts:
                    self.inject(context["content"], source=context["source"])
            decision = await self.prompt_submit.run(
                PromptSubmission(thaw(record.content), thaw(record.source), self.id, turn))
            hook_contexts: list[dict[str, Any]] = []
            if isinstance(decision, Allow) and gate is not None:
                direct = decision.content if decision.content is not None else thaw(record.content)
                answer = await gate.prompt(turn, blocks_text(direct, ""))
                if answer.blocked:
                    decision = Block(answer.reason or "blocked")
                hook_contexts = answer.contexts
            if isinstance(decision, Block):
                self._drop_queue()
                self._emit(ev.TurnEnded(turn, "blocked", decision.reason))
                return TurnResult(turn, "blocked", error=decision.reason)
            direct = decision.content if decision.content is not None else thaw(record.content)
            overflow = self._prompt_overflow(direct, [*decision.contexts, *hook_contexts,
                                                      *(thaw(c) for c in record.contexts)])
            if overflow is not None:  # refused before anything is written: the log stays as it was
                self._drop_queue()
                self._emit(ev.TurnEnded(turn, "error", overflow))
                return TurnResult(turn, "error", error=overflow)
            self._turn = turn
            return await self._turn_body(turn, record, decision, hook_contexts)
        finally:
            with self._lock:
                self._running = False
            self._cancel_event = None
            self._tool_cancel = None

    def _gate(self) -> HookGate | None:
        if self.hooks is None:
            return None
        return HookGate(self.hooks, self._hook_context, self._emit)

    def _hook_context(self, turn: int | None) -> Any:
        from ..tools.hooks import HookContext

        return HookContext(header=self.header, locate=self.locate, cwd=self.cwd or ".",
                           model=self.model.info.model, turn_id=str(turn) if turn is not None else None)

    def _drop_queue(self) -> None:
        with self._lock:
            self._pending = [r for r in self._pending if r.kind == "inject"]

    async def _turn_body(self, turn: int, record: InboxRecord, decision: Allow,
                         hook_contexts: list[dict[str, Any]]) -> TurnResult:
        result = TurnResult(turn, "completed")
        first_turn_prompt = self.session.title() is None
        open_calls: dict[str, int] = {}
        step = 0
        step_open = False
        self.session.append(TURN_START, {"turn": turn})
        self._emit(ev.TurnStarted(turn))
        try:
            direct_text = blocks_text(decision.content if decision.content is not None else thaw(record.content))
            if self._needs_compaction(direct_text):
                await self._fit_window(turn, direct_text)
            step = 1
            self.session.append(STEP_START, {"turn": turn, "step": step})
            step_open = True
            for queued in self._drain_injects():
                self._record_inbox(queued)
            direct = self._record_inbox(record, decision.content)
            for context in [*decision.contexts, *hook_contexts]:
                self._record_message(list(context.get("content", [])), context.get("source") or {})
            if first_turn_prompt and direct is not None:
                prompt = blocks_text(decision.content if decision.content is not None else thaw(record.content), "")
                self._write_title(fallback_title(prompt), FALLBACK_SOURCE, [direct.seq])
            stop_hook_active = False
            while True:
                self._check_cancel()
                text, calls = await self._model_step(turn, step)
                result.text = text
                for call in calls:
                    self._check_cancel()
                    call_event = self.session.append(TOOL_CALL, {
                        "turn": turn, "step": step, "callId": call["id"], "name": call["name"],
                        "arguments": call["arguments"]})
                    open_calls[call["id"]] = call_event.seq
                    output = await self._run_tool(turn, call)
                    images = await self._image_blocks(call, output)
                    self._write_tool_result(turn, step, call, output, open_calls.pop(call["id"]), images)
                self.session.append(STEP_END, {"turn": turn, "step": step})
                step_open = False
                self._check_cancel()
                pending = self._drain()
                if not calls and not pending and self.hooks is not None:
                    pending = await self._hook_stop(turn, text, stop_hook_active)
                    stop_hook_active = stop_hook_active or bool(pending)
                if not calls and not pending:
                    break
                if step >= self.config.max_steps:
                    result.reason = "max-steps"
                    result.error = f"stopped after {step} steps (the configured maximum)"
                    self._requeue(pending)
                    break
                step += 1
                if self._needs_compaction():
                    await self._fit_window(turn)
                self.session.append(STEP_START, {"turn": turn, "step": step})
                step_open = True
                for queued in pending:
                    self._record_inbox(queued)
        except (_Interrupted, asyncio.CancelledError) as exc:
            self._close_interrupted(turn, step, step_open, open_calls)
            result.reason = "interrupted"
            self._finish(turn, result)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return result
        except ModelError as exc:
            self._close_open_calls(turn, step, open_calls, "the turn ended because the model call failed")
            if step_open:
                self.session.append(STEP_END, {"turn": turn, "step": step})
            result.reason = "interrupted" if exc.kind == "cancelled" else "error"
            result.error = None if exc.kind == "cancelled" else str(exc)
            self._finish(turn, result)
            return result
        except BaseException:
            self._close_interrupted(turn, step, step_open, open_calls)
            result.reason = "error"
            self._finish(turn, result)
            raise
        self._finish(turn, result)
        if first_turn_prompt and self.config.model_titles and direct is not None and \
                self._title_source_kind() == "fallback":
            await self._model_title(blocks_text(thaw(record.content), ""), direct.seq)
            self._flush()
        return result

    def _drain_injects(self) -> list[InboxRecord]:
        with self._lock:
            injects = [r for r in self._pending if r.kind == "inject"]
            self._pending = [r for r in self._pending if r.kind != "inject"]
        return injects

    def _requeue(self, records: Iterable[InboxRecord]) -> None:
        with self._lock:
            self._pending = [r for r in records if r.kind == "inject"] + self._pending

    def _check_cancel(self) -> None:
        if self._cancel_event is not None and self._cancel_event.is_set():
            raise _Interrupted()

    def _close_open_calls(self, turn: int, step: int, open_calls: dict[str, int], why: str) -> None:
        for call_id, call_seq in list(open_calls.items()):
            note = text_block(f"Tool call interrupted: {why}; no result was recorded.")
            message = tool_result_message(call_id, [note], is_error=True)
            self.session.append(TOOL_RESULT, {"turn": turn, "step": step, "message": message,
                                              "error": {"code": TOOL_OUTCOME_UNKNOWN}},
                                source_event_seqs=[call_seq])
            open_calls.pop(call_id)

    def _close_interrupted(self, turn: int, step: int, step_open: bool, open_calls: dict[str, int]) -> None:
        self._close_open_calls(turn, step, open_calls, "the user interrupted the turn")
        if step_open:
            self.session.append(STEP_END, {"turn": turn, "step": step})
        self._drop_queue()

    def _finish(self, turn: int, result: TurnResult) -> None:
        reason: dict[str, Any] = {"kind": result.reason}
        if result.error:
            reason["message"] = result.error
        self.session.append(TURN_END, {"turn": turn, "reason": reason})
        self._flush()
        self._emit(ev.TurnEnded(turn, result.reason, result.error))

    def _flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    # -- one model step ------------------------------------------------------------------------------
    def _tool_specs(self) -> list[ToolSpec]:
        return [ToolSpec(s["name"], s["description"], s["parameters"]) for s in self.tools.specs()]

    def _request(self) -> ModelRequest:
        """The next step's request: the surface as neutral messages (images loaded for a model that takes
        them, described for the others), the system prompt and the tools."""
        messages = request_images(request_messages(self.session.surface()),
                                  accepts_images=getattr(self.model.info, "accepts_images", False),
                                  load=self._load_artifact if self.store is not None else None)
        return ModelRequest(messages, tools=self._tool_specs(), system=self.config.system_prompt,
                            max_tokens=self.config.max_tokens, purpose="turn")

    def _load_artifact(self, name: str) -> bytes | None:
        return self.store.load_artifact(self.header, name) if self.store is not None else None

    def _save_artifact(self, name: str, data: bytes) -> None:
        if self.store is None:
            raise RuntimeError("this session has no store")
        self._flush()  # a database keeps artifacts beside a session row that must exist first
        self.store.save_artifact(self.header, name, data)

    async def _model_step(self, turn: int, step: int) -> tuple[str, list[dict[str, Any]]]:
        collector = BlockCollector()
        stream = self.model.stream(self._request(), self._cancel_event)
        try:
            async for item in stream:
                collector.add(item)
                if isinstance(item, TextDelta) and item.text:
                    self._emit(ev.TextDelta(turn, item.text))
                elif isinstance(item, ReasoningDelta) and item.text:
                    self._emit(ev.ReasoningDelta(turn, item.text))
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        blocks = collector.blocks(id_prefix=f"call_{turn}_{step}_")
        message = assistant_message(blocks, self.model.info.source())
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if collector.usage is not None:
            data["usage"] = collector.usage.to_json()
        event = self.session.append(ASSISTANT_MESSAGE, data)
        text = blocks_text(blocks)
        self._emit(ev.AssistantMessage(turn, text, event.seq, data.get("usage")))
        return text, [b for b in blocks if b.get("type") == "tool-call"]

    # -- tools ---------------------------------------------------------------------------------------
    def execution(self, call_id: str, *, background: bool = False) -> ToolExecution:
        """The context one tool call runs with (also used by hosts running tools themselves)."""
        header = self.header
        store = self.store
        return ToolExecution.create(
            call_id, header.cwd or ".", header=header,
            locate=(lambda: store.locate(header)) if store is not None else None,
            session_dir=store.session_dir(header) if store is not None else None,
            cancel=self._tool_cancel, background=background,
        )

    def _describe(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
        """What an approval question shows: the tool's own description of the call, else the generic one."""
        tool = self.tools.get(name)
        try:
            described = tool.describe(arguments) if tool is not None else None
        except Exception:  # a question is still asked, with the generic description
            described = None
        return described or describe_call(name, arguments)

    async def _run_tool(self, turn: int, call: dict[str, Any]) -> ToolOutput:
        name, arguments = call["name"], call["arguments"]
        self._emit(ev.ToolStarted(turn, call["id"], name, arguments))
        gate = self._gate()
        parsed = parse_arguments(arguments)
        tool_input = parsed if isinstance(parsed, dict) else {}
        shown, language = self._describe(name, tool_input if isinstance(parsed, dict) else {"arguments": arguments})
        request = ApprovalRequest(name, call["id"], tool_input, shown, language)
        hook_verdict = None
        if gate is not None:
            answer = await gate.pre_tool(turn, name, tool_input, call["id"])
            if answer.blocked:
                denied = ApprovalDecision(False, "hook", reason=answer.reason)
                return self._refuse(turn, call, request, denied, f"The tool call was not run: {answer.reason}")
            hook_verdict = answer.verdict
            if answer.verdict == "ask" and answer.reason:
                request = ApprovalRequest(name, call["id"], tool_input, shown, language, reason=answer.reason)
        decision = await self._until_cancelled(
            self.approvals.decide(request, self.tools.effect(name), hook_verdict))
        record = decision.to_json(request, self.approvals.mode)
        if not decision.allowed:
            return self._refuse(turn, call, request, decision, decision.refusal(request))
        self._emit(ev.ApprovalDecided(turn, call["id"], name, record))
        execution = self.execution(call["id"])
        task = asyncio.ensure_future(self.tools.execute(name, arguments, execution))
        try:
            output = await self._until_cancelled(task)
        except _Interrupted:
            execution.cancel.set()
            try:
                await asyncio.wait_for(task, timeout=5)
            except (TimeoutError, asyncio.CancelledError, Exception):
                task.cancel()
            raise
        output = replace(output, meta={**output.meta, "approval": record})
        self._emit(ev.ToolFinished(turn, call["id"], name, output.text, output.is_error))
        if gate is not None:
            answer = await gate.post_tool(turn, name, tool_input, call["id"], output.text)
            for context in answer.contexts:
                self.inject(context["content"], source=context["source"])
        return output

    def _refuse(self, turn: int, call: dict[str, Any], request: ApprovalRequest, decision: ApprovalDecision,
                text: str) -> ToolOutput:
        """A call that may not run: the refusal is its result (the model reads why; the log keeps who said so)."""
        record = decision.to_json(request, self.approvals.mode)
        self._emit(ev.ApprovalDecided(turn, call["id"], call["name"], record))
        output = ToolOutput(text, is_error=True, meta={"denied": True, "approval": record})
        self._emit(ev.ToolFinished(turn, call["id"], call["name"], output.text, True))
        return output

    async def _until_cancelled(self, awaitable: Awaitable[_T]) -> _T:
        """``awaitable``'s result, or :class:`_Interrupted` (the awaitable cancelled) when the user interrupts."""
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
            raise _Interrupted()
        return task.result()

    async def _image_blocks(self, call: dict[str, Any], output: ToolOutput) -> list[dict[str, Any]]:
        """The blocks recording the output's images (downscaled and saved as artifacts off the event loop)."""
        if not output.images:
            return []
        save = self._save_artifact if self.store is not None else None
        return await asyncio.to_thread(result_blocks, output.images, save, call.get("name"))

    def _write_tool_result(self, turn: int, step: int, call: dict[str, Any], output: ToolOutput,
                           call_seq: int, images: Sequence[dict[str, Any]] = ()) -> None:
        message = tool_result_message(call["id"], [text_block(output.text), *images], is_error=output.is_error)
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if output.meta:
            data["meta"] = output.meta
        self.session.append(TOOL_RESULT, data, source_event_seqs=[call_seq])

    async def _hook_stop(self, turn: int, text: str, active: bool) -> list[InboxRecord]:
        gate = self._gate()
        answer = await gate.stop(turn, text, active) if gate is not None else None
        if answer is None or not answer.blocked:
            return []
        return [InboxRecord.create(answer.reason or "continue", source=HOOK_FEEDBACK_SOURCE, kind="inject")]

    # -- replay --------------------------------------------------------------------------------------
    def next_request(self) -> ModelRequest:
        """The request the next step would send (from the log alone; used to check replay)."""
        return self._request()

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
