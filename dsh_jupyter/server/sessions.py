"""What the REST handlers read: the session store of a notebook folder, candidates, metadata, locations.

Everything here is plain, blocking Python with no tornado in it, so it is testable on its own and the
handlers can run it on their own reader threads (:mod:`dsh_jupyter.server.pool`). Every function takes the
notebook folder and the server's :class:`~dsh_jupyter.server.boundary.Boundary` as arguments: a store or a
session outside the boundary is refused (403), and catalog results from elsewhere are filtered out.

Folders arrive as paths *relative to the server's root directory* (what the browser knows, e.g.
``sub/dir`` for ``sub/dir/x.ipynb``). :func:`resolve_folder` refuses anything that leaves the root.
Session ids arrive as ``dsh-session:`` URI payloads and only ever reach the file system through the
store's own id encoding, which maps every id to one folder name inside the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..catalog import Catalog, CatalogUnavailable
from ..catalog.bodies import BODY_CAP
from ..query import SessionQuery
from ..ranking import workspace_rank
from ..references import (
    ReferenceTarget,
    SessionReferenceCandidate,
    SessionReferenceError,
    decode_session_reference_uri,
)
from ..references.candidates import list_candidates as rank_candidates
from ..references.projection import PROJECTION_SKIPS
from ..references.resolver import merge_foreign
from ..services import Services, ServiceSettings
from ..session import SessionError, SessionNotFoundError
from ..sources import enabled_by_env, foreign_sessions, tool_of
from ..store import JsonlStore
from ..store.errors import LogAccessError
from ..store.paths import decode_segment, list_session_folders
from ..store.postgres import PostgresStoreError
from ..store.safe_open import open_log
from .boundary import Boundary, require_log, require_store
from .detail import PREVIEW_MESSAGE_BYTES, PREVIEW_MESSAGES, details, read_jsonl, reading_of
from .errors import BUSY, NOT_FOUND, ApiError, bad_request, internal, not_found, outside_root, refused_entry
from .params import (
    DEFAULT_CANDIDATE_LIMIT,
    MAX_CANDIDATE_LIMIT,
    MAX_QUERY_LENGTH,
    check_payload,
    parse_flag,
    parse_limit,
    parse_query,
    quoted,
)
from .wire import SessionDetail, SessionListing, SessionLocation, SessionRow, UnreadableEntry

if TYPE_CHECKING:
    from ..catalog import CatalogEntry, StoreInfo
    from ..references.cancellation import CancelFlag
    from ..sources import ForeignSessions
    from ..sources.base import ForeignHeader
    from .postgres import ServedPostgres

__all__ = [
    "DEFAULT_CANDIDATE_LIMIT",
    "MAX_CANDIDATE_LIMIT",
    "MAX_QUERY_LENGTH",
    "ApiError",
    "BoundedCatalog",
    "ServerCatalog",
    "bad_request",
    "decode_session_payload",
    "list_candidates",
    "list_sessions",
    "not_found",
    "open_query",
    "parse_flag",
    "parse_limit",
    "parse_query",
    "resolve_folder",
    "server_catalog",
    "session_detail",
    "session_location",
]

#: Seconds a request may spend indexing a store the server has not indexed yet (the rest goes on in the
#: catalog's background worker).
INDEX_BUDGET = 1.0
#: Extra catalog rows asked for, so that sessions dropped by the boundary (links out) do not shorten the list.
BOUNDARY_MARGIN = 64

log = logging.getLogger(__name__)


# -- parameters -------------------------------------------------------------------------------------------
def decode_session_payload(payload: str) -> str:
    """The session id carried by a URL path segment: the payload of its ``dsh-session:`` URI."""
    check_payload(payload)
    try:
        return decode_session_reference_uri("dsh-session:" + payload)
    except SessionReferenceError as exc:
        raise bad_request(
            f"{quoted(payload)} is not a session reference payload: put the part after 'dsh-session:' of the "
            "session's canonical URI in the path (encode_session_reference_uri(id))"
        ) from exc


def resolve_folder(root_dir: str | os.PathLike[str], cwd: str | None, *, allow_hidden: bool = True) -> Path:
    """The absolute, symlink-resolved folder named by ``cwd`` relative to ``root_dir``.

    ``cwd`` uses ``/`` separators as the browser sends them (``""`` or absent is the root itself).
    Absolute paths, NUL bytes and missing folders are refused with a 400 :class:`ApiError`; ``..`` that
    climbs out of the root and symlinks leading outside it with a 403.
    """
    root = Path(os.path.realpath(os.fspath(root_dir)))
    relative = (cwd or "").strip()
    if "\x00" in relative:
        raise bad_request("cwd must not contain NUL characters")
    shown = quoted(cwd or "")
    if relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
        raise bad_request(f"cwd must be a folder relative to the server root, got the absolute path {shown}")
    try:
        candidate = Path(os.path.realpath(root.joinpath(*[p for p in relative.replace("\\", "/").split("/") if p])))
        inside = candidate == root or root in candidate.parents
        is_dir = inside and candidate.is_dir()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a link loop
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it cannot be looked up"
        raise bad_request(f"cwd {shown} is not a folder under the server root ({reason.lower()})") from None
    if not inside:
        raise outside_root(f"cwd {shown} leads outside the server root; pass a folder inside it")
    if not is_dir:
        raise bad_request(f"cwd {shown} is not a folder under the server root")
    if not allow_hidden:
        parts = candidate.relative_to(root).parts
        if any(part.startswith(".") for part in parts):
            raise bad_request(f"cwd {shown} is a hidden folder and the server does not allow hidden files")
    return candidate


# -- data access --------------------------------------------------------------------------------------------
def folder_services(folder: Path) -> Services:
    """The session services of the notebook folder ``folder`` (its JSONL store, or ``$DSH_SESSIONS_DIR``),
    wired like the kernel's and the command line's (:mod:`dsh_jupyter.services`). Built per request: nothing
    is read until used, and the catalog and its indexing are shared process-wide."""
    return Services(ServiceSettings(cwd=str(folder)), index_in_background=False)


def open_query(folder: Path) -> SessionQuery:
    """The session query of the notebook folder ``folder``."""
    return folder_services(folder).query


def _store_of(query: SessionQuery) -> JsonlStore:
    store = query.store
    if not isinstance(store, JsonlStore):  # pragma: no cover - open_query always makes a JSONL store
        raise TypeError(f"the server reads JSONL stores only, got {type(store).__name__}")
    return store


def allowed_store(folder: Path, boundary: Boundary) -> SessionQuery:
    """The query of ``folder``'s store, refused (403) when the store lies outside ``boundary``."""
    query = open_query(folder)
    require_store(_store_of(query).root, folder, boundary)
    return query


