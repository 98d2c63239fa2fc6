"""The errors the REST API answers with: an HTTP status, a stable ``code`` and a message for people.

Client errors say what was wrong with the request and what to do instead: 400 (a bad parameter), 403 (a
store or session outside the folders the server serves, or a session entry the store refuses to read),
404 (no such session). Server errors never carry
details: 500 says "internal error" and the details go to the server log only; 503 (busy) and 504 (too slow)
say to try again. No message names an absolute path on the server: folders are shown relative to the
server root (see :meth:`dsh_jupyter.server.boundary.Boundary.shown`).

Every body has the same shape: ``{"error": {"code", "message"}, "message"}``.
"""

from __future__ import annotations

from ..references import SESSION_REFERENCE_INVALID_REFERENCE, SESSION_REFERENCE_READ_FAILED
from .wire import ErrorBody

#: 400: a parameter the API cannot use (the reference's own code, which the front end knows).
BAD_REQUEST = SESSION_REFERENCE_INVALID_REFERENCE
#: 404: no session with that id in the folder's store (the reference's code for an unreadable session).
NOT_FOUND = SESSION_REFERENCE_READ_FAILED
#: 403: the folder's store, or the session's log, lies outside the folders the server serves.
OUTSIDE_ROOT = "DSH_OUTSIDE_ROOT"
#: 403: the store refused the session's entry (a link, a pipe, a device, or a file this user may not read).
REFUSED_ENTRY = "DSH_REFUSED_ENTRY"
#: 500: something failed on the server; the server log has the details.
INTERNAL = "DSH_INTERNAL_ERROR"
#: 503: every dsh reader is busy (or the session catalog cannot answer right now).
BUSY = "DSH_BUSY"
#: 504: the read took longer than the server allows one request.
TIMEOUT = "DSH_TIMEOUT"

#: The message of every 500: nothing about the server's files or code.
INTERNAL_MESSAGE = "internal error in the dsh server extension; the server log has the details"


class ApiError(Exception):
    """A request the API refuses: HTTP ``status``, a stable ``code`` and a message saying what to do."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def to_json(self) -> ErrorBody:
        return error_body(self.code, self.message)


def error_body(code: str, message: str) -> ErrorBody:
    """The JSON body of every error reply."""
    return {"error": {"code": code, "message": message}, "message": message}


def bad_request(message: str) -> ApiError:
    return ApiError(400, BAD_REQUEST, message)


def outside_root(message: str) -> ApiError:
    return ApiError(403, OUTSIDE_ROOT, message)


def refused_entry(message: str) -> ApiError:
    return ApiError(403, REFUSED_ENTRY, message)


def not_found(session_id: str, where: str) -> ApiError:
    """No session ``session_id`` in the store of the folder shown as ``where`` (relative to the root)."""
    return ApiError(
        404,
        NOT_FOUND,
        f"no session {session_id!r} in the session store of {where}; "
        "list the folder's sessions with dsh/api/candidates and use one of their ids",
    )


def internal() -> ApiError:
    return ApiError(500, INTERNAL, INTERNAL_MESSAGE)


def busy(message: str) -> ApiError:
    return ApiError(503, BUSY, message)


def too_slow(seconds: float) -> ApiError:
    return ApiError(
        504,
        TIMEOUT,
        f"reading the session store took longer than {seconds:g} s, the most one request may take; "
        "try again, and if it keeps happening ask the administrator to check the store (the server log "
        "names it)",
    )
