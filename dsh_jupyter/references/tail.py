"""The end of a conversation, read from the end: what ``sessions show`` prints of a session of any size.

:func:`last_messages` walks a surface backwards, projecting one event at a time (:func:`.projection.project_event`)
until it has the messages asked for; over a lazily decoded surface (a JSONL read with
:data:`~dsh_jupyter.store.scan.STREAM_SURFACE`) only those events are decoded, so the last 20 messages of a
1 GB session cost about what they hold. Each text is cut to a number of characters as soon as it is read.
:func:`count_messages` is the forward pass for when no catalog has counted them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..session.events import Event
from .projection import USER, project_event


@dataclass(frozen=True)
class ShownMessage:
    """One projected message as shown: ``text`` is its first characters, ``length`` the whole text's."""

    role: str
    checkpoint: bool
    text: str
    length: int

    @property
    def truncated(self) -> bool:
        return self.length > len(self.text)

    @property
    def more(self) -> int:
        """Characters left out."""
        return self.length - len(self.text)


def last_messages(events: Sequence[Event], limit: int, chars: int) -> list[ShownMessage]:
    """The last ``limit`` projected messages of the surface ``events``, oldest first, each cut to ``chars``
    characters; ``events`` is read from its end, one event at a time."""
    found: list[ShownMessage] = []
    index = len(events)
    while index > 0 and len(found) < limit:
        index -= 1
        message = project_event(events[index])
        if message is not None:
            found.append(ShownMessage(message.role, message.checkpoint, message.text[:chars], len(message.text)))
    found.reverse()
    return found


def count_messages(events: Iterable[Event]) -> tuple[int, int]:
    """The projected user (checkpoints included) and assistant messages of a surface, read one event at a time."""
    user = assistant = 0
    for event in events:
        message = project_event(event)
        if message is not None:
            if message.role == USER:
                user += 1
            else:
                assistant += 1
    return user, assistant
