"""The error bodies of the REST API: stable codes, one JSON shape, no server details in a 500."""

from __future__ import annotations

from dsh_jupyter.server import errors


def test_every_error_has_the_same_shape_and_a_stable_code() -> None:
    made = [errors.bad_request("limit must be ..."), errors.outside_root("outside"),
            errors.refused_entry("a link"),
            errors.not_found("s", "'nb'"), errors.internal(), errors.busy("busy"), errors.too_slow(2.5)]
    assert [(e.status, e.code) for e in made] == [
        (400, "SESSION_REFERENCE_INVALID_REFERENCE"), (403, "DSH_OUTSIDE_ROOT"), (403, "DSH_REFUSED_ENTRY"),
        (404, "SESSION_REFERENCE_READ_FAILED"),
        (500, "DSH_INTERNAL_ERROR"), (503, "DSH_BUSY"), (504, "DSH_TIMEOUT")]
    for error in made:
        body = error.to_json()
        assert body == {"error": {"code": error.code, "message": error.message}, "message": error.message}


def test_messages_say_what_to_do() -> None:
    assert "no session 's' in the session store of 'nb'" in errors.not_found("s", "'nb'").message
    assert "dsh/api/candidates" in errors.not_found("s", "'nb'").message
    assert "2.5 s" in errors.too_slow(2.5).message and "try again" in errors.too_slow(2.5).message
    assert errors.internal().message == errors.INTERNAL_MESSAGE
    assert "server log" in errors.INTERNAL_MESSAGE
