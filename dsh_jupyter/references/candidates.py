"""Candidate discovery: which other sessions a prompt could reference, ranked for a picker.

Ranking is by workspace affinity, stable in the listing order (newest first): sessions in the target's
working directory, then sessions with no recorded directory, then everything else. A query filters
case-insensitively on the session id, its working directory and its latest title, never on message
bodies. Labels are the latest title, or the session id when there is none or it cannot be read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from ..conversation.spend import SpendJson
from ..ranking import workspace_rank
from ..session.header import is_safe_nonnegative_int
from .cancellation import CancelFlag, call_cancellable, raise_if_cancelled
from .errors import SESSION_REFERENCE_INVALID_CONFIG, SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError
from .mentions import format_session_reference_mention
from .target import ReferenceTarget

if TYPE_CHECKING:
    from ..query import SessionQuery, SessionRecord


class CandidateJson(TypedDict):
    """A candidate as hosts hand it on (:meth:`SessionReferenceCandidate.to_json`)."""

    sessionId: str
    label: str
    cwd: NotRequired[str]  # left out when the session recorded none, never null
    sameWorkspace: bool
    createdAt: int
    notebook: NotRequired[str]  # the notebook the session was made in, when known
    cost: NotRequired[SpendJson]  # what its model calls cost, when any call had a known cost


class RemoteCandidateJson(CandidateJson):
    """A candidate as a browser gets it (``dsh/api/candidates``, the labextension's ``ISessionCandidate``)."""

    mention: str


@dataclass(frozen=True)
class SessionReferenceCandidate:
    """One session a prompt may reference. ``cwd`` is ``None`` when the session recorded none."""

    session_id: str
    label: str
    cwd: str | None
    same_workspace: bool
    created_at: int
    notebook: str | None = None
    cost: SpendJson | None = None

    def to_json(self) -> CandidateJson:
        """``sessionId, label, cwd?, sameWorkspace, createdAt, notebook?, cost?`` (``cwd``, ``notebook`` and
        ``cost`` left out when unknown, never null)."""
        record: CandidateJson
        if self.cwd is None:
            record = {"sessionId": self.session_id, "label": self.label, "sameWorkspace": self.same_workspace,
                      "createdAt": self.created_at}
        else:
            record = {"sessionId": self.session_id, "label": self.label, "cwd": self.cwd,
                      "sameWorkspace": self.same_workspace, "createdAt": self.created_at}
        if self.notebook is not None:
            record["notebook"] = self.notebook
        if self.cost is not None:
            record["cost"] = self.cost
        return record

    def to_remote_json(self) -> RemoteCandidateJson:
        """:meth:`to_json` plus the canonical ``mention`` a host inserts into the prompt draft."""
        return {**self.to_json(), "mention": format_session_reference_mention(self.session_id, self.label)}


def validate_limit(limit: object) -> int:
    if not is_safe_nonnegative_int(limit) or not isinstance(limit, int) or limit == 0:
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"candidate limit must be a positive safe integer, got {limit!r}",
        )
    return int(limit)


def _read_title(query: SessionQuery, session_id: str) -> str | None:
    try:
        title = query.title(session_id)
    except Exception:  # an unreadable title only costs the label, never the candidate
        return None
    return title if isinstance(title, str) else None


def _ranked(records: list[SessionRecord], target: ReferenceTarget) -> Iterator[SessionRecord]:
    others = [r for r in records if r.header.id != target.session_id]
    order = sorted(range(len(others)), key=lambda i: (workspace_rank(others[i].header.cwd, target.cwd), i))
    return (others[i] for i in order)


def _select(
    query: SessionQuery, target: ReferenceTarget, needle: str, limit: int, cancel: CancelFlag | None
) -> list[SessionReferenceCandidate]:
    records = query.list_sessions()
    raise_if_cancelled(cancel)
    selected: list[SessionReferenceCandidate] = []
    # Walking in rank order and stopping at ``limit`` gives exactly "filter all, sort, cut" while
    # reading titles only for sessions that are kept or whose id and cwd do not already match.
    for record in _ranked(records, target):
        if len(selected) >= limit:
            break
        raise_if_cancelled(cancel)
        header = record.header
        title = _read_title(query, header.id)
        label = title if title is not None else header.id
        if needle and not (
            needle in header.id.lower()
            or (header.cwd is not None and needle in header.cwd.lower())
            or needle in label.lower()
        ):
            continue
        selected.append(
            SessionReferenceCandidate(
                session_id=header.id,
                label=label,
                cwd=header.cwd,
                same_workspace=header.cwd is not None and header.cwd == target.cwd,
                created_at=int(header.created_at),
            )
        )
    costs = query.spends([c.session_id for c in selected]) if selected else {}
    return [dataclasses.replace(c, cost=costs[c.session_id].to_json()) if c.session_id in costs else c
            for c in selected]


#: The scanning path (every header, then titles in rank order), for sources that merge it with their own.
select_by_scanning = _select


# --- candidate sources (the session catalog plugs in here) ---------------------------------------------------
class CandidateSource(Protocol):
    """Somewhere that answers candidate queries without scanning ``query``'s store (the session catalog).

    ``select_candidates`` must follow the rules of this module (filter, ranking, labels, self excluded,
    at most ``limit``) over every session it knows plus ``query``'s live sessions. ``needle`` is already
    lowercased. ``body=True`` also matches sessions whose projected messages contain the words of ``needle``.
    """

    def select_candidates(self, query: SessionQuery, target: ReferenceTarget, needle: str, limit: int,
                          cancel: CancelFlag | None = None, *, body: bool = False) -> list[SessionReferenceCandidate]:
        ...


def list_candidates(
    query: SessionQuery, target: ReferenceTarget, text: str = "", limit: int = 50, cancel: CancelFlag | None = None,
    *, source: CandidateSource | None = None, body: bool = False,
) -> list[SessionReferenceCandidate]:
    """Ranked candidates for ``target``; see the module docstring for the rules.

    With ``source`` (the session catalog) the candidates come from it instead of a scan of ``query``'s
    store; ``body=True`` (search message bodies too) needs a ``source``.

    Raises ``SESSION_REFERENCE_INVALID_REFERENCE`` for a bad limit and ``SESSION_REFERENCE_CANCELLED``
    as soon as ``cancel`` is set, even while the listing or a title read is still blocked.
    """
    limit = validate_limit(limit)
    if not isinstance(text, str):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE, f"a candidate query must be a string, got {type(text).__name__}"
        )
    if body and source is None:
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_CONFIG,
            "searching message bodies needs the session catalog; create the resolver with "
            "catalog=dsh_jupyter.catalog.open_catalog()",
        )
    needle = text.lower()
    raise_if_cancelled(cancel)
    if source is not None:
        return call_cancellable(lambda: source.select_candidates(query, target, needle, limit, cancel, body=body),
                                cancel, name="dsh-reference-candidates")
    return call_cancellable(lambda: _select(query, target, needle, limit, cancel), cancel,
                            name="dsh-reference-candidates")