def synthetic_target(folder: Path) -> ReferenceTarget:
    """The ranking target of a request in ``folder``: no session is asking (the browser is none)."""
    return folder_services(folder).target()


class ServerCatalog(Protocol):
    """What the server uses of the session catalog (:class:`dsh_jupyter.catalog.Catalog`)."""

    def register_store(self, root: str | os.PathLike[str]) -> str: ...

    def ensure_store(self, root: str | os.PathLike[str], *, budget: float | None = ...) -> object: ...

    def stores(self) -> Sequence[StoreInfo]: ...

    def candidates(self, target_id: str | None, target_cwd: str | None, text: str = ..., limit: int = ..., *,
                   body: bool = ..., roots: Iterable[str] | None = ..., local: str | None = ...,
                   cancel: Any = ...) -> Sequence[CatalogEntry]: ...


def server_catalog(store_root: str | os.PathLike[str]) -> ServerCatalog | None:
    """The session catalog (every store known to this user), with ``store_root`` registered and indexed
    once per process; ``None`` when the catalog cannot be opened (then only the folder's own store is read).

    Callers check ``store_root`` against the boundary first: the server never registers other stores.
    """
    root = os.fspath(store_root)
    # Indexed here for at most INDEX_BUDGET seconds, and never a log too big to read within a keystroke: the
    # catalog's background worker does the rest, so no request waits for a huge log to be indexed.
    services = Services(ServiceSettings(cwd=root, sessions_dir=root), index_in_background=False,
                        index_budget=INDEX_BUDGET)
    catalog: ServerCatalog | None = services.catalog
    return catalog


