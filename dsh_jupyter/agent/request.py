"""What the model sees: the current surface as provider-neutral session messages.

Only surface events count, so compaction shadows what it replaced and replay never needs anything but
the target's own log. The same surface always yields the same messages. Each provider turns these into
its own wire format (:mod:`dsh_jupyter.models.openai_compat` for chat completions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from ..images import describe_image, image_blocks, image_tokens
from ..models.base import MESSAGE_ROLES, blocks_of_type, content_blocks
from ..session.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, Event
from ..session.messages import Message, blocks_text

_MESSAGE_TYPES = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})


def request_messages(surface: Iterable[Event]) -> list[Message]:
    """The messages of the surface events, in surface order (the log's own dicts: read, never change)."""
    messages: list[Message] = []
    for event in surface:
        message = event.message if event.type in _MESSAGE_TYPES else None
        if message is not None and message.get("role") in MESSAGE_ROLES and isinstance(message.get("content"), list):
            messages.append(message)
    return messages


_PIECES = re.compile(r"\w+|[^\w\s]")


@lru_cache(maxsize=8192)  # every step re-estimates the whole history: its texts repeat turn after turn
def text_tokens(text: str) -> int:
    """Estimated tokens of ``text``: at least one per four characters, and at least one per word and per
    symbol (code, tables and JSON take two or three times more tokens than prose of the same length; a long
    word counts a token per ten letters, a non-ASCII run a token per character)."""
    pieces = sum(1 + len(p) // 10 if p.isascii() else len(p) for p in _PIECES.findall(text))
    return max(len(text) // 4, pieces)


def estimate_tokens(messages: Iterable[Message], system: str | None = None) -> int:
    """A cheap, deterministic size estimate (:func:`text_tokens` of each text, plus a few per message).

    An image block that carries its picture (``data``: messages as :func:`~dsh_jupyter.images.request_images`
    makes them for a model that takes images) counts at :func:`~dsh_jupyter.images.image_tokens`; any other
    image block counts as the text that describes it, which is what a model gets in its place."""
    total = text_tokens(system) + 4 if system else 0
    for message in messages:
        content = content_blocks(message.get("content"))
        results = blocks_of_type(message, "tool-result")
        for result in results:
            inner = content_blocks(result.get("content"))
            total += text_tokens(blocks_text(inner)) + 4 + sum(map(_image_cost, image_blocks(inner)))
        text = blocks_text(content)
        calls = blocks_of_type(message, "tool-call")
        if text or (calls and not results):
            total += text_tokens(text) + 4
        for call in calls:
            total += text_tokens(str(call.get("arguments") or "{}")) + 4
        total += sum(map(_image_cost, image_blocks(content)))
    return total


def _image_cost(block: Mapping[str, Any]) -> int:
    return image_tokens(block) if "data" in block else text_tokens(describe_image(block))
