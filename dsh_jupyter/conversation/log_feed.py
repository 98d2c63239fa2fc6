"""Stored session events into the transcript fold: what exports, ``sessions show`` and static copies read.

The log differs from the live input only in its grain: it keeps whole messages (no deltas; the log-only
``assistant/chunk`` rows are skipped), a message's reasoning as blocks beside its text, a call's approval in
its result's ``meta.approval``, and a call cut off by an interruption or a crash as a result whose error code
says its outcome is unknown. :func:`feed` turns each event into the fold's calls; :func:`transcript_items`
streams a log's items one at a time in bounded memory; :func:`projected_item` makes the item of one projected
message (the surface a reference carries).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..session.events import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    TOOL_CALL,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from ..session.image_blocks import content_text
from ..session.messages import blocks_text
from .fold import Transcript
from .items import Answer, Checkpoint, Item, Prompt, clip
from .limits import EXPORT, Limits
from .tally import Tally

if TYPE_CHECKING:
    from ..session.projection import ProjectedMessage

#: Items held back while a tool call waits for its result; past this many the oldest are written as they are.
MAX_PENDING = 1_000
#: Result error codes that mean a call's outcome is unknown (its turn was cut off).
_STOPPED_CODES = frozenset({TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED})


# Stored data is decoded JSON: objects are dicts (an exact type check is much cheaper than ``Mapping``'s).
def _data(event: Event) -> Mapping[str, Any]:
    return event.data if isinstance(event.data, dict) else {}


def _message(data: Mapping[str, Any]) -> Mapping[str, Any]:
    message = data.get("message", data)
    return message if isinstance(message, dict) else {}


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return list(content) if isinstance(content, list) else []


def _assistant(transcript: Transcript, data: Mapping[str, Any]) -> None:
    blocks = _blocks(_message(data))
    reasoning = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "reasoning"
                          and isinstance(b.get("text"), str) and b["text"])
    if reasoning.strip():
        transcript.reasoning_delta(reasoning, whole=True)
    usage = data.get("usage")
    transcript.assistant_message(blocks_text(blocks), usage if isinstance(usage, Mapping) else None)


def _call(transcript: Transcript, data: Mapping[str, Any]) -> None:
    arguments = data.get("arguments")
    transcript.tool_started(str(data.get("callId", "")), str(data.get("name", "tool")),
                            arguments if isinstance(arguments, str) else json.dumps(arguments))


def _title(transcript: Transcript, data: Mapping[str, Any]) -> None:
    title = data.get("title")
    if isinstance(title, str) and title.strip():
        transcript.set_title(title)


def turn_end_reason(data: Mapping[str, Any]) -> tuple[str, str | None]:
    """How a logged turn ended (a ``turn/end`` event's data): its reason (``completed`` when the record says
    none) and the error message, if any."""
    reason = data.get("reason")
    what = reason.get("kind") if isinstance(reason, Mapping) else reason
    message = reason.get("message") if isinstance(reason, Mapping) else None
    return (what if isinstance(what, str) and what else "completed"), (message if isinstance(message, str) else None)


def _result(transcript: Transcript, data: Mapping[str, Any]) -> None:
    meta, error = data.get("meta"), data.get("error")
    approval = meta.get("approval") if isinstance(meta, Mapping) else None
    stopped = isinstance(error, Mapping) and error.get("code") in _STOPPED_CODES
    for block in _blocks(_message(data)):
        if not (isinstance(block, Mapping) and block.get("type") == "tool-result"):
            continue
        call_id = str(block.get("toolCallId", ""))
        if isinstance(approval, Mapping):
            transcript.approval(call_id, approval)
        inner = block.get("content")
        transcript.tool_finished(call_id, "tool", content_text(inner if isinstance(inner, list) else []),
                                 is_error=block.get("isError") is True, stopped=stopped, unmatched=False)


_FEEDERS: dict[str, Callable[[Transcript, Mapping[str, Any]], None]] = {
    USER_MESSAGE: lambda transcript, data: transcript.message(data),
    ASSISTANT_MESSAGE: _assistant,
    TOOL_CALL: _call,
    TOOL_RESULT: _result,
    SESSION_TITLE: _title,
    TURN_START: lambda transcript, data: transcript.turn_started(),
    TURN_END: lambda transcript, data: transcript.turn_ended(*turn_end_reason(data)),
}
#: The event types :func:`feed` reads. Every other one (chunk rows, step markers, request context, ...) leaves the
#: transcript as it was, so a reader may drop those before doing any work on them: an export masks only these.
FED_TYPES = frozenset(_FEEDERS)


def feed(transcript: Transcript, event: Event) -> None:
    """Fold one stored event into ``transcript`` (events it does not show are ignored)."""
    feeder = _FEEDERS.get(event.type)
    if feeder is not None:
        feeder(transcript, _data(event))


def transcript_items(events: Iterable[Event], tally: Tally | None = None, *, limits: Limits = EXPORT,
                     kinds: tuple[type, ...] | None = None, hold: int = MAX_PENDING) -> Iterator[Item]:
    """The items of ``events``, in log order, one at a time: an item is yielded as soon as it is complete (a
    tool call once its result is read, or its turn ends), so only the items after a call still waiting for its
    result are held (at most ``hold``). ``kinds``: the item types the caller shows (``None``: all); ``tally``
    counts what was yielded and records the latest title met."""
    tally = tally if tally is not None else Tally(limits=limits)
    fold = Transcript(limits=limits, max_items=None)
    for event in events:
        feed(fold, event)
        if event.type == SESSION_TITLE and fold.title:
            tally.title = fold.title
        for item in fold.take_settled(hold):
            if kinds is None or isinstance(item, kinds):
                tally.add(item)
                yield item
    for item in fold.take_all():
        if kinds is None or isinstance(item, kinds):
            tally.add(item)
            yield item


def log_items(events: Iterable[Event], *, limits: Limits = EXPORT) -> list[Item]:
    """Every item of ``events`` in memory (small logs and tests; exports stream :func:`transcript_items`)."""
    return list(transcript_items(events, limits=limits))


def projected_item(message: ProjectedMessage, limits: Limits = EXPORT) -> Prompt | Answer | Checkpoint:
    """One projected message (prompt, answer or compaction checkpoint) as its item, cut by ``limits``
    (projected messages are whole and not numbered: they come from a surface, not a fold)."""
    item: Prompt | Answer | Checkpoint
    if message.checkpoint:
        item = Checkpoint(0, message.text)
    elif message.role == "user":
        item = Prompt(0, message.text)
    else:
        item = Answer(0, message.text, streaming=False)
    clip(item, limits.text)
    return item
