"""Where completions come from: fill-in-the-middle endpoints, the chat fallback and the offline model.

Fill-in-the-middle ("FIM") sends the code before the cursor and the code after it, and the model writes what
goes between: DeepSeek's ``/beta/completions`` (``prompt`` + ``suffix``), llama.cpp's ``/infill``
(``input_prefix`` + ``input_suffix``, the cells above as ``input_extra``) and Ollama's ``/api/generate``
(``prompt`` + ``suffix``). The request builders are pure functions (tests and the benchmark call them); the
:class:`FimBackend` streams their answers with httpx. A model without FIM (OpenAI, LiteLLM, the local
model...) is asked in chat style (:func:`chat_request`), and so is every ``%%dsh`` cell: prose is a chat
model's job, and the instructions forbid code.

Every backend streams text pieces and, at the end, a :class:`~dsh_jupyter.models.base.Usage` when the model
reports one.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..models.base import ModelError, ModelRequest, TextDelta, Usage
from ..models.catalog import DEEPSEEK_BASE_URL, DEEPSEEK_KEY_ENV, OLLAMA_BASE_URL
from .context import CompletionContext
from .offline import complete_code, complete_prose

if TYPE_CHECKING:
    from ..models.base import ModelProvider

FimKind = Literal["deepseek", "llama.cpp", "ollama"]
FIM_KINDS: tuple[FimKind, ...] = ("deepseek", "llama.cpp", "ollama")

#: One piece of a completion as it streams: text, or the usage at the end.
Piece = str | Usage

CODE_SYSTEM = ("You complete code in a Jupyter notebook cell. Answer with only the text to insert at the cursor "
               "<CURSOR>: no explanation, no Markdown fences, nothing that repeats the code around it. "
               "Keep it short (one line or one small block). If nothing useful fits, answer with nothing.")
PROSE_SYSTEM = ("You complete a prompt a user is writing to a data-science assistant in a Jupyter notebook. "
                "Continue their text at the cursor <CURSOR> with a few words of plain prose (at most one "
                "sentence). Never write code, commands or Markdown fences. Answer with only the words to "
                "insert.")


@dataclass(frozen=True)
class HttpRequest:
    """One request to a model server: POST ``url`` with the JSON ``body`` (``headers`` without the key)."""

    url: str
    body: dict[str, Any]
    stream_format: Literal["sse", "ndjson"]


class Backend(Protocol):
    """Streams the completion of one context."""

    name: str

    def stream(self, context: CompletionContext, max_tokens: int) -> AsyncGenerator[Piece, None]: ...

    async def close(self) -> None: ...


def header_comment(context: CompletionContext) -> str:
    """The cells above and the variables, as the start of a FIM prompt (the cells are already code/comments)."""
    parts: list[str] = []
    if context.variables:
        hash_ = "//" if context.language.lower() in ("javascript", "typescript", "c", "c++", "java") else "#"
        parts.append(f"{hash_} Variables in the kernel: " + ", ".join(
            f"{v.name} ({v.type})" if v.type else v.name for v in context.variables))
    if context.above:
        parts.append(context.above)
    return "\n\n".join(parts) + ("\n\n" if parts else "")


def deepseek_fim_request(context: CompletionContext, model: str, max_tokens: int,
                         base_url: str = DEEPSEEK_BASE_URL) -> HttpRequest:
    root = base_url.rstrip("/").removesuffix("/v1").removesuffix("/beta")
    return HttpRequest(f"{root}/beta/completions", {
        "model": model, "prompt": header_comment(context) + context.prefix, "suffix": context.suffix,
        "max_tokens": max_tokens, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True}}, "sse")


def llamacpp_infill_request(context: CompletionContext, max_tokens: int, base_url: str) -> HttpRequest:
    extra = [{"filename": "notebook cells above", "text": header_comment(context)}] if (
        context.above or context.variables) else []
    return HttpRequest(f"{base_url.rstrip('/').removesuffix('/v1')}/infill", {
        "input_prefix": context.prefix, "input_suffix": context.suffix, "input_extra": extra,
        "n_predict": max_tokens, "temperature": 0, "stream": True, "cache_prompt": True}, "sse")


def ollama_generate_request(context: CompletionContext, model: str, max_tokens: int,
                            base_url: str = OLLAMA_BASE_URL) -> HttpRequest:
    return HttpRequest(f"{base_url.rstrip('/').removesuffix('/v1')}/api/generate", {
        "model": model, "prompt": header_comment(context) + context.prefix, "suffix": context.suffix,
        "stream": True, "options": {"num_predict": max_tokens, "temperature": 0}}, "ndjson")


def chat_request(context: CompletionContext, max_tokens: int) -> ModelRequest:
    """The chat-style request: the context in one user message with the cursor marked."""
    sections: list[str] = []
    if context.variables:
        sections.append("Variables in the kernel:\n" + context.variables_text())
    if context.above:
        sections.append("Cells above:\n" + context.above)
    what = "The prompt being written" if context.mode == "prose" else f"The cell being edited ({context.language})"
    sections.append(f"{what}, with the cursor at <CURSOR>:\n{context.prefix}<CURSOR>{context.suffix}")
    return ModelRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "\n\n".join(sections)}]}],
                        system=PROSE_SYSTEM if context.mode == "prose" else CODE_SYSTEM,
                        max_tokens=max_tokens, temperature=0.0)


def fim_pieces(event: Mapping[str, Any]) -> list[Piece]:
    """The text and usage in one streamed event of any of the three FIM APIs (llama.cpp ``content``/``stop``,
    Ollama ``response``/``done``, DeepSeek ``choices[0].text``/``usage``)."""
    pieces: list[Piece] = []
    choices = event.get("choices")
    for key in ("content", "response"):
        if isinstance(event.get(key), str) and event[key]:
            pieces.append(event[key])
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        text = choices[0].get("text")
        if isinstance(text, str) and text:
            pieces.append(text)
    usage = event.get("usage")
    if isinstance(usage, Mapping) and isinstance(usage.get("prompt_tokens"), int):
        pieces.append(Usage(int(usage["prompt_tokens"]), int(usage.get("completion_tokens") or 0)))
    elif event.get("stop") and isinstance(event.get("tokens_evaluated"), int):
        pieces.append(Usage(int(event["tokens_evaluated"]), int(event.get("tokens_predicted") or 0)))
    elif event.get("done") and isinstance(event.get("prompt_eval_count"), int):
        pieces.append(Usage(int(event["prompt_eval_count"]), int(event.get("eval_count") or 0)))
    return pieces


class FimBackend:
    """A fill-in-the-middle endpoint (``kind``), streamed with httpx; prose goes to ``chat``."""

    def __init__(self, kind: FimKind, *, model: str, base_url: str | None, api_key_env: str | None,
                 chat: Backend, timeout: float = 10.0) -> None:
        if kind == "llama.cpp" and not base_url:
            raise ModelError("config", "llama.cpp fill-in-the-middle needs the server's address: set "
                                       "c.DshCompletion.base_url, e.g. http://127.0.0.1:8080")
        self.kind = kind
        self.name = f"fim:{kind}"
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env or (DEEPSEEK_KEY_ENV if kind == "deepseek" else None)
        self.chat = chat
        self.timeout = timeout
        self._client: Any = None

    def request(self, context: CompletionContext, max_tokens: int) -> HttpRequest:
        if self.kind == "deepseek":
            return deepseek_fim_request(context, self.model, max_tokens, self.base_url or DEEPSEEK_BASE_URL)
        if self.kind == "ollama":
            return ollama_generate_request(context, self.model, max_tokens, self.base_url or OLLAMA_BASE_URL)
        assert self.base_url is not None
        return llamacpp_infill_request(context, max_tokens, self.base_url)

    def _headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise ModelError("auth", f"${self.api_key_env} is not set in the Jupyter server's environment; set it "
                                     "and restart the server, or pick another c.DshCompletion.model")
        return {"Authorization": f"Bearer {key}"}

    async def stream(self, context: CompletionContext, max_tokens: int) -> AsyncGenerator[Piece, None]:
        if context.mode == "prose":
            async for piece in self.chat.stream(context, max_tokens):
                yield piece
            return
        import httpx

        request = self.request(context, max_tokens)
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 5.0)))
        try:
            async with self._client.stream("POST", request.url, json=request.body, headers=self._headers()) as reply:
                if reply.status_code >= 400:
                    detail = (await reply.aread()).decode("utf-8", errors="replace")[:300]
                    raise ModelError("server", f"the {self.kind} completion endpoint {request.url} answered "
                                             f"{reply.status_code}: {detail}")
                async for raw in reply.aiter_lines():
                    data = raw.strip()
                    if request.stream_format == "sse":
                        if not data.startswith("data:"):
                            continue
                        data = data[5:].strip()
                        if data == "[DONE]":
                            break
                    if not data:
                        continue
                    try:
                        event = json.loads(data)
                    except ValueError:
                        continue
                    for piece in fim_pieces(event) if isinstance(event, Mapping) else ():
                        yield piece
        except httpx.HTTPError as exc:
            raise ModelError("server", f"the {self.kind} completion endpoint {request.url} could not be "
                                        f"reached: {exc}") from exc

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
        await self.chat.close()


class ChatBackend:
    """The chat-style fallback through a configured :class:`~dsh_jupyter.models.base.ModelProvider`."""

    def __init__(self, provider: ModelProvider) -> None:
        self.provider = provider
        self.name = f"chat:{provider.info.provider}"

    async def stream(self, context: CompletionContext, max_tokens: int) -> AsyncGenerator[Piece, None]:
        fenced = False
        async for event in self.provider.stream(chat_request(context, max_tokens)):
            if isinstance(event, TextDelta) and event.text and not fenced:
                text = event.text
                if "```" in text:  # a completion is never a fenced block: stop at a fence
                    text, fenced = text.split("```", 1)[0], True
                if text:
                    yield text
            elif isinstance(event, Usage):
                yield event

    async def close(self) -> None:
        await self.provider.close()


class OfflineBackend:
    """The offline model's deterministic completion, streamed word by word.

    ``delay`` seconds pass before the first word and ``word_seconds`` between words, like a model thinking
    and streaming (0 by default; demos and tests set them to show streaming and cancelling)."""

    name = "offline"

    def __init__(self, *, delay: float = 0.0, word_seconds: float = 0.0) -> None:
        self.delay = delay
        self.word_seconds = word_seconds

    async def stream(self, context: CompletionContext, max_tokens: int) -> AsyncGenerator[Piece, None]:
        text = complete_prose(context) if context.mode == "prose" else complete_code(context)
        if self.delay:
            await asyncio.sleep(self.delay)
        words = [w for w in _words(text)][:max(1, max_tokens)]
        for index, word in enumerate(words):
            if index and self.word_seconds:
                await asyncio.sleep(self.word_seconds)
            yield word
        yield Usage(context.size // 4, sum(len(w) for w in words) // 4 + (1 if words else 0))

    async def close(self) -> None:
        return None


def _words(text: str) -> list[str]:
    """``text`` in pieces that each start with their spaces (joined they are ``text`` again)."""
    pieces: list[str] = []
    for word in text.split(" "):
        pieces.append(word if not pieces else " " + word)
    return [p for p in pieces if p] if text else []
