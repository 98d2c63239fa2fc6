"""The event envelope, the known event kinds and packed chunk rows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import SessionFormatError
from .header import is_safe_nonnegative_int, safe_nonnegative_ints

# Event kinds of the format (reference release-candidate baseline plus the later additions we read).
TURN_START = "turn/start"
TURN_END = "turn/end"
STEP_START = "step/start"
STEP_END = "step/end"
USER_MESSAGE = "user/message"
ASSISTANT_CHUNK = "assistant/chunk"
ASSISTANT_MESSAGE = "assistant/message"
TOOL_CALL = "tool/call"
TOOL_RESULT = "tool/result"
SESSION_TITLE = "session/title"
COMPACTION_START = "compaction/start"
COMPACTION_SUMMARY = "compaction/summary"
COMPACTION_END = "compaction/end"
REQUEST_HEADER = "request/header"
REQUEST_CONTEXT = "request/context"
TODO_WRITE = "todo/write"
SESSION_END_SEED = "session/end-seed"
SYSTEM_MESSAGE = "system/message"

#: ``error.code`` of a synthetic ``tool/result``: the call started but its outcome is unknown (the turn was
#: interrupted, or the session stopped while it ran).
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
#: ``error.code`` of a synthetic ``tool/result``: the model asked for the call, but it never started.
TOOL_NOT_STARTED = "TOOL_NOT_STARTED"

#: Event types that can sit on the model-visible surface (they carry a ``surfaceOp``).
SURFACE_TYPES = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})

KNOWN_TYPES = frozenset(
    {
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        USER_MESSAGE,
        ASSISTANT_CHUNK,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
        SESSION_TITLE,
        COMPACTION_START,
        COMPACTION_SUMMARY,
        COMPACTION_END,
        REQUEST_HEADER,
        REQUEST_CONTEXT,
        TODO_WRITE,
        SESSION_END_SEED,
    }
)

#: Packed rows: runs of same-kind stream deltas stored on one line.
PACKED_ROW_TYPES = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta", "tool-call-chunks": None}

_ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})


@dataclass(frozen=True)
class ReplaceOp:
    """Replace the positional run of surface nodes from seq ``start`` through seq ``end``."""

    start: int
    end: int

    def to_json(self) -> dict[str, Any]:
        return {"op": "replace", "start": self.start, "end": self.end}


SurfaceOp = Literal["append"] | ReplaceOp


@dataclass(frozen=True)
class Event:
    """One log record: ``{type, seq, time, data}`` plus surface fields for message events."""

    type: str
    seq: int
    time: int
    data: Any
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None
    ignorable: bool = False

    def to_json(self) -> dict[str, Any]:
        """The envelope in the reference's key order."""
        record: dict[str, Any] = {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}
        if self.source_event_seqs is not None:
            record["sourceEventSeqs"] = list(self.source_event_seqs)
        if self.surface_op is not None:
            record["surfaceOp"] = self.surface_op if self.surface_op == "append" else self.surface_op.to_json()
        if self.ignorable:
            record["ignorable"] = True
        return record

    @property
    def message(self) -> dict[str, Any] | None:
        """The message of a surface event (``data`` for user messages, ``data.message`` otherwise)."""
        if self.type in (USER_MESSAGE, SYSTEM_MESSAGE):
            return self.data if isinstance(self.data, dict) else None
        if self.type in (ASSISTANT_MESSAGE, TOOL_RESULT) and isinstance(self.data, dict):
            message = self.data.get("message")
            return message if isinstance(message, dict) else None
        return None


def parse_surface_op(value: Any) -> SurfaceOp:
    """Validate a raw ``surfaceOp`` value."""
    if value == "append":
        return "append"
    if isinstance(value, Mapping) and value.get("op") == "replace":
        start, end = value.get("start", value.get("startSeq")), value.get("end", value.get("endSeq"))
        if is_safe_nonnegative_int(start) and is_safe_nonnegative_int(end):
            return ReplaceOp(int(start), int(end))
    raise SessionFormatError(f"invalid surfaceOp {value!r}")


def event_from_json(record: Any) -> Event:
    """Validate one envelope record (not a packed row) and build the :class:`Event`."""
    if not isinstance(record, dict):
        raise SessionFormatError("an event line must hold a JSON object")
    extra = set(record) - _ENVELOPE_KEYS
    if extra:
        raise SessionFormatError(f"event envelope has unknown key(s): {', '.join(sorted(extra))}")
    kind = record.get("type")
    if not isinstance(kind, str):
        raise SessionFormatError("event 'type' must be a string")
    seq = record.get("seq")
    if not is_safe_nonnegative_int(seq):
        raise SessionFormatError(f"event seq must be a non-negative integer, got {seq!r}")
    when = record.get("time")
    if not is_safe_nonnegative_int(when):
        raise SessionFormatError(f"event time must be integer epoch milliseconds, got {when!r}")
    if "data" not in record:
        raise SessionFormatError("event has no 'data'")
    ignorable = record.get("ignorable", False) is True
    if kind not in KNOWN_TYPES and kind != SYSTEM_MESSAGE and not ignorable:
        raise SessionFormatError(f"unknown event type {kind!r} (not marked ignorable)")
    op: SurfaceOp | None = None
    if "surfaceOp" in record:
        if kind not in SURFACE_TYPES and kind != SYSTEM_MESSAGE:
            raise SessionFormatError(f"{kind} events cannot carry a surfaceOp")
        op = parse_surface_op(record["surfaceOp"])
    elif kind in SURFACE_TYPES:
        raise SessionFormatError(f"{kind} events need a surfaceOp")
    cited: tuple[int, ...] | None = None
    if "sourceEventSeqs" in record:
        raw = record["sourceEventSeqs"]
        cited = safe_nonnegative_ints(raw) if isinstance(raw, list) else None
        if cited is None:
            raise SessionFormatError("sourceEventSeqs must be a list of seqs")
    return Event(kind, int(seq), int(when), record["data"], op, cited, ignorable)


def expand_packed_row(record: Mapping[str, Any]) -> Iterator[Event]:
    """Unpack a ``text-chunks`` / ``reasoning-chunks`` / ``tool-call-chunks`` row into chunk events."""
    kind = record.get("type")
    seq0, time0, data = record.get("seq0"), record.get("time0"), record.get("data")
    if not (is_safe_nonnegative_int(seq0) and is_safe_nonnegative_int(time0) and isinstance(data, dict)):
        raise SessionFormatError(f"malformed {kind} row")
    pieces = data.get("args") if kind == "tool-call-chunks" else data.get("texts")
    deltas = data.get("dt")
    if not isinstance(pieces, list) or not isinstance(deltas, list) or len(deltas) != len(pieces) - 1:
        raise SessionFormatError(f"malformed {kind} row")
    seq, when = int(seq0), int(time0)
    for k, piece in enumerate(pieces):
        if k:
            when += int(deltas[k - 1])
        if kind == "tool-call-chunks":
            chunk: dict[str, Any] = {"type": "tool-call-delta", "index": data.get("index"), "id": data.get("id")}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = piece
        else:
            chunk = {"type": PACKED_ROW_TYPES[str(kind)], "index": data.get("index"), "text": piece}
        yield Event(ASSISTANT_CHUNK, seq + k, when,
                    {"turn": data.get("turn"), "step": data.get("step"), "chunk": chunk})


def events_from_record(record: Any) -> list[Event]:
    """One decoded line to its events (one, or several for a packed row)."""
    if isinstance(record, dict) and record.get("type") in PACKED_ROW_TYPES:
        return list(expand_packed_row(record))
    return [event_from_json(record)]
