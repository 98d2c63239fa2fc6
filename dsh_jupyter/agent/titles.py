"""Session titles: a fallback from the first prompt at once, a model-written one after the first turn."""

from __future__ import annotations

import re
from typing import Any

FALLBACK_WORDS = 5
MAX_TITLE_CHARS = 80

FALLBACK_SOURCE: dict[str, Any] = {"kind": "fallback"}
USER_TITLE_SOURCE: dict[str, Any] = {"kind": "user"}
TITLE_PROVIDER_ID = "dsh-jupyter-title"

_WHITESPACE = re.compile(r"\s+")


def clean_title(text: str) -> str:
    """One line, trimmed, without wrapping quotes, at most :data:`MAX_TITLE_CHARS` characters."""
    line = _WHITESPACE.sub(" ", text).strip().strip("\"'`").strip()
    if line.lower().startswith("title:"):
        line = line[6:].strip()
    if len(line) > MAX_TITLE_CHARS:
        line = line[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return line


def fallback_title(prompt: str) -> str:
    """The first few words of the first prompt (what the session is labelled by until a better title)."""
    words = _WHITESPACE.sub(" ", prompt).strip().split(" ")
    return clean_title(" ".join(words[:FALLBACK_WORDS]))


def provider_title_source(provider: str, model: str) -> dict[str, Any]:
    return {"kind": "provider", "provider": TITLE_PROVIDER_ID, "model": {"provider": provider, "model": model}}


TITLE_INSTRUCTIONS = (
    "Write a title of at most six words for the conversation that starts with the user's message below. "
    "Answer with the title only: no quotes, no trailing punctuation."
)
