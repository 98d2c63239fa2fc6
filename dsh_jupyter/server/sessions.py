"""What the REST handlers read: the session store of a notebook folder, candidates, metadata, locations.

Everything here is plain, blocking Python with no tornado in it, so it is testable on its own and the
handlers can run it off the event loop. The handlers reach storage only through :func:`open_query`
(one folder's store); a cross-folder catalog can later replace that one function.

Folders arrive as paths *relative to the server's root directory* (what the browser knows, e.g.
``sub/dir`` for ``sub/dir/x.ipynb``). :func:`resolve_folder` refuses anything that leaves the root.
Session ids arrive as ``dsh-session:`` URI payloads and only ever reach the file system through the
store's own id encoding, which maps every id to one folder name inside the store.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..query import SessionQuery
from ..references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    ReferenceTarget,
    SessionReferenceError,
    SessionReferenceResolver,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
)
from ..references.projection import project_surface
from ..session import SessionError, SessionNotFoundError
from ..store import JsonlStore, default_sessions_dir

#: Default and largest number of candidates one request may ask for.
DEFAULT_CANDIDATE_LIMIT = 50
MAX_CANDIDATE_LIMIT = 1000
#: Longest accepted candidate query (characters).
MAX_QUERY_LENGTH = 1000
#: The session preview keeps the newest messages, each cut to a byte budget.
PREVIEW_MESSAGES = 20
PREVIEW_MESSAGE_BYTES = 4096


class ApiError(Exception):
    """A request the API refuses: HTTP ``status``, a stable ``code`` and a message saying what to do."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}, "message": self.message}


def bad_request(message: str) -> ApiError:
    return ApiError(400, SESSION_REFERENCE_INVALID_REFERENCE, message)


def not_found(session_id: str, folder: Path) -> ApiError:
    return ApiError(
        404,
        SESSION_REFERENCE_READ_FAILED,
        f"no session {session_id!r} in the session store of {str(folder)!r}; "
        "list the folder's sessions with dsh/api/candidates and use one of their ids",
    )


# -- parameters -------------------------------------------------------------------------------------------
def parse_limit(raw: str | None) -> int:
    """The ``limit`` query parameter: a positive integer up to :data:`MAX_CANDIDATE_LIMIT`."""
    if raw is None:
        return DEFAULT_CANDIDATE_LIMIT
    if not raw.isascii() or not raw.isdigit() or int(raw) == 0:
        raise bad_request(f"limit must be a positive integer (leave it out for {DEFAULT_CANDIDATE_LIMIT}), got {raw!r}")
    value = int(raw)
    if value > MAX_CANDIDATE_LIMIT:
        raise bad_request(f"limit must be at most {MAX_CANDIDATE_LIMIT}, got {value}")
    return value


def parse_flag(name: str, raw: str | None) -> bool:
    """A boolean query parameter: absent, ``0``/``false`` or ``1``/``true``."""
    if raw is None or raw.lower() in ("", "0", "false", "no"):
        return False
    if raw.lower() in ("1", "true", "yes"):
        return True
    raise bad_request(f"{name} must be 1 or 0 (true or false), got {raw!r}")


def parse_query(raw: str | None) -> str:
    """The ``query`` parameter (text typed after ``@``), at most :data:`MAX_QUERY_LENGTH` characters."""
    text = raw or ""
    if len(text) > MAX_QUERY_LENGTH:
        raise bad_request(f"query must be at most {MAX_QUERY_LENGTH} characters, got {len(text)}")
    return text


def decode_session_payload(payload: str) -> str:
    """The session id carried by a URL path segment: the payload of its ``dsh-session:`` URI."""
    try:
        return decode_session_reference_uri("dsh-session:" + payload)
    except SessionReferenceError as exc:
        raise bad_request(
            f"{payload!r} is not a session reference payload: put the part after 'dsh-session:' of the "
            "session's canonical URI in the path (encode_session_reference_uri(id))"
        ) from exc


