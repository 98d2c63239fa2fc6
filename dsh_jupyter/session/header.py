"""The immutable session header (the first line of a JSONL log)."""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .._json import loads
from .errors import SessionFormatError

#: The on-disk format generation we read and write (the reference's ``SESSION_FORMAT_VERSION``).
SESSION_FORMAT_VERSION = 0

_MAX_SAFE_INTEGER = 2**53 - 1
_NEGATIVE_ZERO = re.compile(rb'"(createdAt|delegationDepth|seedLength)"\s*:\s*-0(?![0-9])')
_RETIRED_FIELDS = ("sandboxMode", "approvalPolicy")
_ALLOWED_FIELDS = frozenset(
    {
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "agentPreset",
        "isSeeded",
    }
)


def is_safe_nonnegative_int(value: object) -> TypeGuard[int]:
    """True for a JavaScript "non-negative safe integer" (no bools, no floats, no ``-0``)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= _MAX_SAFE_INTEGER
    if isinstance(value, float):
        # JSON numbers such as 1.0 parse as floats in some decoders; -0.0 is refused like the reference.
        return (
            math.isfinite(value)
            and value.is_integer()
            and 0 <= value <= _MAX_SAFE_INTEGER
            and math.copysign(1.0, value) > 0
        )
    return False


def safe_nonnegative_ints(values: list[Any]) -> tuple[int, ...] | None:
    """``values`` as a tuple of ints when every item is a JavaScript "non-negative safe integer", else ``None``.

    The same verdict as :func:`is_safe_nonnegative_int` on each item, but a list of plain ints (what our
    decoder gives for a list of seqs) is checked in C: its item types, then its least and greatest item."""
    if not values:
        return ()
    if set(map(type, values)) == {int} and min(values) >= 0 and max(values) <= _MAX_SAFE_INTEGER:
        return tuple(values)
    if all(is_safe_nonnegative_int(v) for v in values):  # floats such as 3.0, from other decoders
        return tuple(int(v) for v in values)
    return None


def now_ms() -> int:
    """Current time in integer epoch milliseconds (the format's clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class SessionHeader:
    """Who a session is: id, creation time and working directory. Titles are events, not header fields."""

    id: str
    created_at: int
    cwd: str | None = None
    version: int = SESSION_FORMAT_VERSION
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int = 0
    agent_preset: str | None = None
    is_seeded: bool | None = field(default=None, compare=False)

    @classmethod
    def new(cls, cwd: str | os.PathLike[str] | None = None, *, session_id: str | None = None,
            parent_session: str | None = None, created_at: int | None = None) -> SessionHeader:
        """A fresh header: a random UUID id, the current time and an absolute cwd (default: the process cwd)."""
        directory = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
        header = cls(
            id=session_id if session_id is not None else str(uuid.uuid4()),
            created_at=created_at if created_at is not None else now_ms(),
            cwd=directory,
            parent_session=parent_session,
        )
        header.validate()
        return header

    def validate(self) -> None:
        """Raise :class:`SessionFormatError` when a field is out of the format's range."""
        if self.version != SESSION_FORMAT_VERSION:
            raise SessionFormatError(
                f"unsupported session format version {self.version!r} (this reader knows {SESSION_FORMAT_VERSION})"
            )
        if not isinstance(self.id, str):
            raise SessionFormatError("session id must be a string")
        if not is_safe_nonnegative_int(self.created_at):
            raise SessionFormatError(
                f"createdAt must be a non-negative safe integer of epoch milliseconds, got {self.created_at!r}"
            )
        if not is_safe_nonnegative_int(self.delegation_depth):
            raise SessionFormatError(
                f"delegationDepth must be a non-negative safe integer, got {self.delegation_depth!r}"
            )
        if self.cwd is not None and not isinstance(self.cwd, str):
            raise SessionFormatError("cwd must be a string when present")
        if self.parent_session is not None and not isinstance(self.parent_session, str):
            raise SessionFormatError("parentSession must be a string when present")
        if self.seed_length is not None and not is_safe_nonnegative_int(self.seed_length):
            raise SessionFormatError("seedLength must be a non-negative safe integer when present")
        if self.origin is not None and self.origin != "subagent":
            raise SessionFormatError(f"origin must be absent or 'subagent', got {self.origin!r}")
        if self.agent_preset is not None and not isinstance(self.agent_preset, str):
            raise SessionFormatError("agentPreset must be a string when present")

    def to_json(self) -> dict[str, Any]:
        """The header record in the reference's key order; optional fields are omitted, never null."""
        record: dict[str, Any] = {"type": "session", "version": self.version, "id": self.id,
                                  "createdAt": int(self.created_at)}
        if self.cwd is not None:
            record["cwd"] = self.cwd
        if self.parent_session is not None:
            record["parentSession"] = self.parent_session
        if self.seed_length is not None:
            record["seedLength"] = int(self.seed_length)
        if self.origin is not None:
            record["origin"] = self.origin
        record["delegationDepth"] = int(self.delegation_depth)
        if self.agent_preset is not None:
            record["agentPreset"] = self.agent_preset
        if self.is_seeded is not None:
            record["isSeeded"] = self.is_seeded
        return record

    @classmethod
    def from_line(cls, raw: bytes) -> SessionHeader:
        """Parse a raw header line. JSON parsers read ``-0`` as ``0``, so that spelling is checked here."""
        match = _NEGATIVE_ZERO.search(raw)
        if match is not None:
            raise SessionFormatError(f"{match.group(1).decode()} must not be -0")
        try:
            record = loads(raw)
        except ValueError as exc:
            raise SessionFormatError(f"the session header is not valid JSON ({exc})") from None
        return cls.from_json(record)

    @classmethod
    def from_json(cls, record: Any) -> SessionHeader:
        """Parse and validate a header record; unknown or retired fields are refused."""
        if not isinstance(record, dict) or record.get("type") != "session":
            raise SessionFormatError("the first line is not a session header")
        version = record.get("version")
        if version != SESSION_FORMAT_VERSION:
            raise SessionFormatError(
                f"unsupported session format version {version!r} (this reader knows {SESSION_FORMAT_VERSION})"
            )
        for name in _RETIRED_FIELDS:
            if name in record:
                raise SessionFormatError(f"session header carries retired field {name!r}")
        unknown = sorted(set(record) - _ALLOWED_FIELDS)
        if unknown:
            raise SessionFormatError(f"session header has unknown field(s): {', '.join(unknown)}")
        if "id" not in record or "createdAt" not in record:
            raise SessionFormatError("session header needs 'id' and 'createdAt'")
        if "delegationDepth" not in record:
            raise SessionFormatError("session header needs 'delegationDepth' (0 for a top-level session)")
        created_at = record["createdAt"]
        depth = record["delegationDepth"]
        header = cls(
            id=record["id"],
            created_at=created_at,
            cwd=record.get("cwd"),
            version=version,
            parent_session=record.get("parentSession"),
            seed_length=record.get("seedLength"),
            origin=record.get("origin"),
            delegation_depth=depth,
            agent_preset=record.get("agentPreset"),
            is_seeded=record.get("isSeeded"),
        )
        header.validate()
        if isinstance(created_at, float) or isinstance(depth, float):
            header = cls(**{**header.__dict__, "created_at": int(created_at), "delegation_depth": int(depth)})
        return header


def notebook_label(notebook: str | None) -> str | None:
    """The notebook's file name (``reports/q3.ipynb`` gives ``q3.ipynb``), or ``None`` when there is none."""
    if not notebook or not notebook.strip():
        return None
    return os.path.basename(notebook.strip().rstrip("/\\")) or None
