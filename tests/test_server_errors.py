"""The error bodies of the REST API: stable codes, one JSON shape, no server details in a 500; strict parameters."""

from __future__ import annotations

from pathlib import Path

from server_helpers import Api, server_api, server_config

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


# -- strict parameters (dsh_jupyter.server.params) and errors through a real server ---------------------------
def test_the_query_string_is_read_strictly() -> None:
    from dsh_jupyter.server.params import query_parameters

    allowed = {"query", "cwd"}
    assert query_parameters("query=a+b%20c&cwd=&token=t&&", allowed, "dsh/api/x") == {"query": "a b c", "cwd": ""}
    # What JupyterLab's ServerConnection sends: an empty value without "=", and the time as a cache buster.
    assert query_parameters("query&cwd=project&1796155949541", allowed, "dsh/api/x") == {"query": "",
                                                                                        "cwd": "project"}
    cases = {"query=1&query=2": "query was given more than once", "nope=1": "does not take the parameter 'nope'",
             "query=%G1": "broken percent escape", "query=%80": "not valid UTF-8", "query=%7F": "U+007F",
             "cwd=" + "x" * 20_000: "20,000 characters long", "%00=1": "control character U+0000",
             "17=": "does not take the parameter '17'"}
    for raw, expected in cases.items():
        try:
            query_parameters(raw, allowed, "dsh/api/x")
        except errors.ApiError as exc:
            assert exc.status == 400 and expected in exc.message, (raw, exc.message)
            assert len(exc.message) < 300
        else:
            raise AssertionError(f"{raw[:40]!r} was accepted")


jp_server_config = server_config()


api = server_api()


def test_errors_raised_before_a_handler_runs_have_the_same_shape(api: Api, jp_root_dir: Path) -> None:
    reply = api.raw("dsh/api/sessions/%C3%28")  # a path segment that is not UTF-8
    assert reply.code == 400 and reply.body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
    message = reply.body["error"]["message"]
    assert "not valid UTF-8" in message and reply.body["message"] == message
    code, body = api.error("dsh", "api", "candidates", method="POST", body=b"{}")
    assert code == 405 and body["error"]["code"] == "HTTP_405"
    for path in ("dsh/api/candidates?limit=" + "9" * 5000, "dsh/api/sessions?cwd=" + "a" * 40_000):
        reply = api.raw(path)
        assert reply.code == 400 and set(reply.body) == {"error", "message"}
