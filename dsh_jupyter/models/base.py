"""The model seam: what the agent loop sends to a model, and what streams back.

A provider is anything implementing :class:`ModelProvider`::

    provider.info                                   # ModelInfo(provider, model, context_window)
    async for event in provider.stream(request, cancel=cancel_event):
        ...                                         # TextDelta | ReasoningDelta | ToolCallDelta | Usage | Finish
    await provider.close()

**Request.** :class:`ModelRequest` is provider-neutral: ``system`` is the system prompt (or ``None``) and
``messages`` are session messages as the log stores them (:mod:`dsh_jupyter.session.messages`): dicts with
``role`` ``user`` or ``assistant`` and ``content``, a list of blocks. Assistant content holds ``text``,
``reasoning`` and ``tool-call`` blocks (``{"type": "tool-call", "id", "name", "arguments": <JSON
string>}``); a tool result is a user message holding a ``tool-result`` block (``{"type": "tool-result",
"toolCallId", "content": [blocks], "isError"}``). Other keys (``source``, ``id``, ``envelope``) come
along untouched, so a provider may read where a message came from. Messages are read-only views of the log:
providers never change them. A tool result's content may hold **image blocks** (``{"type": "image",
"artifact", "mediaType", "width", "height", "bytes", "tool"}``); in a request to a model whose
:attr:`ModelInfo.accepts_images` is true each carries ``data``, the image as base64 (the log itself never
holds the bytes), and providers send it as an image; a model without image input never sees an image
block, only a text block describing it. ``tools`` lists :class:`ToolSpec` (name, description, JSON-schema
parameters). ``purpose`` says why the loop asks: ``"turn"`` (a normal step), ``"title"`` (a short session
title) or ``"compaction"`` (a summary of the messages sent). Each provider converts the request to its own
wire format (the chat-completions one lives in :mod:`.openai_compat` and nowhere else).

:func:`content_blocks`, :func:`blocks_of_type` and :func:`is_prompt` read those messages for every provider. The
blocks are typed ``Mapping[str, Any]`` here: they are the log's JSON, read field by field (the shapes dsh
writes are the ``TypedDict`` blocks of :mod:`dsh_jupyter.session.messages`, ``TextBlock``, ``ToolCallBlock``,
``ToolResultBlock``, ``ImageBlock``…); :class:`BlockCollector` builds plain dicts of those shapes, since the
loop hands its tool-call blocks on to code that reads any block.

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

:class:`BlockCollector` folds stream events into content blocks (``reasoning`` / ``text`` / ``tool-call``,
as stored in session messages); :func:`collect` drains a whole stream with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..session.messages import Block, Message

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


#: Roles of request messages (the system prompt travels apart, in :attr:`ModelRequest.system`).
MESSAGE_ROLES: frozenset[str] = frozenset({"user", "assistant"})


def _check_message(message: object, position: int) -> None:
    """Refuse anything that is not a session message, naming the message and what to send instead."""
    where = f"ModelRequest.messages[{position}]"
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a session message dict, got {type(message).__name__}")
    role = message.get("role")
    if role not in MESSAGE_ROLES:
        hint = " (put the system prompt in ModelRequest.system)" if role == "system" else (
            " (a tool result is a user message holding a 'tool-result' block)" if role == "tool" else "")
        raise TypeError(f"{where} has role {role!r}; session messages are 'user' or 'assistant'{hint}")
    content = message.get("content")
    if not isinstance(content, list):  # blocks a provider does not know are skipped, never refused
        raise TypeError(f"{where} must hold its content as a list of blocks "
                        f"(e.g. [{{'type': 'text', 'text': '...'}}]), got {content!r:.80}")


def content_blocks(content: object) -> list[Mapping[str, Any]]:
    """The block objects of a message's (or a tool result's) ``content`` list; anything else is skipped."""
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def blocks_of_type(message: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The ``kind`` blocks of ``message`` (``"text"``, ``"reasoning"``, ``"tool-call"``, ``"tool-result"``)."""
    return [b for b in content_blocks(message.get("content")) if b.get("type") == kind]


