"""What is known of a model — context window, output limit, image input, prices — and where it came from.

The maintained source is LiteLLM's model map (``model_prices_and_context_window_backup.json``, the copy the
``litellm`` package ships): when the extra ``dsh-jupyter[litellm]`` is installed its file is read straight
from the package folder (``litellm`` itself is not imported, so this costs a JSON parse, about 20 ms, once
per process, and never a network fetch). Without it the hand table of :mod:`.catalog` gives the window and
image input, and no prices.

:class:`Prices` turns the token counts a provider reports into a cost (US dollars): ``input`` tokens not
read from a cache at the input price, cached ones at the cache-read price (the input price when the map
gives none), ``output`` tokens (reasoning included) at the output price. A price of zero is a free model;
no prices means no cost is shown rather than a guess.

Prices are taken from the map only for hosted providers whose bills the map describes (``deepseek``,
``openai`` and every LiteLLM provider): a self-hosted server that happens to serve a model named
``gpt-4o`` costs what its owner says (``DshMagics.model_prices``), not what OpenAI charges.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .base import Usage
from .catalog import accepts_images, known_context_window

#: The file of LiteLLM's model map inside its package.
LITELLM_MAP_FILE = "model_prices_and_context_window_backup.json"

#: ``ModelFacts.source`` values.
SOURCE_LITELLM = "LiteLLM model map"
SOURCE_TABLE = "built-in table"
SOURCE_SETTING = "your setting"

#: Providers whose prices the map describes when the OpenAI-compatible path talks to them.
PRICED_PROVIDERS = frozenset({"deepseek", "openai"})

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    """US dollars per token: ``input``, ``output`` and ``cached`` (cache reads; ``None``: the input price)."""

    input: float
    output: float
    cached: float | None = None

    @classmethod
    def per_million(cls, input: float, output: float, cached: float | None = None) -> Prices:
        """Prices given per million tokens, as providers publish them."""
        return cls(input / PER_MILLION, output / PER_MILLION, None if cached is None else cached / PER_MILLION)

    @property
    def free(self) -> bool:
        return self.input == 0 and self.output == 0 and not self.cached

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int | None = None) -> float:
        """The cost of one call's tokens (``input_tokens`` counts the cached ones too, as providers report)."""
        cached = min(max(cached_tokens or 0, 0), input_tokens)
        cached_price = self.input if self.cached is None else self.cached
        return (input_tokens - cached) * self.input + cached * cached_price + output_tokens * self.output

    def priced(self, usage: Usage) -> Usage:
        """``usage`` with its cost: the provider's own figure when it reported one, else computed here."""
        if usage.cost is not None:
            return usage
        return replace(usage, cost=self.cost(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens))

    def describe(self) -> str:
        """``$3.00 / $15.00 per 1M`` (input / output), or ``free``."""
        if self.free:
            return "free"
        return f"${self.input * PER_MILLION:.2f} / ${self.output * PER_MILLION:.2f} per 1M"


def parse_prices(model: str, value: object) -> Prices:
    """A :class:`Prices` from a ``model_prices`` setting entry: ``0`` (free), or a mapping with ``input`` and
    ``output`` (and optionally ``cached``) in US dollars per million tokens. Raises ``ValueError`` naming
    the model and what to write."""
    example = f"{{{model!r}: {{'input': 0.5, 'output': 1.5}}}} (US dollars per million tokens), or {{{model!r}: 0}}"
    if isinstance(value, bool):
        raise ValueError(f"the price of {model!r} must be 0 (free) or prices per million tokens, e.g. {example}")
    if isinstance(value, (int, float)):
        if value != 0:
            raise ValueError(f"a single number for {model!r} can only be 0 (free); give input and output prices, "
                             f"e.g. {example}")
        return Prices(0.0, 0.0, 0.0)
    if not isinstance(value, Mapping):
        raise ValueError(f"the price of {model!r} must be 0 or a mapping such as {example}; got {value!r:.80}")
    unknown = sorted(str(k) for k in value if k not in ("input", "output", "cached"))
    if unknown:
        raise ValueError(f"unknown price field(s) {', '.join(unknown)} for {model!r}; use input, output and "
                         f"cached, e.g. {example}")
    numbers: dict[str, float | None] = {}
    for name in ("input", "output", "cached"):
        given = value.get(name)
        if given is None and name != "cached":
            raise ValueError(f"the price of {model!r} needs {name!r}, e.g. {example}")
        if given is not None and (isinstance(given, bool) or not isinstance(given, (int, float))
                                  or not math.isfinite(given) or given < 0):
            raise ValueError(f"the {name} price of {model!r} must be a number ≥ 0 (US dollars per million "
                             f"tokens); got {given!r}")
        numbers[name] = None if given is None else float(given)
    return Prices.per_million(numbers["input"] or 0.0, numbers["output"] or 0.0, numbers["cached"])