def resolve_folder(root_dir: str | os.PathLike[str], cwd: str | None, *, allow_hidden: bool = True) -> Path:
    """The absolute, symlink-resolved folder named by ``cwd`` relative to ``root_dir``.

    ``cwd`` uses ``/`` separators as the browser sends them (``""`` or absent is the root itself).
    Absolute paths, ``..`` that climbs out of the root, symlinks leading outside it, NUL bytes and
    missing folders are refused with a 400 :class:`ApiError`.
    """
    root = Path(os.path.realpath(os.fspath(root_dir)))
    relative = (cwd or "").strip()
    if "\x00" in relative:
        raise bad_request("cwd must not contain NUL characters")
    if relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
        raise bad_request(f"cwd must be a folder relative to the server root, got the absolute path {cwd!r}")
    candidate = Path(os.path.realpath(root.joinpath(*[p for p in relative.replace("\\", "/").split("/") if p])))
    if candidate != root and root not in candidate.parents:
        raise bad_request(f"cwd {cwd!r} leads outside the server root; pass a folder inside it")
    if not candidate.is_dir():
        raise bad_request(f"cwd {cwd!r} is not a folder under the server root")
    if not allow_hidden:
        parts = candidate.relative_to(root).parts
        if any(part.startswith(".") for part in parts):
            raise bad_request(f"cwd {cwd!r} is a hidden folder and the server does not allow hidden files")
    return candidate


log = logging.getLogger(__name__)


# -- data access (the one seam a catalog will replace) ----------------------------------------------------
def open_query(folder: Path) -> SessionQuery:
    """The session query of the notebook folder ``folder``: its JSONL store, or ``$DSH_SESSIONS_DIR``."""
    return SessionQuery(JsonlStore(default_sessions_dir(folder)))


def synthetic_target(folder: Path) -> ReferenceTarget:
    """A ranking target in ``folder`` with an id no stored session has (the browser is no session)."""
    return ReferenceTarget(session_id=f"\x00dsh-jupyter-server:{uuid.uuid4()}", cwd=str(folder))


_ENSURED: dict[tuple[str, str], threading.Event] = {}  # (catalog file, store root) -> indexed
_ENSURED_LOCK = threading.Lock()
#: How long a request waits for a store another thread is indexing before reading what is there.
ENSURE_WAIT_SECONDS = 2.0


def server_catalog(folder: Path) -> Any:
    """The session catalog (every store known to this user), with ``folder``'s store registered and
    indexed once per process; ``None`` when the catalog cannot be opened (then only ``folder``'s own store
    is read)."""
    try:
        from ..catalog import open_catalog

        catalog = open_catalog()
    except Exception as exc:  # an index only: without it the folder's logs are read directly
        log.warning("dsh-jupyter: session catalog unavailable (%s); reading logs directly", exc)
        return None
    root = str(default_sessions_dir(folder))
    key = (str(getattr(catalog, "path", id(catalog))), root)
    with _ENSURED_LOCK:
        done = _ENSURED.get(key)
        mine = done is None
        if mine:
            done = _ENSURED[key] = threading.Event()
    if not mine:
        done.wait(ENSURE_WAIT_SECONDS)
        return catalog
    try:
        catalog.ensure_store(root)
    except Exception as exc:
        log.warning("dsh-jupyter: could not index %s: %s", root, exc)
    finally:
        done.set()
    return catalog


def list_candidates(folder: Path, query: str = "", limit: int = DEFAULT_CANDIDATE_LIMIT, *,
                    body: bool = False) -> list[dict[str, Any]]:
    """Ranked candidates for a prompt in ``folder``: ``{sessionId, label, cwd?, sameWorkspace, createdAt, mention}``.

    Sessions come from every store the catalog knows (same folder first); ``body`` also matches message text.
    """
    catalog = server_catalog(folder)
    if body and catalog is None:
        raise ApiError(503, "SESSION_REFERENCE_READ_FAILED",
                       "body search needs the session catalog, which could not be opened; search titles instead")
    resolver = SessionReferenceResolver(open_query(folder), candidate_limit=limit, catalog=catalog)
    found = resolver.list_candidates(synthetic_target(folder), query, limit, body=body)
    return [candidate.to_remote_json() for candidate in found]


