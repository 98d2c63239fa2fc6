"""The automatic per-source budget from the model's context window, and explicit budgets."""

from __future__ import annotations

from typing import Any

import pytest
from references_helpers import MemoryStore, append_user, context_text, object_size, prompt_data, target_for

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import SessionReferenceResolver
from dsh_jupyter.references.budget import automatic_reference_budget, reference_budget

TABLE = [
    ({}, 200_001, 160_000),
    ({}, 8_000, 65_536),
    ({"reference_context_fraction": 0.1}, 200_001, 80_000),
    ({"reference_context_fraction": 0}, 200_001, 65_536),
    ({"max_reference_bytes": 360}, 200_001, 360),
]


@pytest.mark.parametrize(("config", "window", "expected"), TABLE)
def test_budget_table(config: dict[str, Any], window: int, expected: int) -> None:
    fraction = config.get("reference_context_fraction", 0.2)
    assert reference_budget(config.get("max_reference_bytes"), window, fraction) == expected


@pytest.mark.parametrize(("config", "window", "expected"), TABLE)
def test_each_source_is_bounded_by_the_budget_through_prepare(config: dict[str, Any], window: int,
                                                               expected: int) -> None:
    store = MemoryStore()
    append_user(store.new_log("source"), "x" * 250_000)
    resolver = SessionReferenceResolver(SessionQuery(store), **config)
    target = target_for(store, context_window=window)
    assert resolver.budget_for(target) == expected
    prepared = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    size = object_size(prompt_data(context_text(prepared))[0])
    assert expected - 4 < size <= expected


@pytest.mark.parametrize("window", [None, 0, -5, float("nan"), float("inf"), True, "200001"])
def test_unknown_or_unusable_windows_use_the_floor(window: object) -> None:
    assert automatic_reference_budget(window, 0.2) == 65_536  # type: ignore[arg-type]


def test_explicit_budget_ignores_the_model() -> None:
    assert reference_budget(360, 10**9, 1.0) == 360
    assert automatic_reference_budget(10**9, 1.0) == 4 * 10**9


def test_a_small_window_gets_a_budget_that_fits_it() -> None:
    from dsh_jupyter.references.budget import window_fitted_budget

    assert window_fitted_budget(2048, 0.2) == 1638  # the local SmolLM2: 65,536 bytes would be 8 windows
    assert window_fitted_budget(8192, 0.2) == 6553
    assert window_fitted_budget(32_768, 0.2) is None  # the floor is at most half of it: the automatic budget
    assert window_fitted_budget(1_000_000, 0.2) is None and window_fitted_budget(None, 0.2) is None