@dataclass(frozen=True)
class ModelFacts:
    """What is known of one model; ``source`` says where it came from (:data:`SOURCE_LITELLM`,
    :data:`SOURCE_TABLE`, or ``None`` when nothing is known)."""

    model: str
    context_window: int | None = None
    max_output: int | None = None
    accepts_images: bool = False
    prices: Prices | None = None
    source: str | None = None


def litellm_map_path() -> Path | None:
    """Where the installed ``litellm`` package keeps its model map (``None``: not installed)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / LITELLM_MAP_FILE
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=1)
def litellm_map() -> Mapping[str, Mapping[str, Any]]:
    """LiteLLM's model map, read once from its package folder (empty without the extra or when unreadable)."""
    path = litellm_map_path()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, Mapping)} if isinstance(data, Mapping) else {}


def litellm_providers() -> frozenset[str]:
    """The provider names the installed LiteLLM map knows (``anthropic``, ``gemini``, ...)."""
    return frozenset(str(entry.get("litellm_provider")) for entry in litellm_map().values()
                     if isinstance(entry.get("litellm_provider"), str))


def _map_entry(model: str, provider: str | None) -> Mapping[str, Any] | None:
    table = litellm_map()
    if not table:
        return None
    name = model.strip()
    candidates = [f"{provider}/{name}"] if provider and not name.startswith(f"{provider}/") else []
    candidates += [name, name.lower()]
    if "/" in name:  # "anthropic/claude-x" is also listed as "claude-x"
        candidates.append(name.split("/", 1)[1])
    for key in candidates:
        entry = table.get(key)
        if entry is not None and entry.get("mode", "chat") in ("chat", "responses", None):
            return entry
    return None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _price(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def model_facts(model: str, provider: str | None = None, *, priced: bool | None = None) -> ModelFacts:
    """What is known of ``model`` served by ``provider`` (a LiteLLM provider name such as ``anthropic``, or
    ``deepseek``/``openai``; ``None``: a server of your own). Prices come with the facts only when ``priced``
    (default: for the providers the map's prices describe)."""
    if priced is None:
        priced = provider is not None and (provider in PRICED_PROVIDERS or provider in litellm_providers())
    entry = _map_entry(model, provider)
    if entry is not None:
        prices = None
        if priced:
            given_in, given_out = _price(entry.get("input_cost_per_token")), _price(entry.get("output_cost_per_token"))
            if given_in is not None and given_out is not None:
                prices = Prices(given_in, given_out, _price(entry.get("cache_read_input_token_cost")))
        window = _positive_int(entry.get("max_input_tokens")) or _positive_int(entry.get("max_tokens"))
        return ModelFacts(model, window or known_context_window(model), _positive_int(entry.get("max_output_tokens")),
                          bool(entry.get("supports_vision")) or accepts_images(model), prices, SOURCE_LITELLM)
    window = known_context_window(model)
    images = accepts_images(model)
    return ModelFacts(model, window, None, images, None, SOURCE_TABLE if window is not None or images else None)


__all__ = ["LITELLM_MAP_FILE", "PRICED_PROVIDERS", "SOURCE_LITELLM", "SOURCE_SETTING", "SOURCE_TABLE", "ModelFacts",
           "Prices", "litellm_map", "litellm_map_path", "litellm_providers", "model_facts", "parse_prices"]