class BoundedCatalog:
    """The session catalog as a candidate source that only answers from stores inside ``boundary``.

    The catalog is asked for the allowed stores only (so body search never even looks at text elsewhere),
    and each session it returns is checked once more by its log's resolved path (a session folder that is
    a link out of the boundary is dropped).
    """

    def __init__(self, catalog: ServerCatalog, boundary: Boundary) -> None:
        self.catalog = catalog
        self.boundary = boundary
        #: The entries of the latest :meth:`select_candidates`, by session id.
        self.kept: dict[str, CatalogEntry] = {}

    def pending(self) -> list[str]:
        """The stores inside the boundary the catalog has not finished indexing."""
        try:
            return [info.root for info in self.catalog.stores()
                    if not info.ready and not info.missing and self.boundary.allows(info.root)]
        except CatalogUnavailable:
            return []

    def store_roots(self, local: str) -> list[str]:
        """The catalog's stores that lie inside the boundary, ``local`` (the asking folder's store) first."""
        try:
            known = [info.root for info in self.catalog.stores()]
        except CatalogUnavailable as exc:
            log.info("dsh-jupyter: catalog store list unavailable (%s); answering from the folder's store", exc)
            known = []
        return [local] + [root for root in known if root != local and self.boundary.allows(root)]

    def select_candidates(self, query: SessionQuery, target: ReferenceTarget, needle: str, limit: int,
                          cancel: CancelFlag | None = None, *, body: bool = False) -> list[SessionReferenceCandidate]:
        local = self.catalog.register_store(_store_of(query).root)
        entries = self.catalog.candidates(target.session_id, target.cwd, needle, limit + BOUNDARY_MARGIN, body=body,
                                          roots=self.store_roots(local), local=local, cancel=cancel)
        kept = [entry for entry in entries if self.boundary.allows(entry.path)][:limit]
        self.kept = {entry.session_id: entry for entry in kept}
        return [e.candidate(target.cwd) for e in kept]


def served_foreign(boundary: Boundary) -> ForeignSessions | None:
    """Other tools' transcripts the server may offer, read-only: unless ``$DSH_FOREIGN_SESSIONS`` is ``0``,
    those of the tools whose folder (``~/.claude``, ``~/.codex``, or where ``$CLAUDE_CONFIG_DIR`` /
    ``$CODEX_HOME`` point) lies in the home folder of the user running the server, or inside the boundary.
    They are the server user's own sessions, outside the server root; nothing else outside it is served."""
    if not enabled_by_env():
        return None
    shared = foreign_sessions()
    home = Path(os.path.realpath(Path.home()))
    allowed = []
    for source in shared.sources:
        root = Path(os.path.realpath(source.root()))
        if root == home or home in root.parents or boundary.allows(root):
            allowed.append(source)
    return shared.only(allowed) if allowed else None


def merge_ranked(first: list[SessionReferenceCandidate], second: list[SessionReferenceCandidate],
                 target: ReferenceTarget, limit: int) -> tuple[list[SessionReferenceCandidate], set[str]]:
    """Two ranked candidate lists as one, by the one ranking rule (:func:`~dsh_jupyter.ranking.workspace_rank`,
    then newest first, then id), at most ``limit``; a session in both is kept once, from ``first``. Returns
    the list and the ids of the kept entries that came from ``second``."""
    seen = {c.session_id for c in first}
    extra = [c for c in second if c.session_id not in seen]
    merged = sorted([*first, *extra], key=lambda c: (workspace_rank(c.cwd, target.cwd), -c.created_at, c.session_id))
    kept = merged[:limit]
    theirs = {c.session_id for c in extra}
    return kept, {c.session_id for c in kept if c.session_id in theirs}


def list_candidates(folder: Path, query: str, limit: int, *, boundary: Boundary, body: bool = False,
                    catalog_for: Callable[[Path], ServerCatalog | None] | None = None,
                    postgres: ServedPostgres | None = None, exclude: str | None = None) -> list[SessionRow]:
    """Ranked candidates for a prompt in ``folder``: ``{sessionId, label, cwd?, sameWorkspace, createdAt, mention}``.

    Sessions come from every store inside ``boundary`` that the catalog knows (same folder first) and from
    the PostgreSQL store ``postgres`` (what its role may read; those rows carry ``"store": "postgres"``);
    ``body`` also matches message text; ``exclude`` (the asking notebook's current session) is left out.
    ``catalog_for(store root)`` gives the catalog (default :func:`server_catalog`); without one (``None``)
    only ``folder``'s own store is read.
    """
    return _ranked_rows(folder, query, limit, boundary, body, catalog_for, postgres, exclude)[0]


