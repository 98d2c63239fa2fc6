"""Known context windows (in tokens) and image input of common chat models, and the DeepSeek / OpenAI defaults.

The window sizes the reference budget (``max(65536, window × 4 × fraction)`` bytes) and automatic
compaction. Lookup is forgiving about how endpoints spell a model: case, an ``org/`` prefix
(``meta-llama/Llama-3.1-8B-Instruct``) and an Ollama tag (``llama3.1:8b``) are ignored, and the longest
known prefix wins (``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``). Unknown models give ``None``; pass
``context_window=`` to the provider to say it yourself.
"""

from __future__ import annotations

from collections.abc import Mapping

DEEPSEEK_BASE_URL = "https://api.deepseek.com"
DEEPSEEK_DEFAULT_MODEL = "deepseek-v4-flash"
DEEPSEEK_KEY_ENV = "DEEPSEEK_API_KEY"
OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_KEY_ENV = "OPENAI_API_KEY"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"

#: Context windows in tokens, by model name or name prefix (lower case).
KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    # DeepSeek: the v4 generation serves a 1M window (as the reference logs record); chat/reasoner 128K.
    "deepseek-v4": 1_000_000,
    "deepseek-v4-flash": 1_000_000,
    "deepseek-chat": 131_072,
    "deepseek-reasoner": 131_072,
    "deepseek-coder": 131_072,
    "deepseek-r1": 131_072,
    "deepseek-v3": 131_072,
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Open-weight families as local servers (vLLM, Ollama, llama.cpp) usually serve them.
    "qwen": 32_768,
    "qwen2": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "llama3": 8_192,
    "llama-3": 8_192,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
    "llama3.2": 131_072,
    "llama-3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.3": 131_072,
    "mistral": 32_768,
    "mixtral": 32_768,
    "gemma2": 8_192,
    "gemma3": 131_072,
    "phi3": 4_096,
    "phi4": 16_384,
    "smollm2": 8_192,
}


def normalise_model_name(model: str) -> str:
    """Lower case, without an ``org/`` prefix or an Ollama ``:tag``."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def _known_key(table: Mapping[str, object], model: str) -> str | None:
    """The key of ``table`` naming ``model``: its exact normalised name, else the longest known prefix."""
    name = normalise_model_name(model)
    if name in table:
        return name
    best: str | None = None
    for key in table:
        if name.startswith(key) and (best is None or len(key) > len(best)):
            # a prefix must end at a word boundary: "o3" matches "o3-2025" but not "o3x".
            rest = name[len(key):]
            if not rest or not rest[0].isalnum() or key[-1] in "-.":
                best = key
    return best


def known_context_window(model: str) -> int | None:
    """The context window of ``model`` from :data:`KNOWN_CONTEXT_WINDOWS`, or ``None`` when unknown."""
    key = _known_key(KNOWN_CONTEXT_WINDOWS, model)
    return KNOWN_CONTEXT_WINDOWS[key] if key is not None else None


#: Whether a model takes image input, by model name or name prefix (lower case, the same lookup as the
#: context windows). A model the table does not know gets text descriptions of images: sending an image
#: part to a text-only endpoint fails the whole request, a description never does. Say otherwise for a
#: server of your own with ``OpenAICompatibleProvider(..., accepts_images=True)``.
KNOWN_IMAGE_INPUT: dict[str, bool] = {
    # DeepSeek's chat models take text only.
    "deepseek": False,
    # OpenAI: the gpt-4o / gpt-4.1 / gpt-5 families and the o1 / o3 / o4-mini reasoning models see images.
    "gpt-5": True,
    "gpt-4.1": True,
    "gpt-4o": True,
    "gpt-4-turbo": True,
    "gpt-4": False,
    "gpt-3.5-turbo": False,
    "chatgpt-4o": True,
    "o1": True,
    "o1-mini": False,
    "o3": True,
    "o3-mini": False,
    "o4-mini": True,
    # Open-weight vision models as local servers name them.
    "llava": True,
    "bakllava": True,
    "llama3.2-vision": True,
    "llama-3.2-11b-vision": True,
    "llama-3.2-90b-vision": True,
    "qwen2-vl": True,
    "qwen2.5-vl": True,
    "qwen-vl": True,
    "gemma3": True,
    "pixtral": True,
    "minicpm-v": True,
    "moondream": True,
    # The bundled local model is text only.
    "smollm2": False,
}


def accepts_images(model: str) -> bool:
    """Whether ``model`` takes image input according to :data:`KNOWN_IMAGE_INPUT` (unknown: ``False``)."""
    key = _known_key(KNOWN_IMAGE_INPUT, model)
    return KNOWN_IMAGE_INPUT[key] if key is not None else False
