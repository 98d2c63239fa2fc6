"""Keeping requests inside the model's context window: compaction into a checkpoint (by hand or automatic),
in parts for a window too small to read the history at once, and refusing a prompt that cannot fit alone.

The plans and prompts are pure functions in :mod:`.compaction`; this module runs them against the model and
writes the checkpoint to the log.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..conversation.usage import ContextMeter
from ..images import request_images
from ..models.base import ModelError, ModelRequest
from ..session.events import COMPACTION_END, COMPACTION_START, COMPACTION_SUMMARY, USER_MESSAGE, ReplaceOp
from ..session.messages import compaction_source, text_block, user_message
from . import events as ev
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
from .config import AgentBusyError
from .request import estimate_tokens, request_messages, text_tokens
from .state import AgentState


def _unread(_name: str) -> bytes:
    """Stands in for an image artifact in an estimate: only which images go as images counts, not their bytes."""
    return b""


class ContextWindow(AgentState):
    """Compaction and the window checks (mixed into :class:`~.loop.Agent`)."""

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
        """Estimated tokens of a turn request with ``messages``: they (images chosen as :meth:`_request` chooses
        them, without reading a picture), the system prompt and the tool specs."""
        tools = sum(text_tokens(f"{s.name} {s.description} {s.parameters!r}") for s in self._tool_specs())
        sent = request_images(messages, accepts_images=self._sends_images(), load=_unread)
        return estimate_tokens(sent, self.config.system_prompt) + tools

    def context_meter(self, extra_text: str = "") -> ContextMeter | None:
        """How full the model's window is with the next request (the surface, the system prompt, the tools
        and ``extra_text``), and past how many tokens automatic compaction starts; ``None`` when the window
        is unknown."""
        window = self.model.info.context_window
        limit = self._window_limit()
        if not window or limit is None:
            return None
        fraction = self.config.auto_compact_fraction
        size = self._request_size(request_messages(self.session.surface())) + text_tokens(extra_text)
        return ContextMeter(size, window, None if fraction is None else int(min(window * fraction, limit)))

    def _needs_compaction(self, extra_text: str = "") -> bool:
        meter = self.context_meter(extra_text)
        return meter is not None and meter.compacts_at is not None and meter.used > meter.compacts_at

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

