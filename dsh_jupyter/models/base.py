"""The model seam: what the agent loop sends to a model, and what streams back.

A provider is anything implementing :class:`ModelProvider`::

    provider.info                                   # ModelInfo(provider, model, context_window)
    async for event in provider.stream(request, cancel=cancel_event):
        ...                                         # TextDelta | ReasoningDelta | ToolCallDelta | Usage | Finish
    await provider.close()

**Request.** :class:`ModelRequest` carries the conversation in OpenAI *chat-completions* format: a list of
dicts with ``role`` ``system`` / ``user`` / ``assistant`` / ``tool``. Assistant messages may carry
``tool_calls`` (``[{"id", "type": "function", "function": {"name", "arguments": <JSON string>}}]``), and
each tool message answers one call with ``tool_call_id`` and ``content``. ``content`` is a string (or the
OpenAI list-of-parts form). ``tools`` lists :class:`ToolSpec` (name, description, JSON-schema parameters).
``purpose`` says why the loop asks: ``"turn"`` (a normal step), ``"title"`` (a short session title) or
``"compaction"`` (a summary of the messages sent).

**Stream.** Events arrive in the order the model produced them:

- :class:`TextDelta` / :class:`ReasoningDelta`: a piece of visible text / of reasoning (DeepSeek's
  ``reasoning_content``).
- :class:`ToolCallDelta`: a piece of tool call number ``index``. ``id`` and ``name`` are set on the first
  delta of a call (``None`` afterwards, as OpenAI streams them); ``arguments_delta`` is the next piece of the
  raw JSON arguments string. Concatenate pieces per ``index``.
- :class:`Usage`: token counts, at most once, just before :class:`Finish`.
- :class:`Finish`: always the last event of a successful stream; ``reason`` is the provider's finish reason
  (``"stop"``, ``"tool_calls"``, ``"length"``, ``"content_filter"``, ...).

A stream that cannot complete raises :class:`ModelError` instead of yielding ``Finish``; its ``kind`` tells
the loop what happened and its message tells the user what to do. Setting the ``cancel`` event stops the
stream promptly (the HTTP response is closed) with ``ModelError(kind="cancelled")``. Cancelling the
consuming task (``asyncio.CancelledError``) also closes the stream.

:func:`collect` turns a stream into content blocks (``reasoning`` / ``text`` / ``tool-call``, as stored in
session messages), the usage and the finish reason.
"""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Literal, Mapping, Sequence, Union

#: Why the loop calls the model.
Purpose = Literal["turn", "title", "compaction"]

#: ``ModelError.kind`` values.
ErrorKind = Literal["auth", "rate_limit", "server", "bad_request", "bad_stream", "config", "cancelled"]

ERROR_KINDS: frozenset[str] = frozenset(
    {"auth", "rate_limit", "server", "bad_request", "bad_stream", "config", "cancelled"}
)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name, what it does, and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model. ``messages`` are OpenAI chat-completions messages (see the module docstring)."""

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    purpose: Purpose = "turn"

    def __post_init__(self) -> None:
        if self.purpose not in ("turn", "title", "compaction"):
            raise ValueError(f"ModelRequest.purpose must be 'turn', 'title' or 'compaction', got {self.purpose!r}")
        if isinstance(self.messages, (str, bytes)) or not all(isinstance(m, Mapping) for m in self.messages):
            raise TypeError("ModelRequest.messages must be a list of chat-completions message dicts")
        for tool in self.tools:
            if not isinstance(tool, ToolSpec):
                raise TypeError(f"ModelRequest.tools must hold ToolSpec objects, got {type(tool).__name__}")

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


@dataclass(frozen=True)
class TextDelta:
    """A piece of the visible answer."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning (shown apart from the answer; not sent back to the model)."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of tool call ``index``: ``id``/``name`` on its first delta, then argument pieces."""

    index: int
    id: str | None
    name: str | None
    arguments_delta: str


@dataclass(frozen=True)
class Usage:
    """Token counts of one model call (``None`` where the provider did not report a figure)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_json(self) -> dict[str, int]:
        """The session format's ``usage`` object (``inputTokens``, ``outputTokens``, ``cacheReadTokens``...)."""
        record = {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}
        if self.cache_read_tokens is not None:
            record["cacheReadTokens"] = self.cache_read_tokens
        if self.reasoning_tokens is not None:
            record["reasoningTokens"] = self.reasoning_tokens
        return record