_Opened = tuple[SessionQuery, JsonlStore, ServerCatalog | None]


def _open(folder: Path, boundary: Boundary, catalog_for: Callable[[Path], ServerCatalog | None] | None) -> _Opened:
    """``folder``'s store (refused outside ``boundary``), as a query and as a store, and the catalog (``None``:
    none could be opened)."""
    source = allowed_store(folder, boundary)
    store = _store_of(source)
    return source, store, (catalog_for or server_catalog)(store.root)


def _ranked_rows(folder: Path, query: str, limit: int, boundary: Boundary, body: bool,
                 catalog_for: Callable[[Path], ServerCatalog | None] | None, postgres: ServedPostgres | None,
                 exclude: str | None = None, opened: _Opened | None = None,
                 ) -> tuple[list[SessionRow], JsonlStore, BoundedCatalog | None]:
    """:func:`list_candidates`, with the folder's store and the catalog view that answered (``None``: none);
    ``opened``: what :func:`_open` gave for ``folder`` already."""
    source, store, catalog = opened or _open(folder, boundary, catalog_for)
    target = synthetic_target(folder)
    if exclude is not None:  # the session asking: each source leaves its target out
        target = dataclasses.replace(target, session_id=exclude)
    bounded: BoundedCatalog | None = None
    if catalog is None:
        if body:
            raise ApiError(503, BUSY, "body search needs the session catalog, which could not be opened; "
                                      "search titles instead (leave body out)")
        found = rank_candidates(source, target, query, limit + BOUNDARY_MARGIN)
        found = [c for c in found if boundary.allows(store.log_path(c.session_id))][:limit]
    else:
        bounded = BoundedCatalog(catalog, boundary)
        found = rank_candidates(source, target, query, limit, source=bounded, body=body)
    from_postgres: set[str] = set()
    if postgres is not None:
        found, from_postgres = merge_ranked(found, postgres.candidates(target, query, limit, body=body), target,
                                            limit)
    found = merge_foreign(found, served_foreign(boundary), target, query, limit)
    # A row is its candidate until the optional fields below are added (none of them is set yet).
    rows = [cast("SessionRow", candidate.to_remote_json()) for candidate in found]
    for row in rows:
        tool = tool_of(row["sessionId"])
        if tool is not None:
            row["tool"] = tool
        elif postgres is not None and row["sessionId"] in from_postgres:
            row["store"] = postgres.kind
    return rows, store, bounded


#: Unreadable entries a listing names one by one (their count is always exact).
MAX_UNREADABLE = 1000


