"""Cross-session references: bounded, read-only, untrusted snapshots of other sessions in a prompt.

- :func:`encode_session_reference_uri` / :func:`decode_session_reference_uri`: the canonical
  ``dsh-session:`` URI of a session id.
- :func:`format_session_reference_mention` / :func:`parse_session_reference_text`: ``@[label](uri)``
  mentions in prompt text.
- :class:`SessionReferenceResolver`: candidates for a picker and ``prepare()`` of the context message.
"""

from __future__ import annotations

from .candidates import SessionReferenceCandidate
from .errors import (
    ERROR_CODES,
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceError,
)
from .inputs import SessionReferenceInput
from .mentions import ParsedReferenceText, format_session_reference_mention, parse_session_reference_text
from .resolver import MAX_REFERENCES, PreparedReferencedMessage, SessionReferenceResolver
from .spill import SpillResult
from .target import ReferenceTarget
from .uri import SESSION_REFERENCE_SCHEME, decode_session_reference_uri, encode_session_reference_uri

__all__ = [
    "ERROR_CODES",
    "MAX_REFERENCES",
    "SESSION_REFERENCE_BUDGET_EXCEEDED",
    "SESSION_REFERENCE_CANCELLED",
    "SESSION_REFERENCE_INVALID_CONFIG",
    "SESSION_REFERENCE_INVALID_REFERENCE",
    "SESSION_REFERENCE_READ_FAILED",
    "SESSION_REFERENCE_SCHEME",
    "SESSION_REFERENCE_SELF_REFERENCE",
    "SESSION_REFERENCE_TOO_MANY",
    "ParsedReferenceText",
    "PreparedReferencedMessage",
    "ReferenceTarget",
    "SessionReferenceCandidate",
    "SessionReferenceError",
    "SessionReferenceInput",
    "SessionReferenceResolver",
    "SpillResult",
    "decode_session_reference_uri",
    "encode_session_reference_uri",
    "format_session_reference_mention",
    "parse_session_reference_text",
]
