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
    """

    cwd: str
    store: StoreKind = "jsonl"
    sessions_dir: str = ""
    sqlite_path: str = ""
    postgres_dsn: str = dataclasses.field(default="", repr=False)  # may hold a password: never in a repr
    dsh_home: str = ""
    catalog: bool = True
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
_STORE_FIELDS = frozenset({"cwd", "store", "sessions_dir", "sqlite_path", "postgres_dsn"})
_CATALOG_FIELDS = frozenset({"dsh_home", "catalog"})
_RESOLVER_FIELDS = frozenset({"max_references", "candidate_limit", "max_reference_bytes",
                              "reference_context_fraction"})


class Services:
    """The session parts one host uses, built lazily from :class:`ServiceSettings` (thread-safe)."""

    def __init__(self, settings: ServiceSettings, *, index_in_background: bool = True) -> None:
        self._settings = settings
        self._index_in_background = index_in_background
        self._lock = threading.RLock()
        self._store: SessionStore | None = None
        self._query: SessionQuery | None = None
        self._resolver: SessionReferenceResolver | None = None
        self._env: ShellEnvRegistry | None = None
        self._catalog: Catalog | None = None
        self._catalog_failed = False
        self._indexed: set[str] = set()

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
            if changed & (_STORE_FIELDS | _CATALOG_FIELDS | _RESOLVER_FIELDS):
                self._resolver = None
            if changed & _STORE_FIELDS:
                self._store = None
                self._query = None
            if changed & _CATALOG_FIELDS:
                self._env = None
                self._catalog = None
                self._catalog_failed = False
                self._indexed.clear()
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

            return PostgresStore(self.postgres_dsn())  # connects at first use
        if self._settings.store == "sqlite":
            from .store import SqliteStore

            path = self.sqlite_file()
            _check_writable(path.parent, "sqlite_path")  # SQLite opens (and creates) its file at once
            return SqliteStore(str(path))
        from .store import JsonlStore

        return JsonlStore(self.sessions_root())  # no I/O: a read-only store can still be listed and referenced

    def check_writable(self) -> None:
        """Refuse, before anything is written, a store this process cannot write (a read-only folder)."""
        if self._settings.store == "postgres":
            self.postgres_dsn()  # the database itself says what this role may write, at the first flush
        elif self._settings.store == "sqlite":
            _check_writable(self.sqlite_file().parent, "sqlite_path")
        else:
            _check_writable(self.sessions_root(), "sessions_dir")

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
                from .catalog import open_catalog

                try:
                    self._catalog = open_catalog(self._settings.dsh_home or None)
                except Exception as exc:  # an index only: without it, reads fall back to the logs
                    self._catalog_failed = True
                    log.warning("session catalog unavailable: %s", exc)
                    return None
            catalog = self._catalog
        if catalog is not None:
            self.index_store()
        return catalog

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
        """Make sure the catalog knows ``root`` (default: this host's store), once per process and root; in a
        background thread unless the services were built with ``index_in_background=False``."""
        folder = root if root is not None else self.store_root
        catalog = self._catalog
        if folder is None or catalog is None:
            return
        key = str(folder)
        with self._lock:
            if key in self._indexed:
                return
            self._indexed.add(key)
        if self._index_in_background:
            threading.Thread(target=_ensure_store, args=(catalog, folder), name="dsh-catalog", daemon=True).start()
        else:
            _ensure_store(catalog, folder)

    def start_indexing(self) -> None:
        """Open the catalog and index this host's store off the calling thread (stores copied in are found)."""
        threading.Thread(target=lambda: self.catalog, name="dsh-catalog-open", daemon=True).start()

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
                catalog=self.candidate_source,
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
        from .tools.home import resolve_dsh_home

        return str(resolve_dsh_home(self._settings.dsh_home or None))


def _ensure_store(catalog: Catalog, root: Path) -> None:
    try:
        catalog.ensure_store(root, budget=None)
    except Exception as exc:
        log.warning("could not index %s: %s", root, exc)


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