def list_sessions(folder: Path, query: str, limit: int, *, boundary: Boundary, body: bool = False,
                  catalog_for: Callable[[Path], ServerCatalog | None] | None = None,
                  postgres: ServedPostgres | None = None, exclude: str | None = None) -> SessionListing:
    """The listing of ``GET dsh/api/sessions``: the candidates of :func:`list_candidates` (each also with its
    message counts, and ``damaged`` / ``bodyIndexTruncated`` when the catalog knows), every entry of the
    folder's store that cannot be read as a session (``unreadable``: ``entry`` relative to the server root,
    ``sessionId`` its folder stands for, ``problem``; ``unreadableCount`` is exact even beyond the
    :data:`MAX_UNREADABLE` named), and whether the answer covers every session (``complete``: false while
    a store is still being indexed, when body search may miss what is not indexed yet; ``notes`` say so)."""
    opened = _open(folder, boundary, catalog_for)
    _, store, catalog = opened
    # What the catalog has not indexed is looked at before and after the ranking. A log indexed meanwhile (in the
    # background, or by the ranking itself) may or may not be among the rows, so they are ranked once more:
    # "complete" then never stands beside rows from before the indexing that completed it. (Before the ranking
    # the sessions are named by their folders, so no log is opened twice.)
    unindexed_before = _not_indexed(catalog, store, _folder_ids(store))
    pending_before = _pending(catalog, boundary, store)
    rows, _, bounded = _ranked_rows(folder, query, limit, boundary, body, catalog_for, postgres, exclude, opened)
    headers = store.list_headers()
    unindexed = _not_indexed(catalog, store, [header.id for header in headers])
    pending = _pending(catalog, boundary, store)
    if (unindexed_before & {header.id for header in headers}) - unindexed or set(pending_before) - set(pending):
        rows, _, bounded = _ranked_rows(folder, query, limit, boundary, body, catalog_for, postgres, exclude, opened)
    waiting = len(unindexed)
    known = bounded.kept if bounded is not None else {}
    for row in rows:
        entry = known.get(row["sessionId"])
        if entry is None or not entry.indexed:
            continue
        if not entry.readable:  # its counts are of what the catalog could read: none to trust
            row["damaged"] = True
        else:
            row["messageCounts"] = {"user": entry.user_messages, "assistant": entry.assistant_messages}
        if entry.body_truncated:  # body search sees its first messages only: say how many it does not
            row["bodyIndexTruncated"] = True
            total = entry.user_messages + entry.assistant_messages
            row["bodySearch"] = {"messages": entry.body_messages,
                                 "moreMessages": max(0, total - entry.body_messages)}
    unreadable: list[UnreadableEntry] = []
    for item in store.unreadable:
        folder_name = item.path.name if item.path.name != "session.jsonl" else item.path.parent.name
        try:
            session_id: str | None = decode_segment(folder_name)
        except ValueError:
            session_id = None
        try:
            where = item.path.relative_to(boundary.root).as_posix()
        except ValueError:
            where = boundary.shown(item.path.parent)
        unreadable.append({"entry": where, "sessionId": session_id, "problem": item.reason})
    notes = []
    if unreadable:
        notes.append(f"{len(unreadable):,} entries of this folder's session store cannot be read as sessions and "
                     "are not listed (see unreadable)" if len(unreadable) != 1 else
                     "1 entry of this folder's session store cannot be read as a session and is not listed (see "
                     "unreadable)")
    cut = sum(1 for row in rows if row.get("bodyIndexTruncated"))
    if body and cut:
        cap = getattr(bounded.catalog if bounded is not None else None, "body_cap", BODY_CAP)
        more = sum(row["bodySearch"]["moreMessages"] for row in rows if "bodySearch" in row)
        notes.append(f"body search covers only the first {cap / 2**20:g} MiB of the text of {cut} listed "
                     f"session(s) (bodyIndexTruncated): {more:,} more messages in them are not searched")
    if waiting or pending:
        what = (f"{waiting} session(s) of this folder" if waiting else "") + (" and " if waiting and pending else "") \
            + (f"{len(pending)} other session store(s)" if pending else "")
        notes.append(f"{what} are still being indexed: "
                     + ("body search does not cover them yet" if body else "they may be missing or untitled")
                     + "; ask again in a moment")
    return {"sessions": rows, "unreadable": unreadable[:MAX_UNREADABLE], "unreadableCount": len(unreadable),
            "indexing": waiting, "complete": not pending and not waiting, "notes": notes}


def _not_indexed(catalog: ServerCatalog | None, store: JsonlStore, session_ids: Iterable[str]) -> frozenset[str]:
    """Those of the store's sessions ``session_ids`` that the catalog has not indexed as their logs are now (a log
    too big to read within a request is indexed in the background)."""
    indexed = getattr(catalog, "indexed", None)
    if indexed is None:
        return frozenset()
    waiting = set()
    for session_id in session_ids:
        entry = indexed(store.root, session_id)
        try:
            info = os.stat(store.log_path(session_id), follow_symlinks=False)
        except OSError:
            continue
        if entry is None or entry.size != info.st_size or entry.mtime_ns != info.st_mtime_ns:
            waiting.add(session_id)
    return frozenset(waiting)


def _folder_ids(store: JsonlStore) -> list[str]:
    """The session ids the store's folders stand for, read from their names alone (no log is opened). A folder
    named by a hash (an id whose encoding is too long for a file name, :func:`~..store.paths.session_folder_name`)
    stands for no id here: such a session indexed while a listing ranks does not make it rank again."""
    try:
        folders, _ = list_session_folders(store.root)
    except (LogAccessError, OSError):
        return []
    ids = []
    for name, _path in folders:
        with contextlib.suppress(ValueError):
            ids.append(decode_segment(name))
    return ids


