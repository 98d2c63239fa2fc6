"""Model providers the agent loop streams from.

- :mod:`.base`: the seam — :class:`ModelRequest` (provider-neutral session messages, system prompt, tools
  and options), :class:`ToolSpec`, stream events (:class:`TextDelta`, :class:`ReasoningDelta`,
  :class:`ToolCallDelta`, :class:`Usage`, :class:`Finish`), :class:`ModelInfo`, :class:`ModelError`, the
  :class:`ModelProvider` Protocol, :class:`BlockCollector` and :func:`collect`.
- :mod:`.openai_compat`: :class:`OpenAICompatibleProvider` (DeepSeek by default, OpenAI, vLLM, Ollama,
  llama.cpp), built on the ``openai`` SDK, which is imported only when a request is made; the one
  conversion to the chat-completions wire format (:func:`~.openai_compat.chat_messages`).
- :mod:`.offline`: :class:`OfflineModel`, the keyless deterministic default (with a scripted mode).
- :mod:`.local`: :class:`LocalModel`, SmolLM2-135M served by llama.cpp (extra ``dsh-jupyter[local]``).
- :mod:`.registry`: :func:`resolve_model`, :func:`default_model_spec`, :func:`list_models`.
- :mod:`.catalog`: default endpoints and known context windows.

Typical use by the loop::

    provider = resolve_model(spec)              # or OfflineModel(), OpenAICompatibleProvider(...)
    request = ModelRequest([user_message("hi")], system="Be brief.", tools=[ToolSpec("bash", "Run", schema)])
    blocks, usage, finish = await collect(provider.stream(request, cancel=cancel_event))
"""

from __future__ import annotations

from .base import (
    ERROR_KINDS,
    BlockCollector,
    Finish,
    ModelError,
    ModelInfo,
    ModelProvider,
    ModelRequest,
    Purpose,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    collect,
)
from .catalog import known_context_window
from .local import LocalModel
from .offline import OFFLINE_CONTEXT_WINDOW, OfflineModel, ToolCall
from .openai_compat import OpenAICompatibleProvider
from .registry import ModelListing, default_model_spec, list_models, resolve_model

__all__ = [
    "ERROR_KINDS",
    "OFFLINE_CONTEXT_WINDOW",
    "BlockCollector",
    "Finish",
    "LocalModel",
    "ModelError",
    "ModelInfo",
    "ModelListing",
    "ModelProvider",
    "ModelRequest",
    "OfflineModel",
    "OpenAICompatibleProvider",
    "Purpose",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "collect",
    "default_model_spec",
    "known_context_window",
    "list_models",
    "resolve_model",
]
