"""REST handlers of the dsh jupyter-server extension. Every endpoint is read-only (GET).

Routes, under the server's ``base_url``:

- ``dsh/api/candidates?query=&limit=&cwd=&body=&exclude=``: ranked sessions a prompt in folder ``cwd`` may reference
  (``exclude``: the asking session, left out)
  (with the PostgreSQL store's, when one is configured: ``c.DshServer.postgres_dsn``);
- ``dsh/api/sessions?query=&limit=&cwd=&body=&exclude=``: the same candidates as a listing, with every entry of the
  folder's store that cannot be read named (``unreadable``) and whether the answer is complete;
- ``dsh/api/sessions/<payload>?cwd=``: metadata, the newest messages, how many more there are and what is
  damaged, of one session (bounded in memory and time, whatever its size);
- ``dsh/api/locate/<payload>?cwd=``: where that session's log lives (``kind`` ``postgres``: it has none).

``<payload>`` is the part after ``dsh-session:`` of the session's canonical URI (base64url, so any id is
URL-safe); ``cwd`` is the notebook's folder relative to the server root. Requests go through
jupyter-server's authentication (``@tornado.web.authenticated``) and authorisation (``@authorized``,
resource ``"dsh"``, action ``read``).

Parameters are checked on the event loop; everything that touches the file system runs on the extension's
own reader pool (:mod:`dsh_jupyter.server.pool`) with a deadline, never in the executor Jupyter's own
handlers share. Errors are JSON, ``{"error": {"code", "message"}, "message"}`` (see
:mod:`dsh_jupyter.server.errors`): 400, 403 and 404 say what to change; 500 says only "internal error"
(the details are in the server log); 503 and 504 say the server is busy or the store too slow.
"""

from __future__ import annotations

from collections.abc import Callable
from http.client import responses
from pathlib import Path
from typing import Any, Protocol

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from .._json import dumps
from ..references import SessionReferenceError
from . import sessions
from .boundary import Boundary
from .errors import BAD_REQUEST, INTERNAL, INTERNAL_MESSAGE, ApiError, busy, error_body, internal, too_slow
from .params import parse_cwd, parse_exclude, parse_flag, parse_limit, parse_query, query_parameters
from .pool import PoolBusy, PoolTimeout
from .postgres import ServedPostgres
from .state import SETTINGS_KEY, ServerState

#: The authorisation resource name every dsh handler declares.
AUTH_RESOURCE = "dsh"

#: HTTP status of each reference error code when it escapes a handler (anything else is a 500).
_STATUS_BY_CODE = {
    "SESSION_REFERENCE_INVALID_REFERENCE": 400,
    "SESSION_REFERENCE_INVALID_CONFIG": 400,
    "SESSION_REFERENCE_SELF_REFERENCE": 400,
    "SESSION_REFERENCE_TOO_MANY": 400,
    "SESSION_REFERENCE_BUDGET_EXCEEDED": 400,
}

#: What a 503 says when the reader pool is full.
BUSY_MESSAGE = ("the dsh session readers are all busy (a session store may be slow to read); "
                "try again in a moment")

#: A blocking read to run on the reader pool.
Job = Callable[[], object]


class SessionReader(Protocol):
    """A :mod:`.sessions` function reading one session of a folder (or of the served PostgreSQL store)."""

    def __call__(self, folder: Path, session_id: str, boundary: Boundary, *,
                 postgres: ServedPostgres | None = ...) -> object: ...


