"""The per-source byte budget: explicit, or derived from the model's context window."""

from __future__ import annotations

import math

#: Budget used when nothing better is known, and the floor of the automatic budget.
DEFAULT_MAX_REFERENCE_BYTES = 65_536
#: Default share of the model's context a single source may take.
DEFAULT_REFERENCE_CONTEXT_FRACTION = 0.2
#: Bytes per token assumed when turning a context window into bytes (a sizing heuristic).
BYTES_PER_TOKEN = 4


def automatic_reference_budget(context_window: int | None, fraction: float) -> int:
    """``max(65536, floor(context_window × 4 × fraction))``; 65,536 when the window is unknown."""
    if (
        context_window is None
        or isinstance(context_window, bool)
        or not isinstance(context_window, (int, float))
        or not math.isfinite(context_window)
        or context_window <= 0
    ):
        return DEFAULT_MAX_REFERENCE_BYTES
    return max(DEFAULT_MAX_REFERENCE_BYTES, math.floor(context_window * BYTES_PER_TOKEN * fraction))


def reference_budget(max_reference_bytes: int | None, context_window: int | None, fraction: float) -> int:
    """An explicit budget is used exactly; otherwise the automatic one."""
    if max_reference_bytes is not None:
        return max_reference_bytes
    return automatic_reference_budget(context_window, fraction)


#: A window whose automatic budget (at its 65,536-byte floor) would take more than this share of it is "small".
SMALL_WINDOW_SHARE = 0.5


def window_fitted_budget(context_window: int | None, fraction: float) -> int | None:
    """For a small context window, the budget that fits it: ``floor(context_window × 4 × fraction)``.

    The automatic budget never goes below 65,536 bytes (about 16K tokens), which a small model (the local
    SmolLM2 has 2,048 tokens) cannot hold at all. Hosts that know the model is small pass this as the
    explicit budget; ``None`` means the window is large enough for the automatic budget.
    """
    budget = automatic_reference_budget(context_window, fraction)
    if context_window is None or budget <= context_window * BYTES_PER_TOKEN * SMALL_WINDOW_SHARE:
        return None
    return max(1, math.floor(context_window * BYTES_PER_TOKEN * fraction))