def _pending(catalog: ServerCatalog | None, boundary: Boundary, store: JsonlStore) -> list[str]:
    """The other stores inside ``boundary`` that the catalog has not finished indexing."""
    if catalog is None:
        return []
    own = os.path.realpath(store.root)
    return [root for root in BoundedCatalog(catalog, boundary).pending() if os.path.realpath(root) != own]


def _find(folder: Path, session_id: str, boundary: Boundary, postgres: ServedPostgres | None = None
          ) -> SessionQuery | None:
    """The query of ``folder``'s store when it holds ``session_id``; ``None`` when the PostgreSQL store
    ``postgres`` has it instead (the folder's own store first). 403 when the folder's store lies outside the
    boundary, 404 when neither has it (a session the database's role may not read is not there)."""
    query = allowed_store(folder, boundary)
    store = _store_of(query)
    try:
        present = store.exists(session_id)
    except (ValueError, TypeError):  # an id the store cannot name (e.g. empty) is never stored
        present = False
    if not present:
        if postgres is not None and postgres.exists(session_id):
            return None
        _refuse_unsafe(store, session_id)
        raise _not_found(session_id, folder, boundary, postgres)
    require_log(store.log_path(session_id), session_id, boundary)
    return query


def _foreign_header(foreign: ForeignSessions, session_id: str) -> ForeignHeader:
    """The header of another tool's transcript ``session_id`` (404 when its tool no longer has it)."""
    header = foreign.header(session_id)
    if header is None:
        raise ApiError(404, NOT_FOUND, f"no session {session_id!r} among the other tools' transcripts on this "
                                       "machine; it may have been deleted or archived by its tool")
    return header


def _refuse_unsafe(store: JsonlStore, session_id: str) -> None:
    """Raise the 403 of a session whose folder holds something that is not a regular log (a pipe, a device, a
    link, a folder): the entry is there, so "no such session" would mislead. Returns when nothing is there."""
    try:
        path = store.log_path(session_id)
        os.lstat(path)
    except (OSError, ValueError):
        return
    try:
        with open_log(path):
            return
    except (FileNotFoundError, NotADirectoryError):
        return
    except (SessionError, OSError) as exc:
        raise refused_read(session_id, exc) from None


def _not_found(session_id: str, folder: Path, boundary: Boundary, postgres: ServedPostgres | None) -> ApiError:
    where = boundary.shown(folder)
    return not_found(session_id, where if postgres is None else f"{where} nor among the PostgreSQL sessions "
                                                                "this server may read")


def refused_read(session_id: str, exc: BaseException) -> ApiError:
    """The reply to a read that failed: 403 when the store refused the entry itself (it is a link, a pipe or
    a device, or this user may not read it: the store's errors that are both ``SessionError`` and
    ``OSError``), else a generic 500. Neither names a path; the server log has the details."""
    if isinstance(exc, PermissionError):
        return refused_entry(f"session {session_id!r} cannot be read by the server (permission denied); ask the "
                            "owner of the store for read access")
    if isinstance(exc, LogAccessError):
        return refused_entry(f"session {session_id!r} is not stored as a regular session log: its log {exc.reason}, "
                             "so it is not served; replace it with the log itself")
    if isinstance(exc, SessionError) and isinstance(exc, OSError) and not isinstance(exc, SessionNotFoundError):
        return refused_entry(f"session {session_id!r} is not stored as a regular session log (it is a link, a "
                            "pipe or a device), so it is not served; replace it with the log itself")
    return internal()


