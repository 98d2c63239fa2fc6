"""Traitlet types shared by the notebook's options and the server extension's (both hold a PostgreSQL DSN).

The DSN masking rule (:mod:`dsh_jupyter.store.postgres`) is imported when a DSN is shown: the options
load at ``%load_ext``, the store does not.
"""

from __future__ import annotations

from typing import Any

from traitlets import Dict, TraitError, Unicode


class _MaskedDsn(str):
    """A connection string whose repr (what ``%config DshMagics`` shows) hides the password."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self:
            return "''"
        from .store.postgres import mask_dsn

        return repr(mask_dsn(str(self)))


class DsnUnicode(Unicode):  # type: ignore[type-arg]
    """A string option holding a database DSN: stored as given, never shown with its password."""

    def validate(self, obj: Any, value: Any) -> Any:
        return _MaskedDsn(super().validate(obj, value))


class ModelPrices(Dict):
    """``{model: {"input": $, "output": $, "cached": $}}`` in US dollars per million tokens, or ``{model: 0}``
    for a free one; each entry is checked when set (:func:`dsh_jupyter.models.facts.parse_prices`)."""

    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        from .models.facts import parse_prices

        for model, prices in value.items():
            if not isinstance(model, str) or not model.strip():
                raise TraitError(f"model_prices keys are model names, got {model!r}")
            try:
                parse_prices(model, prices)
            except ValueError as exc:
                raise TraitError(f"model_prices: {exc}") from None
        return value
