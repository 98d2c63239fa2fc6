"""Chat-completions providers: DeepSeek by default, any OpenAI-compatible endpoint by URL.

:class:`OpenAICompatibleProvider` streams through the official ``openai`` SDK, which is imported only
when a request is made (``import dsh_jupyter.models`` stays cheap and works without a key).

- **Endpoints.** DeepSeek (``https://api.deepseek.com``, ``$DEEPSEEK_API_KEY``, models
  ``deepseek-v4-flash`` — the default —, ``deepseek-chat``, ``deepseek-reasoner``), OpenAI
  (``https://api.openai.com/v1``, ``$OPENAI_API_KEY``) or any server speaking the same API: vLLM,
  Ollama (``http://127.0.0.1:11434/v1``), llama.cpp's server. ``api_key_env=None`` (and no ``api_key``)
  means a keyless local server.
- **Wire format.** :func:`chat_messages` and :func:`chat_tool` turn the neutral :class:`ModelRequest`
  (session messages and :class:`ToolSpec`) into chat-completions ``messages`` and ``tools``; this is the
  only place that shape is built. Text blocks of a message are joined with a newline; an assistant message
  that only calls tools has ``content: null`` (``""`` for servers such as llama.cpp's that refuse null,
  ``null_tool_call_content=False``); each ``tool-result`` block becomes one ``tool`` message; reasoning
  is sent back as ``reasoning_content`` only with ``reasoning_replay`` (on by default for DeepSeek, whose
  thinking mode needs the reasoning of the tool-calling steps since the last user prompt), never else.
  Chat-completions ``tool`` messages hold text only, so an image block of a tool result (with ``data``:
  only models that accept images get those, see :func:`~.catalog.accepts_images`) becomes an
  ``image_url`` part of one ``user`` message placed right after the tool messages of that step, whose
  text marks each image as the output of its tool call; the tool message says so too.
- **Stream.** Text deltas, tool-call deltas (index, id, name, argument pieces), reasoning from DeepSeek's
  ``reasoning_content`` (or the ``reasoning`` field some servers use), usage from the final chunk
  (requested with ``stream_options={"include_usage": true}``) and the finish reason.
- **Retries.** The SDK's own retries are off (``max_retries=0``); this class retries HTTP 408/409/429/5xx
  and connection failures up to ``max_retries`` times with exponential backoff (``backoff × 2**attempt``
  seconds), or the server's ``Retry-After`` / ``retry-after-ms`` when given, capped at
  ``max_retry_after``. 401/402/403/404 and other 4xx are not retried. Once the stream has started
  nothing is retried: a broken stream ends with ``ModelError(kind="bad_stream")``.
- **Cancellation.** Setting the ``cancel`` event interrupts the request, the backoff sleep or the
  stream read at once, closes the HTTP response and raises ``ModelError(kind="cancelled")``.
- **Secrets.** The API key is read from the environment at each request and lives only inside the SDK
  client. It never appears in a repr, an error message or a log line (server text quoted in errors is
  redacted).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import importlib
import json
import logging
import math
import os
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ..images import describe_image, image_summary, is_image_block
from ..session.messages import blocks_text
from .base import (
    Finish,
    ModelError,
    ModelInfo,
    ModelProvider,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    blocks_of_type,
    content_blocks,
    is_prompt,
)
from .catalog import DEEPSEEK_BASE_URL, DEEPSEEK_DEFAULT_MODEL, DEEPSEEK_KEY_ENV
from .facts import ModelFacts, Prices, model_facts

if TYPE_CHECKING:
    from openai import AsyncOpenAI

logger = logging.getLogger("dsh_jupyter.models")

#: How to get out of a model problem; appended to config and auth errors.
SWITCH_HINT = "pick another model with --model (e.g. --model offline, which needs no key; `%dsh models` lists them)"

#: Placeholder key sent to keyless servers (the SDK insists on some value).
KEYLESS_PLACEHOLDER = "no-key-required"

#: Tasks started in the background (closing a replaced client), kept referenced until they finish.
_BACKGROUND: set[asyncio.Future[None]] = set()

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_T = TypeVar("_T")


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), else ``None``."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    value = lowered.get("retry-after")
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return None


def retry_delay(attempt: int, backoff: float, retry_after: float | None, cap: float) -> float:
    """Seconds to sleep before retry number ``attempt + 1``: the server's ``Retry-After`` when given,
    else ``backoff × 2**attempt``; never more than ``cap``."""
    delay = retry_after if retry_after is not None else backoff * (2**attempt)
    return max(0.0, min(cap, delay))


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` and any ``Bearer <token>`` replaced by ``***``."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return re.sub(r"(?i)(bearer\s+)[^\s\"',;]+", r"\1***", text)


# -- the chat-completions wire format ---------------------------------------------------------------------

ChatMessage = dict[str, Any]


def chat_tool(tool: ToolSpec) -> dict[str, Any]:
    """The chat-completions ``tools`` entry of ``tool``."""
    return {"type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)}}


def chat_messages(request: ModelRequest, *, reasoning_replay: bool = False,
                  null_tool_call_content: bool = True) -> list[ChatMessage]:
    """The chat-completions ``messages`` for ``request`` (see the module docstring).

    Messages that carry nothing the format can hold (no text, no tool call, no tool result) are left out.
    """
    messages = request.messages
    out: list[ChatMessage] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    last_prompt = max((i for i, m in enumerate(messages) if is_prompt(m)), default=-1)
    images: list[dict[str, Any]] = []  # image parts of the tool results since the last non-tool message

    def flush_images() -> None:
        if images:
            out.append({"role": "user", "content": list(images)})
            images.clear()

    for position, message in enumerate(messages):
        blocks = content_blocks(message.get("content"))
        if message.get("role") == "user":
            for result in blocks_of_type(message, "tool-result"):
                out.append({"role": "tool", "tool_call_id": result.get("toolCallId"),
                            "content": _tool_text(result, images)})
            text = blocks_text(blocks)
            if text:
                flush_images()
                out.append({"role": "user", "content": text})
            continue
        flush_images()
        text = blocks_text(blocks)
        calls = [{"id": b.get("id"), "type": "function",
                  "function": {"name": b.get("name"), "arguments": b.get("arguments") or "{}"}}
                 for b in blocks_of_type(message, "tool-call")]
        if not text and not calls:
            continue
        entry: ChatMessage = {"role": "assistant", "content": text or (None if null_tool_call_content else "")}
        if calls:
            entry["tool_calls"] = calls
            if reasoning_replay and position > last_prompt:
                reasoning = "".join(str(b.get("text", "")) for b in blocks_of_type(message, "reasoning"))
                if reasoning:
                    entry["reasoning_content"] = reasoning
        out.append(entry)
    flush_images()
    return out


def _tool_text(result: Mapping[str, Any], images: list[dict[str, Any]]) -> str:
    """The text of a tool message; its images (blocks with ``data``) are added to ``images`` as parts."""
    parts: list[str] = []
    call_id = result.get("toolCallId")
    for block in content_blocks(result.get("content")):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif is_image_block(block):
            data, mime = block.get("data"), block.get("mediaType")
            if not isinstance(data, str) or not data or not isinstance(mime, str):
                parts.append(describe_image(block))
                continue
            marker = f"image output of tool call {call_id}"
            tool = block.get("tool")
            if isinstance(tool, str) and tool:
                marker += f" ({tool})"
            parts.append(f"[{image_summary(block)}: sent in the next message as the {marker}.]")
            images.append({"type": "text", "text": f"The {marker}: {image_summary(block)}."})
            images.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}})
    return "\n".join(parts)


class _Secret:
    """Holds a key so that neither ``repr`` nor ``vars()`` printing shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class _CancelWatch:
    """Races awaitables against an optional cancel event; owns the waiter task."""

    def __init__(self, event: asyncio.Event | None) -> None:
        self.event = event
        self._waiter: asyncio.Task[Any] | None = None

    def check(self, what: str) -> None:
        if self.event is not None and self.event.is_set():
            raise ModelError("cancelled", f"the model request was cancelled {what}")

    async def race(self, awaitable: Awaitable[_T], what: str) -> _T:
        if self.event is None:
            return await awaitable
        if self.event.is_set():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started; closing it avoids a "never awaited" warning
            self.check(what)
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self.event.wait())
        task = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({task, self._waiter}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            raise
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(BaseException):  # the interrupted read or sleep; its error does not matter now
            await task
        raise ModelError("cancelled", f"the model request was cancelled {what}")

    def close(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()


def check_base_url(base_url: object) -> None:
    """Refuse a ``base_url`` that is not an http(s) URL, saying what one looks like."""
    if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https") \
            or not urlsplit(base_url).hostname:
        raise ModelError("config", f"base_url must be an http(s) URL such as {DEEPSEEK_BASE_URL!r}, got {base_url!r}")


def _default_provider_name(base_url: str) -> str:
    host = (urlsplit(base_url).hostname or "").lower()
    if host.endswith("deepseek.com"):
        return "deepseek"
    if host.endswith("openai.com"):
        return "openai"
    if host in ("127.0.0.1", "localhost", "::1"):
        return "local-openai-compatible"
    return "openai-compatible"


class OpenAICompatibleProvider(ModelProvider):
    """Streams chat completions from DeepSeek or any OpenAI-compatible endpoint (see the module docstring).

    ``context_window`` overrides the built-in table (:mod:`dsh_jupyter.models.catalog`); ``timeout`` is the
    SDK timeout in seconds (connect and each read); ``extra_body`` adds endpoint-specific request fields;
    ``include_usage=False`` leaves out ``stream_options`` for servers that refuse it. ``reasoning_replay``
    sends reasoning back within tool-using steps (default: only for the ``deepseek`` provider);
    ``null_tool_call_content=False`` writes ``""`` for the content of a tools-only assistant message.
    ``accepts_images`` says whether the model takes image input (default: :func:`~.catalog.accepts_images`
    by model name; unknown names get text descriptions).
    ``on_retry(error, delay_seconds, retry_number)`` is called before each retry sleep (to show "retrying..." in a UI);
    retries are also logged on the ``dsh_jupyter.models`` logger.
    """

    def __init__(
        self,
        base_url: str = DEEPSEEK_BASE_URL,
        model: str = DEEPSEEK_DEFAULT_MODEL,
        *,
        api_key_env: str | None = DEEPSEEK_KEY_ENV,
        api_key: str | None = None,
        context_window: int | None = None,
        provider_name: str | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_retry_after: float = 30.0,
        timeout: float = 180.0,
        extra_body: Mapping[str, Any] | None = None,
        include_usage: bool = True,
        on_retry: Callable[[ModelError, float, int], None] | None = None,
        reasoning_replay: bool | None = None,
        null_tool_call_content: bool = True,
        accepts_images: bool | None = None,
        prices: Prices | None = None,
    ) -> None:
        check_base_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise ModelError("config", f"model must be a non-empty model name, got {model!r}")
        if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env.strip()):
            raise ModelError("config", "api_key_env must name an environment variable (or be None for keyless "
                                       f"servers), got {api_key_env!r}")
        if context_window is not None and (isinstance(context_window, bool) or not isinstance(context_window, int)
                                           or context_window <= 0):
            raise ModelError("config", f"context_window must be a positive number of tokens, got {context_window!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ModelError("config", f"max_retries must be a non-negative integer, got {max_retries!r}")
        for name, value in (("backoff", backoff), ("max_retry_after", max_retry_after), ("timeout", timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
                raise ModelError("config", f"{name} must be a non-negative number of seconds, got {value!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model.strip()
        self.api_key_env = api_key_env
        self._api_key = _Secret(api_key) if api_key else None
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_retry_after = float(max_retry_after)
        self.timeout = float(timeout)
        self.extra_body = dict(extra_body) if extra_body else None
        self.include_usage = include_usage
        self.on_retry = on_retry
        provider = provider_name or _default_provider_name(self.base_url)
        facts = self._facts(provider)
        window = context_window if context_window is not None else facts.context_window
        images = facts.accepts_images if accepts_images is None else bool(accepts_images)
        self.info = ModelInfo(provider, self.model, window, images)
        #: What one token costs (``None``: unknown, so no cost is computed); ``prices=`` overrides the facts.
        self.prices = prices if prices is not None else facts.prices
        self.reasoning_replay = self.info.provider == "deepseek" if reasoning_replay is None else reasoning_replay
        self.null_tool_call_content = null_tool_call_content
        self._client: AsyncOpenAI | None = None
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._client_key: str | None = None

    def __repr__(self) -> str:
        key = "explicit key" if self._api_key else (f"key from ${self.api_key_env}" if self.api_key_env else "keyless")
        return (f"OpenAICompatibleProvider(provider={self.info.provider!r}, model={self.model!r}, "
                f"base_url={self.base_url!r}, {key}, context_window={self.info.context_window})")

    @property
    def where(self) -> str:
        """Who answers, as errors name it: ``deepseek (https://api.deepseek.com)``."""
        return f"{self.info.provider} ({self.base_url})"

    def _facts(self, provider: str) -> ModelFacts:
        """What is known of this model (window, images, prices) before any option overrides it."""
        return model_facts(self.model, provider)

    # -- keys and client -------------------------------------------------------------------------------

    @property
    def needs_key(self) -> bool:
        return self._api_key is not None or self.api_key_env is not None

    def key_present(self, env: Mapping[str, str] | None = None) -> bool:
        """True when a request would have a key (or the endpoint is keyless)."""
        if self._api_key is not None or self.api_key_env is None:
            return True
        return bool((env if env is not None else os.environ).get(self.api_key_env, "").strip())

    def _key_source(self) -> str:
        if self._api_key is not None:
            return "the API key passed to the provider"
        if self.api_key_env is not None:
            return f"the API key in ${self.api_key_env}"
        return "the request without an API key (api_key_env=None)"

    def _resolve_key(self) -> str:
        if self._api_key is not None:
            return self._api_key.get()
        if self.api_key_env is None:
            return KEYLESS_PLACEHOLDER
        value = os.environ.get(self.api_key_env, "").strip()
        if not value:
            raise ModelError(
                "config",
                f"${self.api_key_env} is not set, so the {self.info.provider} model {self.model!r} cannot be "
                f"used. Set it (export {self.api_key_env}=...) or {SWITCH_HINT}.",
            )
        return value

    async def _client_for(self, key: str, watch: _CancelWatch) -> AsyncOpenAI:
        """The SDK client for this event loop and key (made in a worker thread: loading the SDK and its
        TLS context takes long enough to stall a notebook's event loop)."""
        loop = asyncio.get_running_loop()
        same_loop = self._client_loop is not None and self._client_loop() is loop
        fingerprint = hashlib.sha256(key.encode()).hexdigest()
        if self._client is not None and same_loop and self._client_key == fingerprint:
            return self._client
        client = await watch.race(asyncio.to_thread(self._make_client, key), "while loading the openai SDK")
        if self._client is not None and same_loop:
            # the key changed: the old client's connections belong to this loop; close them in the background
            closing = asyncio.ensure_future(self._client.close())
            _BACKGROUND.add(closing)
            closing.add_done_callback(_BACKGROUND.discard)
        self._client = client
        self._client_loop = weakref.ref(loop)
        self._client_key = fingerprint  # a digest, so that vars(provider) shows no key
        return client

    def _make_client(self, key: str) -> AsyncOpenAI:
        _load_sdk()
        from openai import AsyncOpenAI

        return AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout)

    async def close(self) -> None:
        client, self._client, self._client_key = self._client, None, None
        loop_ref, self._client_loop = self._client_loop, None
        if client is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - close() is a coroutine, so a loop is running
            return
        if loop_ref is not None and loop_ref() is running:
            await client.close()

    # -- request ---------------------------------------------------------------------------------------

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments given to ``chat.completions.create`` for ``request``."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request, reasoning_replay=self.reasoning_replay,
                                      null_tool_call_content=self.null_tool_call_content),
            "stream": True,
        }
        if self.include_usage:
            params["stream_options"] = {"include_usage": True}
        if request.tools:
            params["tools"] = [chat_tool(tool) for tool in request.tools]
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def stream(self, request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        """Stream ``request`` (see the module docstring for retries, errors and cancellation)."""
        watch = _CancelWatch(cancel)
        try:
            watch.check("before it was sent")
            key = self._resolve_key()
            create = await self._creator(key, watch)
            response = await self._open(create, self.request_params(request), key, watch)
            try:
                async for event in self._read(response, key, watch):
                    yield event
            finally:
                with contextlib.suppress(Exception):  # closing a broken connection may fail again
                    await self._close_response(response)
        finally:
            watch.close()

    async def _creator(self, key: str, watch: _CancelWatch) -> Callable[..., Awaitable[Any]]:
        """What opens a streamed completion from request parameters (the SDK client's ``create``)."""
        client = await self._client_for(key, watch)
        return client.chat.completions.create

    async def _close_response(self, response: Any) -> None:
        await response.close()

    async def _open(self, create: Callable[..., Awaitable[Any]], params: dict[str, Any], key: str,
                    watch: _CancelWatch) -> Any:
        attempt = 0
        while True:
            try:
                return await watch.race(create(**params), "while waiting for the endpoint")
            except ModelError:
                raise
            except Exception as exc:  # SDK and transport errors become ModelError below
                error = self._map_error(exc, key)
                if not error.retryable or attempt >= self.max_retries:
                    if error.retryable and attempt:
                        error = ModelError(error.kind, f"{error.message} (gave up after {attempt + 1} attempts)",
                                           error.status, retryable=True)
                    raise error from None
                headers = getattr(getattr(exc, "response", None), "headers", None)
                delay = retry_delay(attempt, self.backoff, parse_retry_after(headers), self.max_retry_after)
                logger.warning("%s: %s; retrying in %.2f s (attempt %d of %d)", self.info.provider,
                               error.message, delay, attempt + 2, self.max_retries + 1)
                attempt += 1
                if self.on_retry is not None:
                    self.on_retry(error, delay, attempt)
                await watch.race(asyncio.sleep(delay), "while waiting to retry")

    async def _read(self, response: Any, key: str, watch: _CancelWatch) -> AsyncIterator[StreamEvent]:
        tool_slots: dict[Any, int] = {}
        seen: set[int] = set()
        usage: Usage | None = None
        finish: str | None = None
        iterator = response.__aiter__()
        while True:
            try:
                chunk = await watch.race(iterator.__anext__(), "while the answer was streaming")
            except StopAsyncIteration:
                break
            except ModelError:
                raise
            except Exception as exc:  # a broken stream: the partial answer cannot be completed
                raise self._stream_error(exc, key) from None
            chunk_usage = getattr(chunk, "usage", None)
            if chunk_usage is not None:
                usage = _usage_from(chunk_usage)
            for choice in getattr(chunk, "choices", None) or ():
                for event in self._choice_events(choice, tool_slots, seen):
                    yield event
                if getattr(choice, "finish_reason", None):
                    finish = str(choice.finish_reason)
        if finish is None:
            raise ModelError(
                "bad_stream",
                f"the stream from {self.where} ended before the model finished its "
                "answer (no finish reason); the answer is incomplete. Try again.",
                retryable=True,
            )
        if usage is not None:
            yield usage if self.prices is None else self.prices.priced(usage)
        yield Finish(finish)

    @staticmethod
    def _choice_events(choice: Any, tool_slots: dict[Any, int], seen: set[int]) -> Iterator[StreamEvent]:
        delta = getattr(choice, "delta", None)
        if delta is None:
            return
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(reasoning, str) and reasoning:
            yield ReasoningDelta(reasoning)
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            yield TextDelta(content)
        for position, call in enumerate(getattr(delta, "tool_calls", None) or ()):
            raw_index = getattr(call, "index", None)
            slot_key: Any = raw_index if isinstance(raw_index, int) else (getattr(call, "id", None) or position)
            if slot_key not in tool_slots:
                tool_slots[slot_key] = raw_index if isinstance(raw_index, int) else len(tool_slots)
            index = tool_slots[slot_key]
            function = getattr(call, "function", None)
            arguments = getattr(function, "arguments", None) or ""
            if index in seen:
                yield ToolCallDelta(index, None, None, arguments)
            else:
                seen.add(index)
                yield ToolCallDelta(index, getattr(call, "id", None), getattr(function, "name", None), arguments)

    # -- errors ----------------------------------------------------------------------------------------

    def _detail(self, exc: BaseException, key: str) -> str:
        body = getattr(exc, "body", None)
        message: Any = None
        if isinstance(body, Mapping):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, Mapping) else inner
        if not isinstance(message, str) or not message.strip():
            message = getattr(exc, "message", None) or str(exc)
        text = " ".join(redact(str(message), key).split())
        return text if len(text) <= 300 else text[:297] + "..."

    def _map_error(self, exc: BaseException, key: str) -> ModelError:
        import openai

        where = self.where
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = self._detail(exc, key)
            if status == 401:
                fix = (f"set a valid key in ${self.api_key_env}" if self.api_key_env and self._api_key is None
                       else "pass a valid key")
                return ModelError("auth", f"{where} rejected {self._key_source()} (HTTP 401: {detail}); "
                                          f"{fix} or {SWITCH_HINT}.", status)
            if status == 402:
                return ModelError("auth", f"{where} refused the request for billing reasons (HTTP 402: {detail}); "
                                          f"top up the account or {SWITCH_HINT}.", status)
            if status == 403:
                return ModelError("auth", f"{where} denied access with {self._key_source()} (HTTP 403: {detail}); "
                                          f"check the key's permissions for model {self.model!r} or {SWITCH_HINT}.",
                                  status)
            if status == 404:
                return ModelError("config", f"{where} has no model {self.model!r} or no chat-completions endpoint "
                                            f"(HTTP 404: {detail}); check the model name and base_url, or "
                                            f"{SWITCH_HINT}.", status)
            if status == 429:
                wait = parse_retry_after(getattr(getattr(exc, "response", None), "headers", None))
                when = (f"it asks to wait {wait:.0f} s; try again then" if wait is not None and wait >= 1
                        else "wait a minute and try again")
                return ModelError("rate_limit", f"{where} is rate-limiting requests (HTTP 429: {detail}); {when}.",
                                  status, retryable=True)
            if status in _RETRYABLE_STATUS or status >= 500:
                return ModelError("server", f"{where} failed with HTTP {status} ({detail}); try again later.",
                                  status, retryable=status in _RETRYABLE_STATUS or status >= 500)
            return ModelError("bad_request", f"{where} refused the request (HTTP {status}: {detail}). If the "
                                             "conversation is too long, compact it or start a new session.", status)
        if isinstance(exc, openai.APITimeoutError):
            return ModelError("server", f"{where} did not answer within {self.timeout:g} s; try again later.",
                              retryable=True)
        if isinstance(exc, openai.APIConnectionError):
            reason = _connection_failure(exc, key)
            return ModelError("server", f"could not reach {where}: {reason}. Check the network and base_url, "
                                        "then try again.", retryable=True)
        if isinstance(exc, openai.APIError):
            return ModelError("server", f"{where} reported an error: {self._detail(exc, key)}; try again later.",
                              retryable=True)
        return ModelError("bad_stream", f"{where} sent a response that could not be read "
                                        f"({type(exc).__name__}: {redact(str(exc), key)}); try again.")

    def _stream_error(self, exc: BaseException, key: str) -> ModelError:
        import openai

        where = self.where
        if isinstance(exc, json.JSONDecodeError):
            return ModelError("bad_stream", f"{where} sent a stream chunk that is not valid JSON ({exc.msg}); "
                                            "the answer is incomplete. Try again.", retryable=True)
        if isinstance(exc, openai.APITimeoutError):
            return ModelError("bad_stream", f"the stream from {where} stalled for more than {self.timeout:g} s "
                                            "mid-answer; the answer is incomplete. Try again.", retryable=True)
        if isinstance(exc, openai.APIConnectionError):
            reason = _connection_failure(exc, key)
            return ModelError("bad_stream", f"the connection to {where} broke off mid-answer ({reason}); the "
                                            "answer is incomplete. Try again.", retryable=True)
        if isinstance(exc, openai.APIStatusError):
            return self._map_error(exc, key)
        if isinstance(exc, openai.APIError):
            return ModelError("bad_stream", f"{where} reported an error mid-answer: {self._detail(exc, key)}; "
                                            "the answer is incomplete. Try again.", retryable=True)
        return ModelError("bad_stream", f"the stream from {where} could not be read ({type(exc).__name__}: "
                                        f"{redact(str(exc), key)}); the answer is incomplete. Try again.",
                          retryable=True)


def _connection_failure(exc: BaseException, key: str) -> str:
    """What broke a connection, in the words of the error under the SDK's own (a refused connection, a reset, a
    name that does not resolve), with the API key blanked out."""
    cause = exc.__cause__ or exc.__context__
    return redact(f"{type(cause).__name__}: {cause}" if cause else str(exc), key)


def _load_sdk() -> None:
    """Import the SDK parts a streamed chat completion needs."""
    try:
        for module in ("openai", "openai.resources.chat.completions", "openai.types.chat.chat_completion_chunk"):
            importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - openai is a hard dependency
        raise ModelError("config", f"the 'openai' package is needed for OpenAI-compatible models: "
                                   f"pip install 'openai>=1.40' ({exc})") from None


def _usage_from(raw: Any) -> Usage:
    def number(value: Any) -> int | None:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    prompt_details = getattr(raw, "prompt_tokens_details", None)
    completion_details = getattr(raw, "completion_tokens_details", None)
    cached = number(getattr(prompt_details, "cached_tokens", None))
    if cached is None:  # DeepSeek reports its context-cache hits apart
        cached = number(getattr(raw, "prompt_cache_hit_tokens", None))
    cost = getattr(raw, "cost", None)  # gateways such as OpenRouter report what the call cost
    return Usage(
        input_tokens=number(getattr(raw, "prompt_tokens", None)) or 0,
        output_tokens=number(getattr(raw, "completion_tokens", None)) or 0,
        cache_read_tokens=cached,
        reasoning_tokens=number(getattr(completion_details, "reasoning_tokens", None)),
        cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0 else None,
    )


def deepseek(model: str = DEEPSEEK_DEFAULT_MODEL, **options: Any) -> OpenAICompatibleProvider:
    """A DeepSeek provider (``$DEEPSEEK_API_KEY``, ``https://api.deepseek.com``)."""
    options.setdefault("provider_name", "deepseek")
    options.setdefault("api_key_env", DEEPSEEK_KEY_ENV)
    return OpenAICompatibleProvider(options.pop("base_url", None) or DEEPSEEK_BASE_URL, model, **options)