def session_detail(
    folder: Path,
    session_id: str,
    boundary: Boundary,
    *,
    max_messages: int = PREVIEW_MESSAGES,
    max_message_bytes: int = PREVIEW_MESSAGE_BYTES,
    postgres: ServedPostgres | None = None,
    catalog_for: Callable[[Path], ServerCatalog | None] | None = None,
) -> SessionDetail:
    """Metadata, the newest messages and what is damaged of one session in ``folder``'s store (or, when it
    is not there, in the PostgreSQL store ``postgres``: then with ``store`` and ``owner``; or another tool's
    transcript: then with ``tool``). See :mod:`.detail`: bounded in memory and time whatever the log's
    size, and a damaged log answers with what can be read and a ``damage`` list, never an error.

    The preview holds the newest ``max_messages`` projected messages (what a reference would carry), each cut
    to ``max_message_bytes`` UTF-8 bytes; texts are returned verbatim (escaping is the viewer's job)."""
    limits = {"max_messages": max_messages, "max_message_bytes": max_message_bytes}
    foreign = served_foreign(boundary)
    if foreign is not None and foreign.owns(session_id):
        header = _foreign_header(foreign, session_id)
        try:
            snapshot = foreign.read_surface(session_id)
        except (SessionError, OSError) as exc:
            log.error("dsh-jupyter: could not read %s transcript %s: %s", header.tool, header.path, exc)
            raise refused_read(session_id, exc) from exc
        answer = details(reading_of(snapshot, header.title), **limits)
        answer["tool"] = header.tool
        return answer
    query = _find(folder, session_id, boundary, postgres)
    if query is None:
        assert postgres is not None
        return _postgres_detail(postgres, session_id, limits, folder, boundary)
    store = _store_of(query)
    catalog = (catalog_for or server_catalog)(store.root)
    try:
        reading = read_jsonl(store, session_id, catalog if isinstance(catalog, Catalog) else None)
    except SessionNotFoundError:
        raise not_found(session_id, boundary.shown(folder)) from None
    except (SessionError, OSError) as exc:
        log.error("dsh-jupyter: could not read session %r in %s: %s", session_id, store.root, exc)
        raise refused_read(session_id, exc) from exc
    return details(reading, **limits)


def _postgres_detail(postgres: ServedPostgres, session_id: str, limits: dict[str, int], folder: Path,
                     boundary: Boundary) -> SessionDetail:
    """:func:`session_detail` of a session of the PostgreSQL store (read as the server's role)."""
    query = postgres.query
    with postgres.answering("reading a session"):
        try:
            snapshot = query.read_surface(session_id, skip_data=PROJECTION_SKIPS)
            title = query.title(session_id)
            owner = postgres.store.owner(session_id)
        except SessionNotFoundError:  # deleted or unshared since it was looked up
            raise _not_found(session_id, folder, boundary, postgres) from None
        except PostgresStoreError:
            raise  # the database went away: a 503, not a damaged session
        except (SessionError, OSError) as exc:
            log.error("dsh-jupyter: could not read session %r in %s: %s", session_id, postgres.where, exc)
            raise refused_read(session_id, exc) from exc
    answer = details(reading_of(snapshot, title), **limits)
    answer["store"], answer["owner"] = postgres.kind, owner
    return answer


def session_location(folder: Path, session_id: str, boundary: Boundary, *,
                     postgres: ServedPostgres | None = None) -> SessionLocation:
    """Where the session's own log lives: ``{"kind": "jsonl", "path", "contentsPath"}``.

    ``contentsPath`` is the log's path relative to the server root (for the Contents API), or ``None``
    when the store lies in an extra root outside it. Only the one session's folder is looked at. A session
    of the PostgreSQL store has no file: ``{"kind": "postgres", "path": None, "contentsPath": None}``; another
    tool's transcript is ``{"kind": "claude-code" | "codex", "path", "contentsPath", "tool"}`` (read-only).
    """
    foreign = served_foreign(boundary)
    if foreign is not None and foreign.owns(session_id):
        header = _foreign_header(foreign, session_id)
        try:
            inside: str | None = Path(os.path.realpath(header.path)).relative_to(boundary.root).as_posix()
        except ValueError:
            inside = None
        return {"kind": session_id.split(":", 1)[0], "path": header.path, "contentsPath": inside,
                "tool": header.tool}
    query = _find(folder, session_id, boundary, postgres)
    if query is None:
        assert postgres is not None
        return {"kind": postgres.kind, "path": None, "contentsPath": None}
    store = _store_of(query)
    path = store.log_path(session_id)
    try:
        contents_path: str | None = Path(os.path.realpath(path)).relative_to(boundary.root).as_posix()
    except ValueError:
        contents_path = None
    return {"kind": store.kind, "path": str(path), "contentsPath": contents_path}
