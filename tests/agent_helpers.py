"""A scripted model for agent-loop tests: queue replies, record every request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from dsh_jupyter.models.base import (
    Finish,
    ModelInfo,
    ModelProvider,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from dsh_jupyter.session.messages import message_text


@dataclass
class Reply:
    """One scripted model answer: text pieces, tool calls, or a stall/failure."""

    text: list[str] = field(default_factory=list)
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments JSON)
    stall: bool = False  # never finishes until cancelled
    error: Exception | None = None
    reasoning: str | None = None


def say(*pieces: str) -> Reply:
    return Reply(text=list(pieces))


def call(name: str, arguments: str, call_id: str = "call_1", *pieces: str) -> Reply:
    return Reply(text=list(pieces), tool_calls=[(call_id, name, arguments)])


class ScriptedModel(ModelProvider):
    """Replies from a queue; when empty, echoes the last user message. Titles/summaries are fixed."""

    def __init__(self, *replies: Reply, context_window: int | None = 100_000) -> None:
        self.info = ModelInfo("scripted", "scripted-1", context_window)
        self.replies: list[Reply] = list(replies)
        self.requests: list[ModelRequest] = []

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def stream(self, request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if request.purpose == "title":
            yield TextDelta("Scripted title")
            yield Finish("stop")
            return
        if request.purpose == "compaction":
            users = [message_text(m) for m in request.messages if m["role"] == "user"]
            yield TextDelta("Summary of: " + " | ".join(u for u in users if u)[:500])
            yield Finish("stop")
            return
        reply = self.replies.pop(0) if self.replies else None
        if reply is None:
            last = next((message_text(m) for m in reversed(request.messages) if m["role"] == "user"), "")
            reply = Reply(text=[f"echo: {last}"])
        if reply.error is not None:
            raise reply.error
        if reply.reasoning:
            from dsh_jupyter.models.base import ReasoningDelta

            yield ReasoningDelta(reply.reasoning)
        for piece in reply.text:
            await asyncio.sleep(0)
            yield TextDelta(piece)
        for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
            yield ToolCallDelta(index, call_id, name, arguments[: len(arguments) // 2])
            yield ToolCallDelta(index, None, None, arguments[len(arguments) // 2:])
        if reply.stall:
            waiter = cancel.wait() if cancel is not None else asyncio.sleep(3600)
            await waiter
            from dsh_jupyter.models.base import ModelError

            raise ModelError("cancelled", "cancelled")
        yield Usage(10, 5)
        yield Finish("tool_calls" if reply.tool_calls else "stop")
