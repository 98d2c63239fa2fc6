"""One wiring of the session services for every host: the notebook kernel, the server extension, the CLI.

:class:`Services` builds the store, the query over it, the catalog, the reference resolver and the managed
shell environment from one small :class:`ServiceSettings`, lazily and once, and forgets exactly what a changed
setting feeds. Hosts never construct these parts themselves, so they cannot disagree about where sessions
live, whether the catalog is used, or how "no current session" is said (:meth:`Services.target` with no
session: a :class:`~dsh_jupyter.references.ReferenceTarget` whose ``session_id`` is ``None``).

Nothing heavy is imported at module level: a kernel pays for a part the first time it is used.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .catalog import Catalog
    from .query import SessionQuery
    from .references import ReferenceTarget, SessionReferenceResolver
    from .references.resolver import CatalogSource
    from .session import SessionHeader
    from .sources import ForeignSessions
    from .store.base import SessionStore
    from .tools.env import ShellEnvRegistry

log = logging.getLogger(__name__)

StoreKind = Literal["jsonl", "sqlite", "postgres"]

#: Where the PostgreSQL DSN comes from when ``postgres_dsn`` is empty.
POSTGRES_DSN_ENV = "DSH_POSTGRES_DSN"


class ServiceError(RuntimeError):
    """A setting the user can fix; the message names the setting as they would type it."""


@dataclass(frozen=True)
class ServiceSettings:
    """What the services are built from (a host maps its own configuration onto these fields).

    Empty strings mean "the default": ``sessions_dir`` → ``$DSH_SESSIONS_DIR`` or ``.dsh/sessions`` beside
    ``cwd``; ``sqlite_path`` → ``.dsh/sessions.sqlite`` beside ``cwd``; ``postgres_dsn`` → ``$DSH_POSTGRES_DSN``;
    ``dsh_home`` → ``$DSH_HOME`` or ``~/.dsh``. ``max_reference_bytes`` 0 means the automatic budget.
    ``postgres_timeout``: seconds one PostgreSQL statement (and connecting) may take, 0 for no limit (the
    server extension sets its request timeout, so a stalled database frees its reader threads).
    ``foreign_sessions`` lists and references other tools' transcripts (Claude Code, Codex) read-only.
    """

    cwd: str
    store: StoreKind = "jsonl"
    sessions_dir: str = ""
    sqlite_path: str = ""
    postgres_dsn: str = dataclasses.field(default="", repr=False)  # may hold a password: never in a repr
    postgres_timeout: float = 0.0
    dsh_home: str = ""
    catalog: bool = True
    foreign_sessions: bool = True
    max_references: int = 3
    candidate_limit: int = 50
    max_reference_bytes: int = 0
    reference_context_fraction: float = 0.2

    @classmethod
    def from_config(cls, config: object, cwd: str) -> ServiceSettings:
        """Settings read from any object with attributes of the same names (the notebook's traitlets)."""
        values: dict[str, Any] = {"cwd": cwd}
        for field in dataclasses.fields(cls):
            if field.name != "cwd" and hasattr(config, field.name):
                values[field.name] = getattr(config, field.name)
        return cls(**values)


#: Which derived parts each setting feeds; a change drops those parts (they are rebuilt on next use).
_STORE_FIELDS = frozenset({"cwd", "store", "sessions_dir", "sqlite_path", "postgres_dsn", "postgres_timeout"})
_CATALOG_FIELDS = frozenset({"dsh_home", "catalog"})
_FOREIGN_FIELDS = frozenset({"dsh_home", "foreign_sessions"})
_RESOLVER_FIELDS = frozenset({"max_references", "candidate_limit", "max_reference_bytes",
                              "reference_context_fraction"})


class Services:
    """The session parts one host uses, built lazily from :class:`ServiceSettings` (thread-safe)."""

    def __init__(self, settings: ServiceSettings, *, index_in_background: bool = True, auto_index: bool = True,
                 shared_catalog: bool = True, index_budget: float | None = None) -> None:
        """``index_in_background``: index in a thread (kernels) or in the caller (server, CLI);
        ``auto_index``: index this host's own store when the catalog is first used (the CLI indexes what
        its command names instead); ``shared_catalog``: use the process-wide catalog with its background
        worker (kernels, server), or a private one without threads that :meth:`close` closes (the CLI);
        ``index_budget``: seconds indexing in the caller may take (``None``: all of it), the rest, and every
        log too big to read at once, left to the catalog's background worker (the server's requests)."""
        self._settings = settings
        self._index_in_background = index_in_background
        self._index_budget = index_budget
        self._auto_index = auto_index
        self._shared_catalog = shared_catalog
        self._lock = threading.RLock()
        self._store: SessionStore | None = None
        self._query: SessionQuery | None = None
        self._resolver: SessionReferenceResolver | None = None
        self._env: ShellEnvRegistry | None = None
        self._catalog: Catalog | None = None
        self._catalog_failed = False

    # -- settings ---------------------------------------------------------------------------------------
    @property
    def settings(self) -> ServiceSettings:
        return self._settings

    def configure(self, settings: ServiceSettings) -> frozenset[str]:
        """Use ``settings`` from now on; returns the names of the fields that changed."""
        with self._lock:
            old, self._settings = self._settings, settings
            changed = frozenset(f.name for f in dataclasses.fields(ServiceSettings)
                                if getattr(old, f.name) != getattr(settings, f.name))
            if changed & (_STORE_FIELDS | _CATALOG_FIELDS | _RESOLVER_FIELDS | _FOREIGN_FIELDS):
                self._resolver = None
            if changed & _STORE_FIELDS:
                self._store = None
                self._query = None
            if changed & _CATALOG_FIELDS:
                self._env = None
                self._catalog = None
                self._catalog_failed = False
            return changed

    # -- where sessions live ------------------------------------------------------------------------------
    def sessions_root(self) -> Path:
        """The JSONL store folder these settings name (whether or not it exists yet)."""
        from .store import default_sessions_dir

        folder = self._settings.sessions_dir.strip()
        if folder:
            return Path(os.path.expanduser(folder)).resolve()
        return default_sessions_dir(self._settings.cwd)

    def sqlite_file(self) -> Path:
        path = self._settings.sqlite_path.strip()
        if path:
            return Path(os.path.expanduser(path)).resolve()
        return Path(self._settings.cwd, ".dsh", "sessions.sqlite")

    def postgres_dsn(self) -> str:
        """The PostgreSQL DSN these settings name (the setting, else ``$DSH_POSTGRES_DSN``)."""
        dsn = self._settings.postgres_dsn.strip() or os.environ.get(POSTGRES_DSN_ENV, "").strip()
        if not dsn:
            raise ServiceError(
                "store is postgres but no database is named: set %config DshMagics.postgres_dsn = "
                f"'postgresql://ROLE@HOST/DB' (or ${POSTGRES_DSN_ENV})"
            )
        return dsn

    def describe_store(self) -> str:
        """Where the sessions are, in words for a message."""
        if self._settings.store == "postgres":
            from .store.postgres import mask_dsn

            try:
                return f"the PostgreSQL store {mask_dsn(self.postgres_dsn())}"
            except ServiceError:
                return "the PostgreSQL store (no DSN set)"
        if self._settings.store == "sqlite":
            return f"the SQLite store {self.sqlite_file()}"
        return f"the session folder {self.sessions_root()}"

    @property
    def store(self) -> SessionStore:
        with self._lock:
            if self._store is None:
                self._store = self._open_store()
            return self._store

    def _open_store(self) -> SessionStore:
        if self._settings.store == "postgres":
            from .store import PostgresStore

            timeout = self._settings.postgres_timeout  # connects at first use
            return PostgresStore(self.postgres_dsn(), statement_timeout=timeout if timeout > 0 else None)
        if self._settings.store == "sqlite":
            from .store import SqliteStore

            path = self.sqlite_file()
            _check_writable(path.parent, "sqlite_path")  # SQLite opens (and creates) its file at once
            return SqliteStore(str(path))
        from .store import JsonlStore

        return JsonlStore(self.sessions_root())  # no I/O: a read-only store can still be listed and referenced

    def check_writable(self, session_id: str | None = None) -> None:
        """Refuse, before anything is written, a store this process cannot write (a read-only folder); the
        store's own rule decides (reading, listing and referencing never need this). For PostgreSQL the
        database itself says what this role may write, at the first flush."""
        if self._settings.store == "postgres":
            self.postgres_dsn()
            return
        from .store import StoreReadOnlyError

        try:
            self.store.check_writable(session_id)
        except StoreReadOnlyError as exc:
            raise ServiceError(str(exc)) from None

    @property
    def store_root(self) -> Path | None:
        """The JSONL store's folder, or ``None`` for stores without one (SQLite, PostgreSQL)."""
        return self.sessions_root() if self._settings.store == "jsonl" else None

    @property
    def query(self) -> SessionQuery:
        with self._lock:
            if self._query is None:
                from .query import SessionQuery

                self._query = SessionQuery(self.store)
            return self._query

    # -- the catalog ----------------------------------------------------------------------------------------
    @property
    def catalog(self) -> Catalog | None:
        """The cross-folder catalog, or ``None`` when it is turned off, the store is not JSONL (the catalog
        indexes JSONL logs only) or it cannot be opened (reads then go to the logs directly)."""
        if not self._settings.catalog or self._settings.store != "jsonl":
            return None
        with self._lock:
            if self._catalog is None and not self._catalog_failed:
                from .catalog import Catalog, open_catalog

                home = self._settings.dsh_home or None
                try:
                    self._catalog = open_catalog(home) if self._shared_catalog else Catalog(home=home, background=False)
                except Exception as exc:  # an index only: without it, reads fall back to the logs
                    self._catalog_failed = True
                    log.warning("session catalog unavailable: %s", exc)
                    return None
            catalog = self._catalog
        if catalog is not None and self._auto_index:
            self.index_store()
        return catalog

    def close(self) -> None:
        """Close what these services own (a private catalog); shared parts stay open for others."""
        with self._lock:
            catalog, self._catalog = self._catalog, None
        if catalog is not None and not self._shared_catalog:
            catalog.close()

    @property
    def candidate_source(self) -> CatalogSource | None:
        """Where candidates and body search come from: the database itself for a PostgreSQL store (its
        row-level security decides what is seen), else the cross-folder catalog (``None``: scan the store)."""
        if self._settings.store == "postgres":
            from .catalog.postgres import PostgresCatalog
            from .store.postgres import PostgresStore

            store = self.store
            if isinstance(store, PostgresStore):
                return PostgresCatalog(store)
        return self.catalog

    def index_store(self, root: Path | None = None) -> None:
        """Make sure the catalog knows ``root`` (default: this host's store), once per process and root.

        In a background thread unless the services were built with ``index_in_background=False``; then the
        first caller indexes and callers arriving meanwhile wait for it a little (:data:`INDEX_WAIT_SECONDS`)
        before reading what is there."""
        folder = root if root is not None else self.store_root
        catalog = self._catalog
        if folder is None or catalog is None:
            return
        key = (str(getattr(catalog, "path", id(catalog))), str(folder))
        with _INDEXED_LOCK:
            done = _INDEXED.get(key)
            mine = done is None
            if mine:
                done = _INDEXED[key] = threading.Event()
        assert done is not None
        if not mine:
            if not self._index_in_background:
                done.wait(INDEX_WAIT_SECONDS)
            return
        if self._index_in_background:
            threading.Thread(target=_ensure_store, args=(catalog, folder, done), name="dsh-catalog",
                             daemon=True).start()
        else:
            _ensure_store(catalog, folder, done, self._index_budget)

    def start_indexing(self) -> None:
        """Open the catalog and index this host's store off the calling thread (stores copied in are found);
        other tools' transcripts are listed there too, so the first ``@`` query finds their index warm."""
        threading.Thread(target=self._open_and_index, name="dsh-catalog-open", daemon=True).start()

    def _open_and_index(self) -> None:
        self.catalog  # noqa: B018 - opening it starts its indexing
        foreign = self.foreign
        if foreign is not None:
            try:
                foreign.headers()
            except Exception as exc:  # an index only: listings read the transcripts instead
                log.warning("could not list other tools' sessions: %s", exc)

    def note_session(self, session_id: str, *, created: bool = False, notebook: str | None = None) -> None:
        """Tell the catalog about a session this host created, opened or just flushed (best effort)."""
        catalog, root = self.catalog, self.store_root
        if catalog is None or root is None:
            return
        try:
            if created:
                catalog.register_session(root, session_id, notebook=notebook)
            else:
                catalog.session_changed(root, session_id)
        except Exception as exc:
            log.warning("could not update the session catalog: %s", exc)

    # -- other tools' sessions ----------------------------------------------------------------------------
    @property
    def foreign(self) -> ForeignSessions | None:
        """Other tools' transcripts (read-only), or ``None`` when ``foreign_sessions`` is off."""
        if not self._settings.foreign_sessions:
            return None
        from .sources import foreign_sessions

        return foreign_sessions(self._settings.dsh_home or None)

    # -- references -----------------------------------------------------------------------------------------
    @property
    def resolver(self) -> SessionReferenceResolver:
        """The reference service with the configured budget."""
        with self._lock:
            if self._resolver is None:
                self._resolver = self.make_resolver(self._settings.max_reference_bytes or None)
            return self._resolver

    def make_resolver(self, max_reference_bytes: int | None, *, option: str = "max_reference_bytes"
                      ) -> SessionReferenceResolver:
        """A reference service with another per-reference budget (``option`` names it in errors)."""
        from .references import SessionReferenceError, SessionReferenceResolver

        s = self._settings
        if max_reference_bytes is not None and max_reference_bytes <= 0:
            raise ServiceError(f"{option} takes a positive number of bytes, got {max_reference_bytes}")
        try:
            return SessionReferenceResolver(
                self.query, max_references=s.max_references, candidate_limit=s.candidate_limit,
                max_reference_bytes=max_reference_bytes, reference_context_fraction=s.reference_context_fraction,
                catalog=self.candidate_source, foreign=self.foreign,
            )
        except SessionReferenceError as exc:
            raise ServiceError(f"invalid reference settings: {exc}") from None

    def target(self, header: SessionHeader | None = None, *, context_window: int | None = None) -> ReferenceTarget:
        """Who is asking: the session of ``header``, or nobody yet (``session_id`` ``None``, ranked from cwd)."""
        from .references import ReferenceTarget

        if header is None:
            return ReferenceTarget(None, self._settings.cwd)
        return ReferenceTarget.from_header(header, self.store, context_window=context_window)

    # -- the managed environment -------------------------------------------------------------------------
    @property
    def env_registry(self) -> ShellEnvRegistry:
        with self._lock:
            if self._env is None:
                from .tools.env import ShellEnvRegistry

                self._env = ShellEnvRegistry(self._settings.dsh_home or None)
            return self._env

    def dsh_home(self) -> str:
        from .home import resolve_dsh_home

        return str(resolve_dsh_home(self._settings.dsh_home or None))


#: Stores indexed (or being indexed) by this process: (catalog file, store root) -> done.
_INDEXED: dict[tuple[str, str], threading.Event] = {}
_INDEXED_LOCK = threading.Lock()
#: How long a caller that must not index in the background waits for another thread's indexing.
INDEX_WAIT_SECONDS = 2.0


def _ensure_store(catalog: Catalog, root: Path, done: threading.Event, budget: float | None = None) -> None:
    try:
        catalog.ensure_store(root, budget=budget)
    except Exception as exc:
        log.warning("could not index the session store %s: %s", root, exc)
    finally:
        done.set()


def _check_writable(folder: Path, option: str) -> None:
    """Refuse a store folder nobody can create or write, naming the setting that chose it."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ServiceError(
            f"the session folder {folder} is not writable ({'read-only' if probe.is_dir() else 'not a folder'}), so a "
            "new turn cannot be saved (earlier sessions can still be listed and referenced); set "
            f"%config DshMagics.{option} to a folder you can write to"
            + (" (or $DSH_SESSIONS_DIR)" if option == "sessions_dir" else "")
        )
