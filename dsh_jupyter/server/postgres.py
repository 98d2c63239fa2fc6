"""The PostgreSQL session store as the server extension serves it: read under the server user's own role.

On JupyterHub each single-user server has its user's ``$DSH_POSTGRES_DSN`` in its environment (see the
README, "On JupyterHub"); ``c.DshServer.postgres_dsn`` defaults to it. The server then lists and serves
that database's sessions beside the JSONL stores of its folders, and the database decides what it sees:
row-level security gives the role its own sessions and those shared with it, nothing else. The server
boundary (folders) does not apply: these sessions have no files.

The store, its query and its candidate source are built by :mod:`dsh_jupyter.services`, as for a kernel,
once per server (the store keeps a few idle read connections, so a keystroke costs no new connection).
Every statement is limited to the request timeout, so a stalled database frees the reader thread soon
after the request got its 504. A database that cannot be reached or used answers 503; neither body
names the database, its role or a password (the server log has the details, the DSN masked).

psycopg (the optional ``postgres`` extra) is imported only when a PostgreSQL store is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..references.candidates import list_candidates
from ..services import Services, ServiceSettings
from ..store.postgres import PostgresStore, PostgresStoreError
from .errors import ApiError, busy, too_slow

if TYPE_CHECKING:
    from ..query import SessionQuery
    from ..references import ReferenceTarget, SessionReferenceCandidate

log = logging.getLogger(__name__)

#: What a 503 says when the session database cannot answer.
DATABASE_DOWN = ("the session database cannot answer right now, so its sessions cannot be listed or shown; "
                 "try again in a moment, and if it keeps happening ask the administrator (the server log says "
                 "why)")

#: The value of :attr:`ServedPostgres.kind` in REST replies.
KIND = "postgres"


class ServedPostgres:
    """The PostgreSQL sessions one server serves, read with the privileges of the DSN's role."""

    kind = KIND

    def __init__(self, dsn: str, *, timeout: float, cwd: str = "/") -> None:
        """``timeout``: seconds one statement may take (the server's request timeout)."""
        self.timeout = timeout
        self.services = Services(
            ServiceSettings(cwd=cwd, store="postgres", postgres_dsn=dsn, postgres_timeout=timeout, catalog=False,
                            foreign_sessions=False),
            index_in_background=False, auto_index=False)

    def __repr__(self) -> str:
        return f"ServedPostgres({self.where!r})"

    @property
    def store(self) -> PostgresStore:
        store = self.services.store
        assert isinstance(store, PostgresStore)
        return store

    @property
    def where(self) -> str:
        """The database as the server log names it (without a password)."""
        return self.store.where

    @property
    def query(self) -> SessionQuery:
        return self.services.query

    @contextmanager
    def answering(self, doing: str) -> Iterator[None]:
        """Database failures while ``doing`` something, as the API's 503 (down, unusable) or 504 (a statement
        ran out of time); the details go to the server log only."""
        import psycopg

        try:
            yield
        except ApiError:
            raise
        except psycopg.errors.QueryCanceled as exc:
            log.warning("dsh-jupyter: the PostgreSQL session store %s was too slow %s: %s", self.where, doing,
                        self.store.explain(exc))
            raise too_slow(self.timeout) from None
        except (PostgresStoreError, psycopg.Error) as exc:
            log.warning("dsh-jupyter: the PostgreSQL session store %s could not answer %s: %s", self.where, doing,
                        self.store.explain(exc))
            raise busy(DATABASE_DOWN) from None

    def candidates(self, target: ReferenceTarget, text: str, limit: int, *,
                   body: bool = False) -> list[SessionReferenceCandidate]:
        """The visible sessions matching ``text`` for ``target``, ranked, at most ``limit``."""
        with self.answering("listing candidates"):
            return list_candidates(self.query, target, text, limit, source=self.services.candidate_source,
                                   body=body)

    def exists(self, session_id: str) -> bool:
        """Whether ``session_id`` is a session this role may read."""
        with self.answering("looking up a session"):
            try:
                return self.store.exists(session_id)
            except (ValueError, TypeError):  # an id the store cannot key is never stored
                return False

    def close(self) -> None:
        self.store.close()


def served_postgres(dsn: str, timeout: float) -> ServedPostgres | None:
    """The PostgreSQL store at ``dsn`` (``None`` when ``dsn`` is empty, or psycopg is not installed: then
    the server says so in its log and serves the JSONL stores only)."""
    if not dsn.strip():
        return None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        log.warning("dsh-jupyter: a PostgreSQL session store is configured (c.DshServer.postgres_dsn or "
                    "$DSH_POSTGRES_DSN) but psycopg is not installed, so its sessions are not served; install "
                    "it with pip install 'dsh-jupyter[postgres]'")
        return None
    return ServedPostgres(dsn, timeout=timeout)


__all__ = ["DATABASE_DOWN", "KIND", "ServedPostgres", "served_postgres"]
