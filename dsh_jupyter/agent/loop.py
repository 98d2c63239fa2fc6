"""The agent loop: one agent per session, turns of model steps and tool calls, written to the log.

Host-independent: hosts (the notebook, tests, the command line) hand it content through
:meth:`Agent.send` / :meth:`Agent.steer` / :meth:`Agent.inject` and watch :class:`~.events.AgentEvent`
values through :meth:`Agent.subscribe`. The core never parses mention syntax and never displays anything.

Every coroutine here runs on one asyncio loop (the host's agent thread). ``steer``, ``inject`` and
``cancel`` are safe to call from other threads.

The loop is built from parts that share one :class:`~.state.AgentState`: tool calls (:mod:`.tool_calls`),
the context window and compaction (:mod:`.window`); this module holds the inbox, titles and the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..models.base import BlockCollector, ModelError, ModelProvider, ModelRequest, ReasoningDelta, TextDelta
from ..secrets import watch_model
from ..session import Event, SessionHeader, SessionLog
from ..session.events import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from ..session.messages import assistant_message, blocks_text, text_block, user_message
from ..session.titles import (
    FALLBACK_SOURCE,
    MAX_TITLE_SIBLINGS,
    TITLE_INSTRUCTIONS,
    USER_TITLE_SOURCE,
    clean_title,
    provider_title_source,
    request_title,
    unique_title,
)
from ..store.base import SessionStore
from . import events as ev
from .config import AgentBusyError, AgentIdleError, TurnResult
from .hooks import HOOK_FEEDBACK_SOURCE
from .inbox import REQUEST_DELIMITER, InboxRecord, Placement, thaw
from .prompt_submit import Allow, Block, PromptSubmission
from .state import Interrupted
from .tool_calls import ToolCalls
from .window import ContextWindow

log = logging.getLogger(__name__)


class Agent(ToolCalls, ContextWindow):
    """Drives one session. Create with :meth:`create` (new session) or :meth:`resume`."""

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def create(cls, store: SessionStore, model: ModelProvider, *, cwd: str | None = None,
               **kwargs: Any) -> Agent:
        header = SessionHeader.new(cwd)
        return cls(SessionLog(header), store.create(header), store, model, **kwargs)

    @classmethod
    def resume(cls, store: SessionStore, session_id: str, model: ModelProvider, **kwargs: Any) -> Agent:
        session, writer = store.open(session_id)
        agent = cls(session, None, store, model, **kwargs)
        agent.writer = writer  # store.open already attached the writer to the log
        agent._session_start_source = "resume"
        return agent

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
            # From here on the turn is the user's to stop: a cancel() before its coroutine runs is kept here.
            self._tool_cancel = threading.Event()
        return self._run_turn(record)

    def steer(self, content: str | Sequence[Mapping[str, Any]], *, contexts: Sequence[Mapping[str, Any]] = (),
              source: Mapping[str, Any] | None = None, placement: Placement | None = None) -> None:
        """Queue content for the next step of the running turn (thread-safe)."""
        record = InboxRecord.create(content, source=source, contexts=contexts,
                                    placement=placement or self.config.placement, kind="steer")
        with self._lock:
            if not self._running or self._closing:
                raise AgentIdleError("no turn is running to steer into; send() starts a new turn")
            self._pending.append(record)

    def cancel(self) -> None:
        """Interrupt the running turn (thread-safe); it ends as ``interrupted`` and drops queued input. A turn
        reserved with :meth:`begin` whose coroutine has not run yet is stopped too: it ends at once."""
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

    def _taken_titles(self) -> list[str]:
        """The titles of the other sessions of this session's folder (best effort: none when unreadable)."""
        store, cwd = self.store, self.session.header.cwd
        if store is None:
            return []
        taken: list[str] = []
        try:
            headers = [h for h in store.list_headers() if h.cwd == cwd and h.id != self.id]
            for header in sorted(headers, key=lambda h: -h.created_at)[:MAX_TITLE_SIBLINGS]:
                data = store.read_title(header.id)
                if data and isinstance(data.get("title"), str):
                    taken.append(data["title"])
        except Exception as exc:  # a title is not worth failing a turn for
            log.debug("could not read the titles of the folder's other sessions: %s", exc)
        return taken

    def _write_auto_title(self, title: str, source: Mapping[str, Any], message_seqs: list[int]) -> None:
        """An automatic title, made unique within the folder; a title once made is not rewritten to itself."""
        title = unique_title(title, self.config.notebook, self._taken_titles())
        current = self.session.title()
        if current is not None and current.get("title") == title:
            return
        self._write_title(title, source, message_seqs)

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
            self._write_auto_title(title, provider_title_source(info.provider, info.model), [message_seq])

    # -- writing messages ----------------------------------------------------------------------------
    def _record_message(self, content: Sequence[Mapping[str, Any]], source: Mapping[str, Any],
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
            baked: list[Mapping[str, Any]] = []
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

    def _last_look(self) -> list[InboxRecord]:
        """The turn is about to end: what came in since the last look (the turn then goes on with it), or nothing,
        and then :meth:`steer` is refused until the turn has ended. Without this, a prompt steered in after the
        last look was left in the inbox, unread, while the turn ended."""
        with self._lock:
            pending, self._pending = self._pending, []
            if not pending:
                self._closing = True
        return pending

    # -- the turn ------------------------------------------------------------------------------------
    async def _run_turn(self, record: InboxRecord) -> TurnResult:
        self._loop = asyncio.get_running_loop()
        watch_model(self.model)  # its key is masked whatever the variable is called
        self._cancel_event = asyncio.Event()
        self._tool_cancel = self._tool_cancel or threading.Event()  # begin() made it
        if self._tool_cancel.is_set():  # the user stopped the turn between begin() and now
            self._cancel_event.set()
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
                self._closing = False
            self._cancel_event = None
            self._tool_cancel = None

    def _drop_queue(self) -> None:
        with self._lock:
            self._pending = [r for r in self._pending if r.kind == "inject"]

    async def _turn_body(self, turn: int, record: InboxRecord, decision: Allow,
                         hook_contexts: list[dict[str, Any]]) -> TurnResult:
        result = TurnResult(turn, "completed")
        first_turn_prompt = self.session.title() is None
        titled = False
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
                self._write_auto_title(request_title(prompt), FALLBACK_SOURCE, [direct.seq])
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
                    if not titled:
                        await self._title_from_model(first_turn_prompt, record, direct)
                        titled = True
                    pending = self._last_look()  # after the title's model call: a prompt may come meanwhile
                    if not pending:
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
        except (Interrupted, asyncio.CancelledError) as exc:
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
        if not titled:  # a turn stopped at its step limit
            await self._title_from_model(first_turn_prompt, record, direct)
        self._finish(turn, result)
        return result

    async def _title_from_model(self, first_turn_prompt: bool, record: InboxRecord, direct: Event | None) -> None:
        """The model's title for a session's first turn, before the turn ends (its footer shows the final title),
        when the model titles sessions and no title but the fallback is set."""
        if first_turn_prompt and self.config.model_titles and direct is not None and \
                self._title_source_kind() == "fallback":
            await self._model_title(blocks_text(thaw(record.content), ""), direct.seq)

    def _drain_injects(self) -> list[InboxRecord]:
        with self._lock:
            injects = [r for r in self._pending if r.kind == "inject"]
            self._pending = [r for r in self._pending if r.kind != "inject"]
        return injects

    def _requeue(self, records: Iterable[InboxRecord]) -> None:
        with self._lock:
            self._pending = [r for r in records if r.kind == "inject"] + self._pending

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

    # -- one model step ------------------------------------------------------------------------------
    async def _model_step(self, turn: int, step: int) -> tuple[str, list[dict[str, Any]]]:
        collector = BlockCollector()
        with self._retries_shown(turn):
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

    @contextlib.contextmanager
    def _retries_shown(self, turn: int) -> Iterator[None]:
        """While a model call runs, each retry the provider waits for (a 429, a 5xx, a dropped connection) is a
        notice beside the turn saying why and how long it waits; the provider's own ``on_retry`` still runs."""
        model = self.model
        if not hasattr(model, "on_retry"):
            yield
            return
        previous = model.on_retry
        retries = getattr(model, "max_retries", None)

        def show(error: ModelError, delay: float, number: int) -> None:
            if previous is not None:
                previous(error, delay, number)
            of = f" of {retries}" if isinstance(retries, int) else ""
            self._emit(ev.Notice(turn, f"retrying in {delay:.1f} s (retry {number}{of}): {error.message}",
                                 "warning"))

        model.on_retry = show
        try:
            yield
        finally:
            model.on_retry = previous

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
