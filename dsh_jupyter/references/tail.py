"""The end of a conversation, read from the end: what ``sessions show`` prints of a session of any size.

:func:`last_messages` walks a surface backwards, projecting one event at a time (:func:`.projection.project_event`)
until it has the messages asked for; over a lazily decoded surface (a JSONL read with
:data:`~dsh_jupyter.store.scan.STREAM_SURFACE`) only those events are decoded, so the last 20 messages of a
1 GB session cost about what they hold. Each becomes an item of the export's model
(:func:`dsh_jupyter.conversation.log_feed.projected_item`), cut by the same rule as soon as it is read.
:func:`read_forward` is the one forward pass for surfaces no catalog has counted, or that can only be read
forwards (another tool's transcript, a PostgreSQL session streamed in chunks).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..conversation.items import Answer, Checkpoint, Prompt, role_of
from ..conversation.limits import SHOW
from ..conversation.log_feed import projected_item
from ..session.events import Event
from ..session.projection import USER, project_event

Shown = Prompt | Answer | Checkpoint


def last_messages(events: Sequence[Event], limit: int, chars: int) -> list[Shown]:
    """The last ``limit`` projected messages of the surface ``events``, oldest first, each cut to ``chars``
    characters; ``events`` is read from its end, one event at a time."""
    found: list[Shown] = []
    limits = SHOW.with_text(chars)
    index = len(events)
    while index > 0 and len(found) < limit:
        index -= 1
        message = project_event(events[index])
        if message is not None:
            found.append(projected_item(message, limits))
    found.reverse()
    return found


def read_forward(events: Iterable[Event], limit: int, chars: int) -> tuple[int, int, list[Shown]]:
    """One forward pass over a surface, one event at a time: its projected user (checkpoints included) and
    assistant messages counted, and the last ``limit`` of them kept, each cut to ``chars`` characters (for
    surfaces that are not counted elsewhere or can only be read forwards)."""
    user = assistant = 0
    kept: deque[Shown] = deque(maxlen=limit)
    limits = SHOW.with_text(chars)
    for event in events:
        message = project_event(event)
        if message is None:
            continue
        if message.role == USER:
            user += 1
        else:
            assistant += 1
        kept.append(projected_item(message, limits))
    return user, assistant, list(kept)


def conversation_lines(total: int, shown: Sequence[Shown], chars: int, more_hint: str) -> Iterator[str]:
    """``show``'s conversation as text (terminal escaping is the caller's): a heading, what was left out
    (``more_hint`` says how to see it), then the shown messages, each with what was cut of it."""
    if not shown:
        return
    omitted = total - len(shown)
    note = f"last {len(shown):,} of {total:,} messages" if omitted > 0 else f"{len(shown):,} messages"
    yield f"--- conversation ({note}; each cut to {chars:,} characters) ---"
    if omitted > 0:
        yield f"… {omitted:,} earlier {'message' if omitted == 1 else 'messages'} not shown{more_hint}"
    for item in shown:
        yield f"[{'checkpoint' if isinstance(item, Checkpoint) else role_of(item)}] {item.shown}"


def conversation_json(total: int, shown: Sequence[Shown]) -> dict[str, Any]:
    """``show --json``'s conversation: the last messages, each cut, and how many were left out."""
    return {
        "messages": [{"role": role_of(m), "text": m.text, "truncated": m.cut > 0,
                      "checkpoint": isinstance(m, Checkpoint)} for m in shown],
        "omittedMessages": total - len(shown),
    }
