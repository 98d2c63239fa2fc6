"""Token counts of a turn, summed over its model calls (what the turn footer shows)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def usage_cost(usage: object) -> float | None:
    """The ``cost`` of one model call's ``usage`` object (session format), or ``None`` when it has none:
    no usage, no cost, or a value that is not a finite number ≥ 0 (a bad value counts as absent)."""
    if not isinstance(usage, Mapping):
        return None
    cost = usage.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0:
        return None
    return float(cost)


@dataclass(frozen=True)
class TokenUsage:
    """Token counts summed over a turn's model calls (``cached``/``reasoning`` ``None``: never reported)."""

    input: int = 0
    output: int = 0
    cached: int | None = None
    reasoning: int | None = None
    cost: float | None = None  # reported by the provider or computed from the model's prices (``None``: unknown)

    def add(self, usage: Mapping[str, object]) -> TokenUsage:
        """These counts plus one model call's ``usage`` object (session format); bad values count as absent."""

        def count(key: str) -> int | None:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

        def plus(total: int | None, key: str) -> int | None:
            value = count(key)
            return total if value is None else (total or 0) + value

        paid = usage_cost(usage)
        return TokenUsage(self.input + (count("inputTokens") or 0), self.output + (count("outputTokens") or 0),
                          plus(self.cached, "cacheReadTokens"), plus(self.reasoning, "reasoningTokens"),
                          self.cost if paid is None else (self.cost or 0.0) + paid)

    def to_json(self) -> dict[str, int | float]:
        """The session format's names: ``inputTokens``, ``outputTokens``, ``cacheReadTokens``?,
        ``reasoningTokens``?, ``cost``?."""
        record: dict[str, int | float] = {"inputTokens": self.input, "outputTokens": self.output}
        if self.cached is not None:
            record["cacheReadTokens"] = self.cached
        if self.reasoning is not None:
            record["reasoningTokens"] = self.reasoning
        if self.cost is not None:
            record["cost"] = self.cost
        return record


@dataclass(frozen=True)
class ContextMeter:
    """How much of the model's window the next request will use: ``used`` estimated tokens of a
    ``window``-token window; automatic compaction starts past ``compacts_at`` tokens (``None``: it is off)."""

    used: int
    window: int
    compacts_at: int | None = None

    @property
    def fraction(self) -> float:
        return self.used / self.window if self.window > 0 else 0.0

    def text(self) -> str:
        """``context 12% of 200K (compacts at 75%)``."""
        words = f"context {_percent(self.fraction)} of {_tokens(self.window)}"
        if self.compacts_at is not None and self.window > 0:
            words += f" (compacts at {_percent(self.compacts_at / self.window)})"
        return words

    def to_json(self) -> dict[str, int | None]:
        return {"usedTokens": self.used, "windowTokens": self.window, "compactsAtTokens": self.compacts_at}


def _percent(fraction: float) -> str:
    if 0 < fraction < 0.01:
        return "<1%"
    return f"{fraction:.0%}"


def _tokens(count: int) -> str:
    """``200K``, ``1M``, ``1.05M``, ``8,192``."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.3g}M"
    if count >= 10_000:
        return f"{count / 1000:.3g}K"
    return f"{count:,}"


def format_cost(cost: float) -> str:
    """``free``, ``$0.0042``, ``$1.27``: US dollars, with four decimals below a cent."""
    if cost <= 0:
        return "free"
    return f"${cost:.4f}" if cost < 0.01 else f"${cost:,.2f}"


__all__ = ["ContextMeter", "TokenUsage", "format_cost", "usage_cost"]
