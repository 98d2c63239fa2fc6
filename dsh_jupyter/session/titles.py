"""Session titles: one made from the first request at once, a model-written one after the first turn.

A title made from a request (:func:`request_title`) leaves out what is not prose: command lines (``!cmd``,
``%magic``, the offline model's ``/bash``, ``/python`` and ``/tool`` lines), fenced code and mention markup
(``@[label](uri)`` reads as its label). It is the first sentence when that is short, else cut at a word
boundary. Titles are unique within a folder: :func:`unique_title` adds the notebook's name when another
session of the folder already has the same title.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from .header import notebook_label

MAX_TITLE_CHARS = 80
#: How long a title made from a request may be (a list's line, not a paragraph).
REQUEST_TITLE_CHARS = 60
#: How many of the folder's newest other sessions a new title is checked against.
MAX_TITLE_SIBLINGS = 200

FALLBACK_SOURCE: dict[str, Any] = {"kind": "fallback"}
USER_TITLE_SOURCE: dict[str, Any] = {"kind": "user"}
TITLE_PROVIDER_ID = "dsh-jupyter-title"

_WHITESPACE = re.compile(r"\s+")
_MENTION = re.compile(r"@\[([^\]]*)\]\([^)]*\)")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
#: A line that is a command, not a request: shell escapes, magics and the offline model's command lines.
_COMMAND_LINE = re.compile(r"^[ \t]*(?:!|%|/(?:bash|python|tool)\b)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s")


def clean_title(text: str) -> str:
    """One line, trimmed, without wrapping quotes, at most :data:`MAX_TITLE_CHARS` characters."""
    line = _WHITESPACE.sub(" ", text).strip().strip("\"'`").strip()
    if line.lower().startswith("title:"):
        line = line[6:].strip()
    return cut_at_word(line, MAX_TITLE_CHARS)


def cut_at_word(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its longest run of whole words that does, with "…"."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if not text[limit - 1].isspace() and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:—-") + "…"


def request_prose(prompt: str) -> str:
    """The words of a request people read: command lines, code fences and mention markup left out."""
    text = _MENTION.sub(lambda m: m.group(1), _FENCE.sub("\n", prompt))
    lines = [line for line in text.splitlines() if not _COMMAND_LINE.match(line)]
    return _WHITESPACE.sub(" ", " ".join(lines)).strip()


def request_title(prompt: str, limit: int = REQUEST_TITLE_CHARS) -> str:
    """A title from the first request: its first sentence when short enough, else cut at a word boundary.

    A request that is only commands is titled by its first command (``!ls`` gives ``ls``)."""
    prose = request_prose(prompt)
    if not prose:
        command = next((line.strip() for line in _MENTION.sub(lambda m: m.group(1), prompt).splitlines()
                        if line.strip()), "")
        prose = re.sub(r"^(?:!|%+|/(?:bash|python|tool)\b)\s*", "", command)
    first = _SENTENCE_END.split(prose, 1)[0]
    title = first if len(first) <= limit else prose
    title = cut_at_word(title, limit)
    if not title.endswith("…"):
        title = title.rstrip(".,;:!?—- ")
    return clean_title(title[:1].upper() + title[1:])


def unique_title(title: str, notebook: str | None, taken: Collection[str]) -> str:
    """``title``, or, when another session of the folder has it, ``title — notebook`` (then a number)."""
    folded = {t.casefold() for t in taken}
    if title.casefold() not in folded:
        return title
    name = notebook_label(notebook)
    base = f"{title} — {name}" if name else title
    if base.casefold() not in folded:
        return base
    number = 2
    while f"{base} ({number})".casefold() in folded:
        number += 1
    return f"{base} ({number})"


def provider_title_source(provider: str, model: str) -> dict[str, Any]:
    return {"kind": "provider", "provider": TITLE_PROVIDER_ID, "model": {"provider": provider, "model": model}}


TITLE_INSTRUCTIONS = (
    "Write a title of at most six words for the conversation that starts with the user's message below. "
    "Answer with the title only: no quotes, no trailing punctuation."
)
