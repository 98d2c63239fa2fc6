"""Compaction: replace older surface messages with one model-written checkpoint.

The checkpoint is a user message whose source is the compaction marker
(``{"kind": "plugin", "plugin": "compact", "compactionId": ...}``) appended with a ``replace`` op that
cites every shadowed seq, so readers (and the reference) fold it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..session.events import ASSISTANT_MESSAGE, USER_MESSAGE, Event
from ..session.messages import is_direct_user_source, text_block

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


def checkpoint_content(summary: str) -> list[dict[str, Any]]:
    return [text_block(CHECKPOINT_PREAMBLE), text_block(summary.strip()), text_block(CHECKPOINT_CLOSE)]
