"""REST handlers of the dsh jupyter-server extension. Every endpoint is read-only (GET).

Routes, under the server's ``base_url``:

- ``dsh/api/candidates?query=&limit=&cwd=``: ranked sessions a prompt in folder ``cwd`` may reference;
- ``dsh/api/sessions/<payload>?cwd=``: metadata and a bounded preview of one session;
- ``dsh/api/locate/<payload>?cwd=``: where that session's log lives.

``<payload>`` is the part after ``dsh-session:`` of the session's canonical URI (base64url, so any id is
URL-safe); ``cwd`` is the notebook's folder relative to the server root. Requests go through
jupyter-server's authentication (``@tornado.web.authenticated``) and authorisation (``@authorized``,
resource ``"dsh"``, action ``read``). Errors are JSON: ``{"error": {"code", "message"}, "message"}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http.client import responses
from pathlib import Path
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from .._json import dumps
from ..references import SessionReferenceError
from . import sessions

#: The authorisation resource name every dsh handler declares.
AUTH_RESOURCE = "dsh"

#: HTTP status of each reference error code when it escapes a handler.
_STATUS_BY_CODE = {
    "SESSION_REFERENCE_INVALID_REFERENCE": 400,
    "SESSION_REFERENCE_INVALID_CONFIG": 400,
    "SESSION_REFERENCE_SELF_REFERENCE": 400,
    "SESSION_REFERENCE_TOO_MANY": 400,
    "SESSION_REFERENCE_BUDGET_EXCEEDED": 400,
    "SESSION_REFERENCE_READ_FAILED": 500,
    "SESSION_REFERENCE_CANCELLED": 503,
}

T = TypeVar("T")


class DshApiHandler(APIHandler):
    """Base class: JSON replies, JSON errors, blocking reads off the event loop."""

    auth_resource = AUTH_RESOURCE

    def reply(self, value: Any) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(dumps(value))

    def fail(self, error: sessions.ApiError) -> None:
        self.set_status(error.status)
        self.reply(error.to_json())

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """Run a blocking store read in a worker thread."""
        return await asyncio.to_thread(func, *args)

    def folder(self) -> Path:
        return sessions.resolve_folder(
            self.settings["server_root_dir"],
            self.get_query_argument("cwd", ""),
            allow_hidden=bool(getattr(self.contents_manager, "allow_hidden", True)),
        )

    async def answer(self, func: Callable[[], Any]) -> None:
        """Call ``func`` (which may return an awaitable) and reply with its JSON, or a JSON error."""
        try:
            result = func()
            if asyncio.iscoroutine(result):
                result = await result
        except sessions.ApiError as exc:
            self.fail(exc)
            return
        except SessionReferenceError as exc:
            self.fail(sessions.ApiError(_STATUS_BY_CODE.get(exc.code, 500), exc.code, exc.message))
            return
        self.reply(result)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Errors raised outside :meth:`answer` (403, 405, unexpected ones) in the same JSON shape."""
        message = responses.get(status_code, "Unknown HTTP Error")
        exc_info = kwargs.get("exc_info")
        if exc_info and isinstance(exc_info[1], web.HTTPError) and exc_info[1].log_message:
            error = exc_info[1]
            try:
                message = error.log_message % error.args if error.args else error.log_message
            except (TypeError, ValueError):
                message = error.log_message
        elif exc_info:
            message = "internal error in the dsh server extension; the server log has the details"
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(dumps({"error": {"code": f"HTTP_{status_code}", "message": message}, "message": message}))


class CandidatesHandler(DshApiHandler):
    """``GET dsh/api/candidates``: ``[{sessionId, label, cwd?, sameWorkspace, createdAt, mention}, ...]``."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        async def work() -> Any:
            query = sessions.parse_query(self.get_query_argument("query", "", strip=False))
            limit = sessions.parse_limit(self.get_query_argument("limit", None, strip=False))
            body = sessions.parse_flag("body", self.get_query_argument("body", None, strip=False))
            folder = self.folder()
            return await self.run(lambda: sessions.list_candidates(folder, query, limit, body=body))

        await self.answer(work)


class SessionHandler(DshApiHandler):
    """``GET dsh/api/sessions/<payload>``: one session's metadata and bounded conversation preview."""

    @web.authenticated
    @authorized
    async def get(self, payload: str) -> None:
        async def work() -> Any:
            session_id = sessions.decode_session_payload(payload)
            folder = self.folder()
            return await self.run(sessions.session_detail, folder, session_id)

        await self.answer(work)


class LocateHandler(DshApiHandler):
    """``GET dsh/api/locate/<payload>``: ``{"kind": "jsonl", "path", "contentsPath"}`` or ``{"kind": null}``."""

    @web.authenticated
    @authorized
    async def get(self, payload: str) -> None:
        async def work() -> Any:
            session_id = sessions.decode_session_payload(payload)
            folder = self.folder()
            return await self.run(sessions.session_location, folder, session_id, self.settings["server_root_dir"])

        await self.answer(work)


#: ``(route relative to base_url, handler)``; the payload group takes any non-empty segment so that
#: malformed payloads reach the handler and get a 400 with a reason instead of a bare 404.
ROUTES: list[tuple[str, type[DshApiHandler]]] = [
    (r"dsh/api/candidates/?", CandidatesHandler),
    (r"dsh/api/sessions/([^/]+)/?", SessionHandler),
    (r"dsh/api/locate/([^/]+)/?", LocateHandler),
]
