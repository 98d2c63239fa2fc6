"""Any model LiteLLM reaches — Anthropic, Gemini, Azure, Bedrock, OpenRouter, Ollama, ... — by its LiteLLM id.

:class:`LiteLLMProvider` takes a LiteLLM model id (``anthropic/claude-sonnet-4-5``, ``gemini/gemini-2.5-flash``,
``azure/<deployment>``, ``openrouter/<org>/<model>``, ``ollama/llama3.1``...) and streams through
``litellm.acompletion``, which speaks each provider's own wire format and hands back chat-completions chunks.
It is an :class:`~.openai_compat.OpenAICompatibleProvider` in everything else: the one request conversion
(:func:`~.openai_compat.chat_messages`), the stream reading (text, reasoning, tool calls, usage), the retry,
cancellation and error rules (a missing key is one line naming its variable; a 429 is retried after the
server's ``Retry-After`` and says so), so those rules live in one place.

- **Extra.** ``pip install 'dsh-jupyter[litellm]'``. ``litellm`` is imported on the first request, in a
  worker thread (it takes seconds), never by ``%load_ext dsh_jupyter`` or ``import dsh_jupyter.models``.
- **No network of its own.** Before the import :data:`OFFLINE_ENV` is set: LiteLLM then uses the model map
  and header tables its package ships instead of fetching them, and its debug banner is off. The only
  connections are the model requests themselves.
- **Keys.** From the variables LiteLLM documents for the provider (:data:`KEY_ENVS`: ``ANTHROPIC_API_KEY``,
  ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``, ``AZURE_API_KEY``, ...), or ``api_key_env=`` / ``api_key=``.
  Local servers (:data:`KEYLESS_PROVIDERS`: Ollama, LM Studio, vLLM) need none. For a provider the table does
  not list, LiteLLM's own ``validate_environment`` names what is missing before anything is sent.
- **Facts.** Context window, image input and prices come from LiteLLM's model map (:mod:`.facts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any

from .base import ModelError
from .facts import ModelFacts, model_facts
from .openai_compat import SWITCH_HINT, OpenAICompatibleProvider, _CancelWatch, check_base_url, redact

#: Set before ``litellm`` is imported: its model map, Anthropic beta headers and news come from the copies
#: its package ships, never from the network.
OFFLINE_ENV: dict[str, str] = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_OFFLINE_MODE": "true",
}

#: The variables LiteLLM reads each provider's key from (its documentation's names; ``tests/`` checks them
#: against ``litellm.validate_environment``). Alternatives: the first one set is used.
KEY_ENVS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
    "azure": ("AZURE_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY",),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "bedrock": ("AWS_ACCESS_KEY_ID",),
}

#: Providers that are local servers: no key.
KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "hosted_vllm", "llamafile"})

#: The default address of each local server LiteLLM talks to (what ``%dsh models`` probes).
LOCAL_SERVERS: dict[str, str] = {
    "ollama": "http://127.0.0.1:11434",
    "ollama_chat": "http://127.0.0.1:11434",
    "lm_studio": "http://127.0.0.1:1234/v1",
}

#: Provider prefixes recognised as LiteLLM ids even before the extra is installed (so the error can say
#: to install it); with the extra, every provider in its model map counts too.
COMMON_PROVIDERS = frozenset(KEY_ENVS) | KEYLESS_PROVIDERS | {"vertex_ai", "bedrock_converse", "huggingface",
                                                              "databricks", "watsonx", "sagemaker", "replicate"}

INSTALL_HINT = "pip install 'dsh-jupyter[litellm]'"

#: The class names LiteLLM puts before a provider's message ("litellm.RateLimitError: AnthropicException - ").
_LITELLM_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)(?::\s*|\s+-\s+))+")


def split_id(model_id: str) -> tuple[str, str]:
    """``("anthropic", "claude-sonnet-4-5")`` from ``anthropic/claude-sonnet-4-5``."""
    provider, _, name = model_id.strip().partition("/")
    return provider.strip().lower(), name.strip()


def key_variable(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """The variable holding ``provider``'s key: the first of :data:`KEY_ENVS` that is set, else the first
    listed; ``None`` for a keyless local server or a provider the table does not list."""
    names = KEY_ENVS.get(provider)
    if not names:
        return None
    env = os.environ if env is None else env
    return next((name for name in names if env.get(name, "").strip()), names[0])


@functools.lru_cache(maxsize=1)
def load_litellm() -> ModuleType:
    """Import ``litellm`` with its network fetches off (:data:`OFFLINE_ENV`) and its banner quiet."""
    os.environ.update(OFFLINE_ENV)
    try:
        import litellm
    except ImportError as exc:
        raise ModelError("config", f"LiteLLM model ids need the LiteLLM extra: {INSTALL_HINT} ({exc}); or "
                                   f"{SWITCH_HINT}") from None
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.disable_hf_tokenizer_download = True
    return litellm


def litellm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("litellm") is not None


class _Started:
    """A LiteLLM stream whose first chunk has been read (``None``: it had none)."""

    def __init__(self, first: Any, stream: Any) -> None:
        self._first = first
        self._stream = stream

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[Any]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class LiteLLMProvider(OpenAICompatibleProvider):
    """Streams a LiteLLM model id (see the module docstring). ``api_base`` points LiteLLM at another
    endpoint of that provider (a proxy, a local server, Azure's resource); the other options are
    :class:`~.openai_compat.OpenAICompatibleProvider`'s."""

    def __init__(self, model_id: str, *, api_base: str | None = None, api_key_env: str | None = None,
                 api_key: str | None = None, **options: Any) -> None:
        if not isinstance(model_id, str) or "/" not in model_id.strip():
            raise ModelError("config", f"a LiteLLM model id is '<provider>/<model>', such as "
                                       f"'anthropic/claude-sonnet-4-5'; got {model_id!r}")
        provider, name = split_id(model_id)
        if not provider or not name:
            raise ModelError("config", f"LiteLLM model id {model_id!r} needs both a provider and a model, such as "
                                       "'gemini/gemini-2.5-flash'")
        if api_base is not None:
            check_base_url(api_base)
        self.litellm_provider = provider
        self.api_base = api_base.rstrip("/") if api_base else None
        env_name = api_key_env if api_key_env is not None else key_variable(provider)
        options.setdefault("provider_name", "litellm")
        options.setdefault("reasoning_replay", False)
        super().__init__(self.api_base or "http://litellm.invalid", f"{provider}/{name}", api_key_env=env_name,
                         api_key=api_key, **options)
        self.base_url = self.api_base or ""

    def __repr__(self) -> str:
        key = "explicit key" if self._api_key else (f"key from ${self.api_key_env}" if self.api_key_env else
                                                    "key as LiteLLM finds it")
        base = f", api_base={self.api_base!r}" if self.api_base else ""
        return f"LiteLLMProvider(model={self.model!r}{base}, {key}, context_window={self.info.context_window})"

    @property
    def where(self) -> str:
        return f"{self.litellm_provider} via LiteLLM" + (f" ({self.api_base})" if self.api_base else "")

    def _facts(self, provider: str) -> ModelFacts:
        return model_facts(self.model, self.litellm_provider)

    def _resolve_key(self) -> str:
        if self._api_key is None and self.api_key_env is None:
            return ""  # a local server, or a provider whose variables LiteLLM reads itself
        return super()._resolve_key()

    async def _creator(self, key: str, watch: _CancelWatch) -> Callable[..., Awaitable[Any]]:
        litellm = await watch.race(asyncio.to_thread(load_litellm), "while loading LiteLLM")
        if not key and self.litellm_provider not in KEYLESS_PROVIDERS and not self.api_base:
            missing = litellm.validate_environment(self.model).get("missing_keys") or []
            if missing:
                names = " and ".join(f"${name}" for name in missing)
                raise ModelError("config", f"{names} {'is' if len(missing) == 1 else 'are'} not set, so the "
                                           f"{self.litellm_provider} model {self.model!r} cannot be used. Set "
                                           f"{'it' if len(missing) == 1 else 'them'} or {SWITCH_HINT}.")
        fixed: dict[str, Any] = {"timeout": self.timeout, "num_retries": 0, "max_retries": 0}
        if key:
            fixed["api_key"] = key
        if self.api_base:
            fixed["api_base"] = self.api_base
        completion: Callable[..., Awaitable[Any]] = litellm.acompletion

        async def create(**params: Any) -> _Started:
            # Some providers (Gemini) send the request on the first read: reading it here lets the
            # retry rules see a 429 or a 5xx before anything has streamed.
            stream = await completion(**fixed, **params)
            try:
                first = await stream.__anext__()
            except StopAsyncIteration:
                return _Started(None, stream)
            except BaseException:
                with contextlib.suppress(Exception):
                    await stream.aclose()
                raise
            return _Started(first, stream)

        return create

    async def _close_response(self, response: Any) -> None:
        await response.aclose()

    def _detail(self, exc: BaseException, key: str) -> str:
        """The provider's own error message: LiteLLM quotes the response body inside its message."""
        text = str(getattr(exc, "message", None) or exc)
        start, end = text.find("{"), text.rfind("}")
        if start >= 0 and end > start:
            with contextlib.suppress(ValueError):
                body = json.loads(text[start:end + 1])
                inner = body.get("error", body) if isinstance(body, dict) else None
                message = inner.get("message") if isinstance(inner, dict) else inner
                if isinstance(message, str) and message.strip():
                    text = message
        text = _LITELLM_PREFIX.sub("", text.strip())
        text = " ".join(redact(text, key).split())
        return text if len(text) <= 300 else text[:297] + "..."

    async def close(self) -> None:
        """Nothing to release: LiteLLM keeps its own connection pools."""


__all__ = ["COMMON_PROVIDERS", "INSTALL_HINT", "KEYLESS_PROVIDERS", "KEY_ENVS", "LOCAL_SERVERS", "OFFLINE_ENV",
           "LiteLLMProvider", "key_variable", "litellm_installed", "load_litellm", "split_id"]