def is_prompt(message: Mapping[str, Any]) -> bool:
    """A user message that is not a tool result: a prompt, a steer, a context or a checkpoint."""
    return message.get("role") == "user" and not blocks_of_type(message, "tool-result")


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model: neutral session messages, the system prompt, tools and options (see the module
    docstring)."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    purpose: Purpose = "turn"

    def __post_init__(self) -> None:
        if self.purpose not in ("turn", "title", "compaction"):
            raise ValueError(f"ModelRequest.purpose must be 'turn', 'title' or 'compaction', got {self.purpose!r}")
        if isinstance(self.messages, (str, bytes, Mapping)):
            raise TypeError("ModelRequest.messages must be a list of session message dicts")
        for position, message in enumerate(self.messages):
            _check_message(message, position)
        if self.system is not None and not isinstance(self.system, str):
            raise TypeError(f"ModelRequest.system must be a string or None, got {type(self.system).__name__}")
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
    """Token counts of one model call, and its cost when the provider reports one (in the provider's
    currency, usually US dollars; ``None`` where the provider did not report a figure)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None

    def to_json(self) -> dict[str, int | float]:
        """The session format's ``usage`` object (``inputTokens``, ``outputTokens``, ``cacheReadTokens``...)."""
        record: dict[str, int | float] = {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}
        if self.cache_read_tokens is not None:
            record["cacheReadTokens"] = self.cache_read_tokens
        if self.reasoning_tokens is not None:
            record["reasoningTokens"] = self.reasoning_tokens
        if self.cost is not None:
            record["cost"] = self.cost
        return record


@dataclass(frozen=True)
class Finish:
    """The stream completed; ``reason`` is the provider's finish reason."""

    reason: str


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | Usage | Finish


@dataclass(frozen=True)
class ModelInfo:
    """Who answers: provider name, model name and context window in tokens (``None`` when unknown).

    ``accepts_images`` says whether the model takes image input: the loop then sends image blocks with
    their ``data``; every other model gets a text description of each image instead (:mod:`dsh_jupyter.images`).
    """

    provider: str
    model: str
    context_window: int | None
    accepts_images: bool = False

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


@runtime_checkable
class ModelProvider(Protocol):
    """A model the agent loop can stream from: ``info``, ``stream`` and ``close``.

    Providers may subclass this Protocol to inherit the no-op :meth:`close`.
    """

    info: ModelInfo

    def stream(self, request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        """Stream the answer to ``request`` (an async generator; see the module docstring)."""
        ...

    async def close(self) -> None:
        """Release connections, servers and other resources. Safe to call more than once."""
        return None


@dataclass
class _PendingCall:
    block: Block
    pieces: list[str] = field(default_factory=list)


class BlockCollector:
    """Folds stream events into content blocks, usage and the finish reason, in stream order.

    Consecutive text (or reasoning) deltas merge into one ``{"type": "text", "text"}`` (``{"type":
    "reasoning", "text"}``) block; each tool call becomes one ``{"type": "tool-call", "id", "name",
    "arguments"}`` block at the place its first delta arrived, ``arguments`` being the raw JSON string.
    """

    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self._calls: dict[int, _PendingCall] = {}
        self.usage: Usage | None = None
        self.finish: str | None = None

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, (TextDelta, ReasoningDelta)):
            kind = "text" if isinstance(event, TextDelta) else "reasoning"
            if not event.text:
                return
            last = self._blocks[-1] if self._blocks else None
            if last is not None and last["type"] == kind:
                last["text"] += event.text
            else:
                self._blocks.append({"type": kind, "text": event.text})
        elif isinstance(event, ToolCallDelta):
            call = self._calls.get(event.index)
            if call is None:
                call = self._calls[event.index] = _PendingCall({"type": "tool-call", "id": "", "name": "",
                                                                "arguments": ""})
                self._blocks.append(call.block)
            if event.id and not call.block["id"]:
                call.block["id"] = event.id
            if event.name and not call.block["name"]:
                call.block["name"] = event.name
            if event.arguments_delta:
                call.pieces.append(event.arguments_delta)
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish = event.reason

    def blocks(self, id_prefix: str = "call_") -> list[Block]:
        """The blocks so far; a tool call the model gave no id gets ``<id_prefix><position>``."""
        for position, call in enumerate(self._calls.values()):
            call.block["arguments"] = "".join(call.pieces)
            if not call.block["id"]:
                call.block["id"] = f"{id_prefix}{position}"
        return [dict(block) for block in self._blocks]


async def collect(stream: AsyncIterator[StreamEvent]) -> tuple[list[Block], Usage | None, str | None]:
    """Drain ``stream`` into ``(blocks, usage, finish_reason)`` with a :class:`BlockCollector`.

    ``finish_reason`` is ``None`` only if the stream ended without :class:`Finish` (providers raise
    :class:`ModelError` instead). Errors from the stream propagate.
    """
    collector = BlockCollector()
    async for event in stream:
        collector.add(event)
    return collector.blocks(), collector.usage, collector.finish
