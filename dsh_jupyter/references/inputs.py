"""Structured references (``{sessionId, label}``) and their normalisation before a prepare()."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._json import dumps
from .errors import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceError,
)


@dataclass(frozen=True)
class SessionReferenceInput:
    """One referenced session: its id and the label the user saw (``None`` means "use the id")."""

    session_id: str
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"sessionId": self.session_id}
        if self.label is not None:
            record["label"] = self.label
        return record


_MISSING = object()


def _fields(entry: object) -> tuple[object, object]:
    """``(session_id, label)`` of one entry, or raise when it is not reference-shaped at all."""
    if isinstance(entry, SessionReferenceInput):
        return entry.session_id, entry.label
    if isinstance(entry, Mapping):
        return entry.get("sessionId", _MISSING), entry.get("label")
    if entry is not None and not isinstance(entry, (str, bytes, int, float, bool)) and hasattr(entry, "session_id"):
        return getattr(entry, "session_id"), getattr(entry, "label", None)  # noqa: B009 - entry is any object
    raise SessionReferenceError(
        SESSION_REFERENCE_INVALID_REFERENCE,
        "each session reference must be a SessionReferenceInput or a mapping such as "
        f'{{"sessionId": "...", "label": "..."}}, got {type(entry).__name__}',
    )


def checked_fields(session_id: object, label: object, what: str) -> tuple[str, str | None]:
    """The session id and label of one reference (``what`` names it in the message), or the error that says
    which of the two is wrong: the id must be a string, the label a string or absent. The one rule for
    structured references and for mentions made from them."""
    if not isinstance(session_id, str):
        got = "nothing" if session_id is _MISSING else type(session_id).__name__
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"{what} needs a string sessionId, got {got}",
        )
    if label is not None and not isinstance(label, str):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"{what} has a label of type {type(label).__name__}; a label must be a string or absent",
        )
    return session_id, label


def normalise_references(target_id: str | None, references: object, max_references: int) -> list[SessionReferenceInput]:
    """Validate, de-duplicate (first appearance and first label win) and cap the references.

    Every entry is checked, duplicates included, so a self-reference anywhere is reported. The label
    defaults to the session id; an empty label is kept as it is.
    """
    if references is None:
        return []
    if isinstance(references, (str, bytes, Mapping)) or not isinstance(references, Sequence):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"references must be a list of session references, got {type(references).__name__}",
        )
    seen: set[str] = set()
    normalised: list[SessionReferenceInput] = []
    for index, entry in enumerate(references):
        session_id, label = checked_fields(*_fields(entry), f"session reference #{index + 1}")
        if session_id == target_id:
            raise SessionReferenceError(
                SESSION_REFERENCE_SELF_REFERENCE,
                f"session {dumps(session_id)} cannot reference itself; mention another session",
                details={"sessionId": session_id, "label": label},
            )
        if session_id in seen:
            continue
        seen.add(session_id)
        normalised.append(SessionReferenceInput(session_id, session_id if label is None else label))
    if len(normalised) > max_references:
        raise SessionReferenceError(
            SESSION_REFERENCE_TOO_MANY,
            f"a message may reference at most {max_references} sessions, this one references "
            f"{len(normalised)} distinct sessions; remove some mentions",
            details={"count": len(normalised), "limit": max_references},
        )
    return normalised
