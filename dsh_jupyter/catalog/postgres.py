"""The catalog of a PostgreSQL store: candidates and body search answered by the database itself.

The session rows of :class:`~dsh_jupyter.store.postgres.PostgresStore` carry what a candidate query needs
(latest title, cwd, lowercased id/cwd/label, and the words of the projected messages), kept current by the
writer in each flush's transaction. So a keystroke costs one indexed query, and row-level security
decides what a role sees: its own sessions and those shared with it.

Rules, the same as everywhere else (:mod:`dsh_jupyter.references.candidates`,
:mod:`dsh_jupyter.session.words`): the needle filters case-insensitively on id, cwd and label (title, else
id); ranking is :func:`dsh_jupyter.ranking.workspace_rank` (same cwd, then no cwd, then the rest), each newest first
(``createdAt`` descending, then id). Body search: every word of the query occurs among the projected
user/assistant words (case and diacritics folded, the last word also as a prefix); tool output and
reasoning are never indexed. Words are stored as exact lexemes (``array_to_tsvector``), so PostgreSQL's
own parser and dictionaries never change what a word is. The query runs in ``dsh.find_sessions`` (see
:mod:`dsh_jupyter.store.postgres_schema`): it applies the same visibility as the row-level security
policies itself, so that the trigram and word indexes can be used.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..conversation.spend import Spend
from ..ranking import workspace_rank
from ..references.candidates import SessionReferenceCandidate
from ..session import SessionHeader
from ..session.words import body_words, event_texts, fold, match_fields, query_words, storable, texts_match
from ..store.sql import session_key
from .live import live_entry, live_logs, live_texts

if TYPE_CHECKING:
    from ..query import SessionQuery
    from ..references.target import ReferenceTarget
    from ..session import SurfaceSnapshot
    from ..store.postgres import PostgresStore


def body_tsquery(text: str) -> str | None:
    """A tsquery (exact lexemes) for a body search: every word, the last one as a prefix unless the text
    ends with a space; ``None`` when the text has no word."""
    words = [fold(w) for w in query_words(text)]
    words = [w for w in words if w]
    if not words:
        return None
    quoted = ["'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in words]
    if not text[-1:].isspace():
        quoted[-1] += ":*"
    return " & ".join(quoted)


def _like(text: str) -> str:
    """A LIKE pattern that matches ``text`` anywhere (its own ``%``, ``_`` and ``\\`` taken literally)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@dataclass(frozen=True)
class Found:
    """One session a candidate or search query returned (``spend``: what its model calls cost)."""

    header: SessionHeader
    title: str | None
    spend: Spend = field(default_factory=Spend)

    @property
    def label(self) -> str:
        return self.title if self.title is not None else self.header.id


class PostgresCatalog:
    """The :class:`~dsh_jupyter.references.resolver.CatalogSource` of a :class:`PostgresStore`."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def search(self, target_id: str | None, target_cwd: str | None, needle: str, limit: int, *,
               body: bool = False) -> list[Found]:
        """Visible sessions matching ``needle`` (lowercased), best first, at most ``limit``."""
        tsquery = body_tsquery(needle) if body else None
        params = (session_key(target_id) if target_id is not None else b"", storable(needle),
                  _like(storable(needle)), target_cwd, tsquery, limit)
        with self.store._reader() as conn:  # the catalog is the store's own read side
            if conn is None:
                return []
            rows = conn.execute("SELECT tier, header, title, created_at, key FROM dsh.find_sessions("
                                "%s, %s, %s, %s, %s::tsquery, %s)", params).fetchall()
        found = []
        for _tier, raw, title, _created, _key in rows:
            try:
                found.append(Found(SessionHeader.from_line(bytes(raw)), title))
            except ValueError:
                continue  # an unreadable header is skipped, as list_headers does
        costs = self.store.spends([f.header.id for f in found]) if found else {}
        return [replace(f, spend=costs[f.header.id]) if f.header.id in costs else f for f in found]

    def select_candidates(self, query: SessionQuery, target: ReferenceTarget, needle: str, limit: int,
                          cancel: Any = None, *, body: bool = False) -> list[SessionReferenceCandidate]:
        """Candidates for ``target``: the database's answer with ``query``'s live sessions merged over it."""
        lives = {sid: lg for sid, lg in live_logs(query).items() if sid != target.session_id}
        found = [f for f in self.search(target.session_id, target.cwd, needle, limit + len(lives), body=body)
                 if f.header.id not in lives]
        rows: list[tuple[SessionHeader, str, Spend]] = [(f.header, f.label, f.spend) for f in found]
        for log in lives.values():
            entry = live_entry(log)
            if entry.matches(needle) or (body and texts_match(live_texts(log), needle)):
                rows.append((log.header, entry.label, entry.spend))
        rows.sort(key=lambda r: (workspace_rank(r[0].cwd, target.cwd), -int(r[0].created_at), r[0].id))
        return [SessionReferenceCandidate(session_id=h.id, label=label, cwd=h.cwd,
                                          same_workspace=h.cwd is not None and h.cwd == target.cwd,
                                          created_at=int(h.created_at), cost=spend.to_json())
                for h, label, spend in rows[:limit]]

    def read_surface(self, query: SessionQuery, session_id: str, *,
                     skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        """A referenced session, live first, else from the database (with this role's visibility)."""
        return query.read_surface(session_id, skip_data=skip_data)


__all__ = ["Found", "PostgresCatalog", "body_tsquery", "body_words", "event_texts",
           "match_fields"]
