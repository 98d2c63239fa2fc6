"""SessionReferenceError: stable codes, message, cause chaining; the package's public names."""

from __future__ import annotations

import pickle

import pytest

from dsh_jupyter import references
from dsh_jupyter.references import ERROR_CODES, SessionReferenceError


def test_the_seven_codes() -> None:
    assert {
        "SESSION_REFERENCE_INVALID_CONFIG", "SESSION_REFERENCE_INVALID_REFERENCE", "SESSION_REFERENCE_SELF_REFERENCE",
        "SESSION_REFERENCE_TOO_MANY", "SESSION_REFERENCE_READ_FAILED", "SESSION_REFERENCE_BUDGET_EXCEEDED",
        "SESSION_REFERENCE_CANCELLED",
    } == ERROR_CODES
    for code in ERROR_CODES:
        assert getattr(references, code) == code


def test_error_fields_and_cause() -> None:
    cause = OSError("disk")
    error = SessionReferenceError("SESSION_REFERENCE_READ_FAILED", "failed to read referenced session: disk", cause)
    assert (error.code, error.message, error.cause, error.__cause__) == (
        "SESSION_REFERENCE_READ_FAILED", "failed to read referenced session: disk", cause, cause)
    assert str(error) == error.message and error.name == "SessionReferenceError"
    assert "READ_FAILED" in repr(error)
    assert SessionReferenceError("SESSION_REFERENCE_CANCELLED", "x", "reason").__cause__ is None
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.message) == (error.code, error.message)


def test_unknown_codes_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown session reference error code"):
        SessionReferenceError("NOPE", "x")


def test_public_names() -> None:
    for name in ["encode_session_reference_uri", "decode_session_reference_uri", "format_session_reference_mention",
                 "parse_session_reference_text", "SessionReferenceError", "SessionReferenceResolver",
                 "ReferenceTarget", "SessionReferenceInput", "SessionReferenceCandidate",
                 "PreparedReferencedMessage", "MAX_REFERENCES"]:
        assert name in references.__all__ and hasattr(references, name)
    assert references.MAX_REFERENCES == 3