class DshApiHandler(APIHandler):
    """Base class: JSON replies, JSON errors, blocking reads on the extension's reader pool."""

    auth_resource = AUTH_RESOURCE

    @property
    def dsh(self) -> ServerState:
        state: ServerState = self.settings[SETTINGS_KEY]
        return state

    def reply(self, value: object) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(dumps(value))

    def fail(self, error: ApiError) -> None:
        self.set_status(error.status)
        self.reply(error.to_json())

    #: The query parameters this endpoint takes (anything else is a 400; see :mod:`.params`).
    parameters: frozenset[str] = frozenset({"cwd"})

    def params(self) -> dict[str, str]:
        """The request's query parameters, read strictly (an :class:`ApiError` for anything unusable)."""
        return query_parameters(self.request.query, self.parameters, self.endpoint)

    @property
    def endpoint(self) -> str:
        """How messages name this endpoint (``dsh/api/<name>``)."""
        return "dsh/api/" + self.request.path.split("/dsh/api/", 1)[-1].split("/", 1)[0]

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        """A path segment as text; one that is not UTF-8 is a 400 saying so (tornado's own message names
        the raw bytes)."""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            if name is not None:  # a query argument jupyter-server itself reads (its token)
                raise web.HTTPError(400, f"the value of {name} is not valid UTF-8 text once percent-decoded") from None
            raise web.HTTPError(400, "the session reference in the path is not valid UTF-8 once "
                                     "percent-decoded; put the part after 'dsh-session:' of the session's "
                                     "canonical URI in the path") from None

    def folder_job(self, params: dict[str, str], read: Callable[[Path], object]) -> Job:
        """A job that resolves the ``cwd`` parameter to a folder inside the root, then calls ``read`` on it."""
        root = self.dsh.boundary.root
        cwd = parse_cwd(params.get("cwd"))
        allow_hidden = bool(getattr(self.contents_manager, "allow_hidden", True))
        return lambda: read(sessions.resolve_folder(root, cwd, allow_hidden=allow_hidden))

    async def answer(self, prepare: Callable[[], Job]) -> None:
        """Reply with the JSON of the job ``prepare()`` returns, run on the reader pool, or a JSON error.

        ``prepare`` runs here on the event loop and only checks parameters (raising :class:`ApiError`)."""
        state = self.dsh
        try:
            job = prepare()
            result = await state.pool.run(job, state.timeout)
        except ApiError as exc:  # a 500 among them was logged where it happened
            self.fail(exc)
            return
        except SessionReferenceError as exc:
            status = _STATUS_BY_CODE.get(exc.code)
            if status is None:
                self.log.error("dsh-jupyter: %s %s failed: %s: %s", self.request.method, self.request.path,
                               exc.code, exc.message)
                self.fail(internal())
            else:
                self.fail(ApiError(status, exc.code, exc.message))
            return
        except PoolBusy as exc:
            self.log.warning("dsh-jupyter: refused %s %s: %s", self.request.method, self.request.path, exc)
            self.fail(busy(BUSY_MESSAGE))
            return
        except PoolTimeout as exc:
            self.log.warning("dsh-jupyter: %s %s gave up: %s (the read goes on in the background)",
                             self.request.method, self.request.path, exc)
            self.fail(too_slow(exc.seconds))
            return
        except Exception:
            self.log.exception("dsh-jupyter: %s %s failed", self.request.method, self.request.path)
            self.fail(internal())
            return
        self.reply(result)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Errors raised outside :meth:`answer` (403, 405, unexpected ones) in the same JSON shape.

        A client error keeps its reason; a server error says only "internal error"."""
        message = responses.get(status_code, "Unknown HTTP Error")
        exc_info = kwargs.get("exc_info")
        error = exc_info[1] if exc_info else None
        if status_code >= 500:
            message = INTERNAL_MESSAGE
        elif isinstance(error, web.HTTPError) and error.log_message:
            try:
                message = error.log_message % error.args if error.args else error.log_message
            except (TypeError, ValueError):
                message = error.log_message
        code = INTERNAL if status_code == 500 else BAD_REQUEST if status_code == 400 else f"HTTP_{status_code}"
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(dumps(error_body(code, message)))


class CandidatesHandler(DshApiHandler):
    """``GET dsh/api/candidates``: ``[{sessionId, label, cwd?, sameWorkspace, createdAt, mention}, ...]``.

    Subclasses answer the same parameters with another :mod:`.sessions` function, named by ``lister`` (looked
    up per request)."""

    parameters = frozenset({"cwd", "query", "limit", "body", "exclude"})
    lister = "list_candidates"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        def prepare() -> Job:
            params = self.params()
            query = parse_query(params.get("query"))
            limit = parse_limit(params.get("limit"))
            body = parse_flag("body", params.get("body"))
            exclude = parse_exclude(params.get("exclude"))
            boundary, postgres = self.dsh.boundary, self.dsh.postgres
            listing: Callable[..., object] = getattr(sessions, self.lister)
            return self.folder_job(params, lambda folder: listing(folder, query, limit, boundary=boundary, body=body,
                                                                  postgres=postgres, exclude=exclude))

        await self.answer(prepare)


class SessionsHandler(CandidatesHandler):
    """``GET dsh/api/sessions``: ``{sessions, unreadable, unreadableCount, indexing, complete, notes}`` (see
    :func:`.sessions.list_sessions`): the candidates plus every entry of the folder's store that cannot be read."""

    lister = "list_sessions"


class _SessionReadHandler(DshApiHandler):
    """A ``GET …/<payload>`` route that reads one session (named by its URI payload) in the request's folder
    with the :mod:`.sessions` function named by ``reader`` (looked up per request)."""

    reader: str

    @web.authenticated
    @authorized
    async def get(self, payload: str) -> None:
        def prepare() -> Job:
            params = self.params()
            session_id = sessions.decode_session_payload(payload)
            boundary, postgres = self.dsh.boundary, self.dsh.postgres
            read: SessionReader = getattr(sessions, self.reader)
            return self.folder_job(params, lambda folder: read(folder, session_id, boundary, postgres=postgres))

        await self.answer(prepare)


class SessionHandler(_SessionReadHandler):
    """``GET dsh/api/sessions/<payload>``: one session's metadata and bounded conversation preview."""

    reader = "session_detail"


class LocateHandler(_SessionReadHandler):
    """``GET dsh/api/locate/<payload>``: ``{"kind": "jsonl", "path", "contentsPath"}``."""

    reader = "session_location"


#: ``(route relative to base_url, handler)``; the payload group takes any non-empty segment so that
#: malformed payloads reach the handler and get a 400 with a reason instead of a bare 404.
ROUTES: list[tuple[str, type[DshApiHandler]]] = [
    (r"dsh/api/candidates/?", CandidatesHandler),
    (r"dsh/api/sessions/?", SessionsHandler),
    (r"dsh/api/sessions/([^/]+)/?", SessionHandler),
    (r"dsh/api/locate/([^/]+)/?", LocateHandler),
]
