"""Compaction: replace older surface messages with one model-written checkpoint.

The checkpoint is a user message whose source is the compaction marker
(``{"kind": "plugin", "plugin": "compact", "compactionId": ...}``) appended with a ``replace`` op that
cites every shadowed seq, so readers (and the reference) fold it the same way.

A small model (the local SmolLM2 has a 2,048-token window) cannot read the very conversation it must
summarise: when the messages to summarise do not fit :func:`compaction_input_limit`, they are rendered as a
plain transcript (:func:`transcript_lines`, each line capped), cut into parts (:func:`chunk_lines`) and
summarised part by part, each request carrying the summary so far (:func:`chunk_prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..models.base import blocks_of_type, content_blocks
from ..session.events import ASSISTANT_MESSAGE, USER_MESSAGE, Event
from ..session.messages import TextBlock, blocks_text, is_direct_user_source, text_block
from .request import text_tokens

CHECKPOINT_PREAMBLE = (
    "This is a compaction checkpoint: the summary below stands in for the earlier part of this "
    "conversation. Continue from the messages that follow it.\n\n<compacted-summary>"
)
CHECKPOINT_CLOSE = "</compacted-summary>"

COMPACTION_INSTRUCTIONS = (
    "Summarise the conversation so far for your own later use. Keep the user's requests and intent, "
    "decisions made, files and data touched, results obtained and open work. Write plain Markdown with "
    "short sections; do not invent anything that is not in the conversation."
)

#: The user message that closes a compaction request, after the messages to summarise.
COMPACTION_REQUEST = "Write the summary now."


@dataclass(frozen=True)
class CompactionPlan:
    """Which surface nodes a checkpoint replaces (a contiguous run, by surface position)."""

    shadowed: list[Event]

    @property
    def start(self) -> int:
        return self.shadowed[0].seq

    @property
    def end(self) -> int:
        return self.shadowed[-1].seq


def plan_compaction(surface: Sequence[Event], keep_recent: int = 1) -> CompactionPlan | None:
    """Replace everything before the last ``keep_recent`` direct user prompts (or everything when there
    are not more prompts than that). Cuts fall only before a direct prompt, so a tool call is never split
    from its result. ``None`` when there is nothing worth compacting."""
    if not surface:
        return None
    prompt_positions = [
        i for i, e in enumerate(surface)
        if e.type == USER_MESSAGE and is_direct_user_source((e.message or {}).get("source"))
    ]
    cut = len(surface)
    if keep_recent > 0 and len(prompt_positions) > keep_recent:
        cut = prompt_positions[-keep_recent]
    shadowed = list(surface[:cut])
    if not shadowed:
        return None
    if len(shadowed) == 1 and shadowed[0].type == USER_MESSAGE and not any(
        e.type == ASSISTANT_MESSAGE for e in shadowed
    ):
        return None
    return CompactionPlan(shadowed)


def checkpoint_content(summary: str) -> list[TextBlock]:
    return [text_block(CHECKPOINT_PREAMBLE), text_block(summary.strip()), text_block(CHECKPOINT_CLOSE)]


# --- fitting a small context window ---------------------------------------------------------------------------
#: Share of the window one compaction request may fill (the rest is room for the summary it asks for).
COMPACTION_INPUT_SHARE = 0.5
#: Share of the window kept free for the model's answer when deciding whether a prompt fits.
ANSWER_RESERVE_SHARE = 0.25

#: The user message of a chunked compaction request: the summary so far (if any), then the next part.
CHUNK_INTRO = "The conversation so far, part {part} of {parts}, as a transcript:"
CHUNK_EARLIER = "Summary of the earlier parts (keep what still matters and add the new part):"


def answer_reserve(context_window: int) -> int:
    """Tokens of the window kept free for an answer (a quarter of it, at most 4,096)."""
    return min(4096, int(context_window * ANSWER_RESERVE_SHARE))


def compaction_input_limit(context_window: int) -> int:
    """Most estimated tokens one compaction request may carry."""
    return max(64, int(context_window * COMPACTION_INPUT_SHARE))


def transcript_lines(messages: Sequence[Mapping[str, Any]], max_tokens: int) -> list[str]:
    """Each message as one plain-text line (``User: …``, ``Assistant: …``, ``Tool result: …``), each at most
    ``max_tokens`` estimated tokens (a longer one keeps its start and end), for summarising in parts."""
    lines: list[str] = []
    for message in messages:
        results = blocks_of_type(message, "tool-result")
        if results:
            for result in results:
                lines.append("Tool result: " + blocks_text(content_blocks(result.get("content"))))
            continue
        role = "User" if message.get("role") == "user" else "Assistant"
        text = blocks_text(content_blocks(message.get("content")))
        if text:
            lines.append(f"{role}: {text}")
        for call in blocks_of_type(message, "tool-call"):
            lines.append(f"Tool call {call.get('name')}: {call.get('arguments') or '{}'}")
    return [cap_text(line, max_tokens) for line in lines]


def cap_text(line: str, max_tokens: int) -> str:
    """``line`` cut in its middle until it is at most ``max_tokens`` estimated tokens."""
    keep = len(line)
    capped = line
    while text_tokens(capped) > max_tokens and keep > 2:
        keep = max(2, int(keep * max_tokens / text_tokens(capped) * 0.9))
        half = keep // 2
        capped = f"{line[:half]} […{len(line) - 2 * half} characters left out…] {line[-half:]}"
    return capped


def chunk_lines(lines: Sequence[str], max_tokens: int) -> list[str]:
    """Consecutive lines joined into parts of at most ``max_tokens`` estimated tokens (a line is never split
    across parts; one longer than that is a part of its own)."""
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        tokens = text_tokens(line) + 1
        if current and size + tokens > max_tokens:
            parts.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += tokens
    if current:
        parts.append("\n".join(current))
    return parts


def chunk_prompt(part: str, index: int, total: int, summary: str, summary_tokens: int | None = None) -> str:
    """The text of one chunked compaction request (the summary so far capped at ``summary_tokens``)."""
    summary = summary.strip()
    if summary_tokens is not None:
        summary = cap_text(summary, summary_tokens)
    earlier = f"{CHUNK_EARLIER}\n{summary}\n\n" if summary else ""
    return f"{earlier}{CHUNK_INTRO.format(part=index + 1, parts=total)}\n{part}"
