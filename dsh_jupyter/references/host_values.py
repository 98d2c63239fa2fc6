"""What the host's own values (variables, cells) share on their way into a prompt: one mention list rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .errors import SESSION_REFERENCE_TOO_MANY, SessionReferenceError

_R = TypeVar("_R")


def distinct_mentions(references: Sequence[_R], key: Callable[[_R], str], limit: int, noun: str) -> list[_R]:
    """``references`` de-duplicated by ``key`` (the first label wins), at most ``limit`` of them; more raise
    ``SESSION_REFERENCE_TOO_MANY`` naming the first one over (``noun``: ``variable``, ``cell``)."""
    seen: dict[str, _R] = {}
    for reference in references:
        seen.setdefault(key(reference), reference)
    if len(seen) > limit:
        raise SessionReferenceError(
            SESSION_REFERENCE_TOO_MANY,
            f"a message may mention at most {limit} {noun}s, this one mentions {len(seen)}; remove some mentions",
            details={"count": len(seen), "limit": limit, noun: list(seen)[limit]},
        )
    return list(seen.values())
