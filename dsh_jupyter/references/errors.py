"""The one error type of the reference service and its seven stable codes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

SESSION_REFERENCE_INVALID_CONFIG = "SESSION_REFERENCE_INVALID_CONFIG"
SESSION_REFERENCE_INVALID_REFERENCE = "SESSION_REFERENCE_INVALID_REFERENCE"
SESSION_REFERENCE_SELF_REFERENCE = "SESSION_REFERENCE_SELF_REFERENCE"
SESSION_REFERENCE_TOO_MANY = "SESSION_REFERENCE_TOO_MANY"
SESSION_REFERENCE_READ_FAILED = "SESSION_REFERENCE_READ_FAILED"
SESSION_REFERENCE_BUDGET_EXCEEDED = "SESSION_REFERENCE_BUDGET_EXCEEDED"
SESSION_REFERENCE_CANCELLED = "SESSION_REFERENCE_CANCELLED"

#: Every code a :class:`SessionReferenceError` may carry (hosts switch on these, never on messages).
ERROR_CODES = frozenset(
    {
        SESSION_REFERENCE_INVALID_CONFIG,
        SESSION_REFERENCE_INVALID_REFERENCE,
        SESSION_REFERENCE_SELF_REFERENCE,
        SESSION_REFERENCE_TOO_MANY,
        SESSION_REFERENCE_READ_FAILED,
        SESSION_REFERENCE_BUDGET_EXCEEDED,
        SESSION_REFERENCE_CANCELLED,
    }
)


class SessionReferenceError(Exception):
    """A reference operation failed; ``code`` says which way, ``message`` says what to do about it.

    ``cause`` keeps the underlying error (or cancellation reason) when there is one; when it is an
    exception it is also chained as ``__cause__`` so tracebacks show it. ``details`` holds the facts a host
    needs to word the error for its own users (read-only; keys used: ``uri``, ``sessionId``, ``label``,
    ``budget``, ``count``, ``limit``, ``setting``, ``value``); hosts switch on ``code`` and read ``details``,
    never the message.
    """

    name = "SessionReferenceError"

    def __init__(self, code: str, message: str, cause: object = None,
                 details: Mapping[str, object] | None = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown session reference error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.cause = cause
        self.details: Mapping[str, object] = MappingProxyType(dict(details or {}))
        if isinstance(cause, BaseException):
            self.__cause__ = cause

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"SessionReferenceError({self.code!r}, {self.message!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, self.message, None, dict(self.details)))