def _utf8_prefix(text: str, max_bytes: int) -> tuple[str, int]:
    """The longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes, and how many bytes were cut."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, 0
    kept = data[:max_bytes].decode("utf-8", "ignore")
    return kept, len(data) - len(kept.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class _Found:
    query: SessionQuery
    session_id: str


def _find(folder: Path, session_id: str) -> _Found:
    query = open_query(folder)
    store = query.store
    try:
        present = store.exists(session_id)
    except (ValueError, TypeError):  # an id the store cannot name (e.g. empty) is never stored
        present = False
    if not present:
        raise not_found(session_id, folder)
    return _Found(query, session_id)


def session_detail(
    folder: Path,
    session_id: str,
    *,
    max_messages: int = PREVIEW_MESSAGES,
    max_message_bytes: int = PREVIEW_MESSAGE_BYTES,
) -> dict[str, Any]:
    """Metadata and a bounded preview of the projected conversation of one session in ``folder``'s store.

    The preview holds the newest ``max_messages`` projected messages (what a reference would carry),
    each cut to ``max_message_bytes`` UTF-8 bytes; texts are returned verbatim (escaping is the viewer's job).
    """
    found = _find(folder, session_id)
    try:
        snapshot = found.query.read_surface(session_id)
        title = found.query.title(session_id)
    except SessionNotFoundError:
        raise not_found(session_id, folder) from None
    except (SessionError, OSError) as exc:
        raise ApiError(
            500, SESSION_REFERENCE_READ_FAILED, f"could not read session {session_id!r}: {exc}"
        ) from exc
    projected = project_surface(snapshot)
    header = snapshot.header
    label = title if title is not None else header.id
    messages = projected.messages
    shown = messages[-max_messages:] if max_messages > 0 else ()
    preview: list[dict[str, Any]] = []
    for message in shown:
        text, cut = _utf8_prefix(message.text, max_message_bytes)
        preview.append(
            {"role": message.role, "text": text, "checkpoint": message.checkpoint, "truncated": cut > 0,
             "omittedBytes": cut}
        )
    user = sum(1 for m in messages if m.role == "user")
    return {
        "sessionId": header.id,
        "label": label,
        "title": title,
        "cwd": header.cwd,
        "createdAt": int(header.created_at),
        "formatVersion": projected.format_version,
        "capturedThroughSeq": snapshot.captured_through_seq,
        "compacted": projected.compacted,
        "messageCounts": {
            "events": 0 if snapshot.captured_through_seq is None else snapshot.captured_through_seq + 1,
            "surface": len(snapshot.events),
            "projected": len(messages),
            "user": user,
            "assistant": len(messages) - user,
        },
        "preview": {
            "messages": preview,
            "omittedMessages": len(messages) - len(shown),
            "maxMessages": max_messages,
            "maxMessageBytes": max_message_bytes,
        },
        "uri": encode_session_reference_uri(header.id),
        "mention": format_session_reference_mention(header.id, label),
    }


def session_location(folder: Path, session_id: str, root_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Where the session's own log lives: ``{"kind": "jsonl", "path", "contentsPath"}`` or ``{"kind": None}``.

    ``contentsPath`` is the log's path relative to the server root (for the Contents API), or ``None``
    when the store lies outside the root (e.g. ``$DSH_SESSIONS_DIR`` elsewhere).
    """
    found = _find(folder, session_id)
    header = found.query.header(session_id)
    location = found.query.store.locate(header)
    if location is None:
        return {"kind": None}
    root = Path(os.path.realpath(os.fspath(root_dir)))
    path = Path(location.path)
    try:
        contents_path: str | None = Path(os.path.realpath(path)).relative_to(root).as_posix()
    except ValueError:
        contents_path = None
    return {"kind": location.kind, "path": location.path, "contentsPath": contents_path}
