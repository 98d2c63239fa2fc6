"""What the catalog returns about a session, and the ordering rules every path shares."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..conversation.spend import Spend
from ..ranking import workspace_rank

if TYPE_CHECKING:
    from ..references.candidates import SessionReferenceCandidate

#: File name of a session's log in its folder (``dsh_jupyter.store.paths.LOG_NAME``, spelled out here so a
#: query does not import the storage backends; a test checks they agree).
LOG_NAME = "session.jsonl"


@dataclass(frozen=True)
class CatalogEntry:
    """One session as the catalog knows it.

    ``title`` is the latest ``session/title`` title (``None`` when there is none or it cannot be read);
    ``label`` is the title or, failing that, the id. ``store`` is the store root and ``path`` the log.
    Counts are of the current surface: ``user_messages`` and ``assistant_messages`` are the projected
    messages (what a reference would carry). ``indexed`` is ``False`` for a session found by the scanning
    fallback that the catalog has not indexed yet (its counts are then unknown and 0). ``body_truncated``
    is ``True`` when the session's conversation is longer than the body index keeps per session: body search
    sees only its first part, ``body_messages`` messages (ids, cwds and titles are always searched in full).
    ``spend`` is what the session's model calls cost (:mod:`dsh_jupyter.conversation.spend`; nothing known for
    a session the catalog has not indexed).
    """

    session_id: str
    store: str
    folder: str
    cwd: str | None
    created_at: int
    title: str | None
    events: int = 0
    surface: int = 0
    user_messages: int = 0
    assistant_messages: int = 0
    size: int = 0
    mtime_ns: int = 0
    readable: bool = True
    notebook: str | None = None
    indexed: bool = True
    live: bool = False
    body_truncated: bool = False
    body_messages: int = 0
    spend: Spend = field(default_factory=Spend)

    @property
    def label(self) -> str:
        return self.title if self.title is not None else self.session_id

    @property
    def path(self) -> str:
        return os.path.join(self.store, self.folder, LOG_NAME)

    def order_key(self, target_cwd: str | None) -> tuple[int, int, str]:
        """Candidate order: workspace rank, then newest first, then id."""
        return (workspace_rank(self.cwd, target_cwd), -self.created_at, self.session_id)

    def matches(self, needle: str) -> bool:
        """The reference's filter: ``needle`` (already lowercased) in the id, the cwd or the label."""
        if not needle:
            return True
        return (needle in self.session_id.lower() or (self.cwd is not None and needle in self.cwd.lower())
                or needle in self.label.lower())

    def candidate(self, target_cwd: str | None) -> SessionReferenceCandidate:
        """This session as a candidate to mention from a session in ``target_cwd``."""
        from ..references.candidates import SessionReferenceCandidate

        return SessionReferenceCandidate(session_id=self.session_id, label=self.label, cwd=self.cwd,
                                         same_workspace=self.cwd is not None and self.cwd == target_cwd,
                                         created_at=self.created_at, notebook=self.notebook,
                                         cost=self.spend.to_json())

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"sessionId": self.session_id, "label": self.label, "title": self.title}
        if self.cwd is not None:
            record["cwd"] = self.cwd
        record["createdAt"] = self.created_at
        record["store"] = self.store
        record["path"] = self.path
        if self.notebook is not None:
            record["notebook"] = self.notebook
        record["messageCounts"] = {"events": self.events, "surface": self.surface, "user": self.user_messages,
                                   "assistant": self.assistant_messages}
        record["size"] = self.size
        record["readable"] = self.readable
        record["indexed"] = self.indexed
        record["bodyIndexTruncated"] = self.body_truncated
        cost = self.spend.to_json()
        if cost is not None:
            record["cost"] = cost
        return record