@dataclass(frozen=True)
class Finish:
    """The stream completed; ``reason`` is the provider's finish reason."""

    reason: str


StreamEvent = Union[TextDelta, ReasoningDelta, ToolCallDelta, Usage, Finish]


@dataclass(frozen=True)
class ModelInfo:
    """Who answers: provider name, model name and context window in tokens (``None`` when unknown)."""

    provider: str
    model: str
    context_window: int | None

    def source(self) -> dict[str, str]:
        """The ``source`` of an assistant message written by this model."""
        return {"kind": "model", "provider": self.provider, "model": self.model}


class ModelError(Exception):
    """A model call failed. ``kind`` classifies it; the message says what happened and what to do.

    ``kind`` is one of ``auth`` (key missing from the account or rejected), ``rate_limit``, ``server``
    (5xx or the endpoint cannot be reached), ``bad_request`` (the endpoint refused the request, e.g. too
    long), ``bad_stream`` (the response broke off or was not valid), ``config`` (missing key, unknown model,
    missing extra) and ``cancelled``. ``status`` is the HTTP status when there was one; ``retryable`` says
    whether trying again later may help. Messages never contain an API key.
    """

    def __init__(self, kind: str, message: str, status: int | None = None, retryable: bool = False) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown ModelError kind {kind!r}; expected one of {sorted(ERROR_KINDS)}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        status = f", status={self.status}" if self.status is not None else ""
        return f"ModelError(kind={self.kind!r}, message={self.message!r}{status}, retryable={self.retryable})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.message, self.status, self.retryable))


class ModelProvider(abc.ABC):
    """A model the agent loop can stream from. Subclasses set ``info`` and implement ``stream``."""

    info: ModelInfo

    @abc.abstractmethod
    def stream(self, request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        """Stream the answer to ``request`` (an async generator; see the module docstring)."""

    async def close(self) -> None:
        """Release connections, servers and other resources. Safe to call more than once."""

    async def __aenter__(self) -> ModelProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


@dataclass
class _PendingCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


async def collect(
    stream: AsyncIterator[StreamEvent],
) -> tuple[list[dict[str, Any]], Usage | None, str | None]:
    """Drain ``stream`` into ``(blocks, usage, finish_reason)``.

    Blocks follow stream order: consecutive text (or reasoning) deltas merge into one ``{"type": "text",
    "text"}`` (``{"type": "reasoning", "text"}``) block; each tool call becomes one ``{"type": "tool-call",
    "id", "name", "arguments"}`` block at the place its first delta arrived, ``arguments`` being the raw
    JSON string. ``finish_reason`` is ``None`` only if the stream ended without :class:`Finish` (providers
    raise :class:`ModelError` instead). Errors from the stream propagate.
    """
    slots: list[tuple[str, Any]] = []  # ("text", [pieces]) | ("reasoning", [pieces]) | ("tool", _PendingCall)
    calls: dict[int, _PendingCall] = {}
    usage: Usage | None = None
    finish: str | None = None
    async for event in stream:
        if isinstance(event, (TextDelta, ReasoningDelta)):
            kind = "text" if isinstance(event, TextDelta) else "reasoning"
            if not event.text:
                continue
            if slots and slots[-1][0] == kind:
                slots[-1][1].append(event.text)
            else:
                slots.append((kind, [event.text]))
        elif isinstance(event, ToolCallDelta):
            call = calls.get(event.index)
            if call is None:
                call = calls[event.index] = _PendingCall()
                slots.append(("tool", call))
            if event.id and call.id is None:
                call.id = event.id
            if event.name and call.name is None:
                call.name = event.name
            if event.arguments_delta:
                call.arguments.append(event.arguments_delta)
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, Finish):
            finish = event.reason
    blocks: list[dict[str, Any]] = []
    for position, (kind, value) in enumerate(slots):
        if kind == "tool":
            blocks.append({"type": "tool-call", "id": value.id or f"call_{position}", "name": value.name or "",
                           "arguments": "".join(value.arguments)})
        else:
            blocks.append({"type": kind, "text": "".join(value)})
    return blocks, usage, finish
