"""The ``dsh-session:`` URI: a session id as unpadded base64url of its JSON string literal.

The id is first written exactly as JavaScript's ``JSON.stringify`` writes a string (so quotes,
backslashes, newlines, any Unicode and even lone UTF-16 surrogates survive), then encoded as UTF-8
and base64url without ``=`` padding. Decoding is strict: a URI is accepted only when re-encoding the
id it carries gives back the very same URI, so every id has exactly one spelling.
"""

from __future__ import annotations

import base64
import json
import re

from .._json import dumps, js_string
from .errors import SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError

#: The URI scheme, lowercase, colon included.
SESSION_REFERENCE_SCHEME = "dsh-session:"

_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)


def _quote(value: object) -> str:
    return dumps(value) if isinstance(value, str) else repr(value)


def _invalid(uri: object, cause: BaseException | None = None) -> SessionReferenceError:
    detail = f" ({cause})" if cause is not None else ""
    return SessionReferenceError(
        SESSION_REFERENCE_INVALID_REFERENCE,
        f"{_quote(uri)} is not a canonical session reference URI{detail}; expected "
        f"{SESSION_REFERENCE_SCHEME!r} followed by the unpadded base64url of the session id's JSON string, "
        "as encode_session_reference_uri() writes it",
        cause,
        {"uri": uri} if isinstance(uri, str) else None,
    )


def encode_session_reference_uri(session_id: str) -> str:
    """The canonical URI of ``session_id`` (any string; JavaScript's view of its UTF-16 code units)."""
    if not isinstance(session_id, str):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"a session id must be a string to be encoded as a reference URI, got {type(session_id).__name__}",
        )
    literal = dumps(js_string(session_id)).encode("utf-8")
    return SESSION_REFERENCE_SCHEME + base64.urlsafe_b64encode(literal).rstrip(b"=").decode("ascii")


def _decode_payload(payload: str) -> bytes:
    # Node's base64url decoder ignores a dangling sixth-bit group (length = 1 mod 4) and never needs
    # padding; the canonical re-encode below rejects whatever leniency lets through.
    usable = payload[: len(payload) - 1] if len(payload) % 4 == 1 else payload
    return base64.urlsafe_b64decode(usable + "=" * (-len(usable) % 4))


def decode_session_reference_uri(uri: str) -> str:
    """The session id carried by a canonical URI; anything else raises ``SESSION_REFERENCE_INVALID_REFERENCE``."""
    if not isinstance(uri, str) or not uri.startswith(SESSION_REFERENCE_SCHEME):
        raise _invalid(uri)
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    if _PAYLOAD.fullmatch(payload) is None:
        raise _invalid(uri)
    try:
        text = _decode_payload(payload).decode("utf-8", errors="replace")
        value = json.loads(text)
        if not isinstance(value, str):
            raise ValueError(f"the payload holds a JSON {type(value).__name__}, not a string")
        if encode_session_reference_uri(value) != uri:
            raise ValueError("the payload is not in canonical form")
    except SessionReferenceError:
        raise
    except Exception as exc:  # base64, JSON, recursion or int-size errors: all mean "not a reference"
        raise _invalid(uri, exc) from exc
    return value
