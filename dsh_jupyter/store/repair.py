"""Cold-load repair: close a turn that a crash left open, so a resumed session starts from a clean state.

For the last turn, when it has no ``turn/end``:

1. every tool call requested in that turn without a result gets a ``tool/result`` marked ``isError``
   (code ``TOOL_OUTCOME_UNKNOWN`` when a ``tool/call`` event shows it started, else ``TOOL_NOT_STARTED``);
2. an open step gets its ``step/end``;
3. the turn gets ``turn/end`` with reason ``{"kind": "interrupted"}``.

The closers reuse the time of the last event, so they do not pretend to know when the crash happened.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..session import Event, SessionLog
from ..session.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from ..session.messages import text_block, tool_result_message

if TYPE_CHECKING:
    from .base import SessionWriter


_EXPLANATIONS = {
    TOOL_OUTCOME_UNKNOWN: (
        "No result was recorded for this tool call: the session stopped (crash, kill or restart) while it "
        "was running, so whether it finished and what it changed is unknown. Check its effects before "
        "running it again."
    ),
    TOOL_NOT_STARTED: (
        "This tool call never ran: the session stopped (crash, kill or restart) after the model requested "
        "it and before it started."
    ),
}


@dataclass
class _Request:
    call_id: str
    turn: Any
    step: Any
    call_seq: int | None = None


def _data(event: Event) -> dict[str, Any]:
    return event.data if isinstance(event.data, dict) else {}


def _result_call_id(event: Event) -> str | None:
    message = event.message or {}
    source = message.get("source")
    if isinstance(source, dict) and isinstance(source.get("callId"), str):
        call_id: str = source["callId"]
        return call_id
    for block in message.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "tool-result" and isinstance(block.get("toolCallId"), str):
            tool_call_id: str = block["toolCallId"]
            return tool_call_id
    return None


@dataclass
class OpenTurn:
    """The state of an unfinished final turn."""

    turn: Any
    step: tuple[Any, Any] | None
    pending: list[_Request]


def find_open_turn(events: Iterable[Event]) -> OpenTurn | None:
    """The final turn if it has no ``turn/end``, with its open step and unanswered tool calls."""
    state: OpenTurn | None = None
    requests: dict[str, _Request] = {}
    for event in events:
        data = _data(event)
        if event.type == TURN_START:
            state = OpenTurn(data.get("turn"), None, [])
            requests = {}
        elif state is None:
            continue
        elif event.type == TURN_END:
            state = None
        elif event.type == STEP_START:
            state.step = (data.get("turn", state.turn), data.get("step"))
        elif event.type == STEP_END:
            state.step = None
        elif event.type == ASSISTANT_MESSAGE:
            message = event.message or {}
            for block in message.get("content") or ():
                if isinstance(block, dict) and block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                    requests.setdefault(block["id"], _Request(block["id"], data.get("turn"), data.get("step")))
        elif event.type == TOOL_CALL and isinstance(data.get("callId"), str):
            request = requests.setdefault(data["callId"], _Request(data["callId"], data.get("turn"), data.get("step")))
            request.call_seq = event.seq
        elif event.type == TOOL_RESULT:
            call_id = _result_call_id(event)
            if call_id is not None:
                requests.pop(call_id, None)
    if state is not None:
        state.pending = list(requests.values())
    return state


def repair_open_turn(log: SessionLog) -> list[Event]:
    """Append the closers of an open final turn to ``log`` (listeners, e.g. a writer, see them).

    Returns the appended events (empty when the last turn is closed or there is none)."""
    state = find_open_turn(log.events)
    if state is None or log.last_seq is None:
        return []
    when = log.event(log.last_seq).time
    added: list[Event] = []
    for request in state.pending:
        code = TOOL_OUTCOME_UNKNOWN if request.call_seq is not None else TOOL_NOT_STARTED
        text = _EXPLANATIONS[code]
        data = {
            "turn": request.turn,
            "step": request.step,
            "message": tool_result_message(request.call_id, [text_block(text)], is_error=True),
            "error": {"code": code, "message": text},
        }
        cited = [request.call_seq] if request.call_seq is not None else None
        added.append(log.append(TOOL_RESULT, data, source_event_seqs=cited, time=when))
    if state.step is not None:
        turn, step = state.step
        added.append(log.append(STEP_END, {"turn": turn, "step": step}, time=when))
    added.append(log.append(TURN_END, {"turn": state.turn, "reason": {"kind": "interrupted"}}, time=when))
    return added


_W = TypeVar("_W", bound="SessionWriter")


def resumed(session: SessionLog, writer: _W) -> tuple[SessionLog, _W]:
    """Attach ``writer`` to a session a backend just opened for writing and close a turn a crash left open
    (writing that repair at once); on any failure the writer is closed, releasing its lock."""
    try:
        writer.attach(session)
        if repair_open_turn(session):
            writer.flush()
    except BaseException:
        writer.close()
        raise
    return session, writer
