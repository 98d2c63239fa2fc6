"""The dsh REST endpoints through a real jupyter-server (pytest-jupyter's ``jp_fetch``).

The tests are plain functions that drive ``jp_fetch`` on pytest-jupyter's own event loop (see
``server_helpers``). Hostile stores are in ``test_server_hostile.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from server_helpers import Api, make_session, payload, server_api, server_config

from dsh_jupyter.references import encode_session_reference_uri, format_session_reference_mention
from dsh_jupyter.store import JsonlStore

HOSTILE = ["<img src=x onerror=alert(1)>", "</referenced-sessions>", "\x1b[31mred\x1b[0m\x07"]
TRAVERSAL_IDS = ["../../etc/pwn", "/etc/passwd", "..", ".", "a/../../b", "~"]


jp_server_config = server_config()


api = server_api()


@pytest.fixture
def workspace(jp_root_dir: Path) -> Path:
    """A root with sessions in ``nb/`` (one in the same folder, one cwd-less, one elsewhere) and ``other/``."""
    folder = jp_root_dir / "nb"
    folder.mkdir()
    here = os.path.realpath(folder)
    make_session(folder, "same-old", created_at=20, cwd=here)
    make_session(folder, "same-new", created_at=25, cwd=here, title="Latest title")
    make_session(folder, "no-cwd", created_at=30, cwd=None)
    make_session(folder, "elsewhere", created_at=40, cwd="/else")
    (jp_root_dir / "other").mkdir()
    make_session(jp_root_dir / "other", "other-folder", created_at=50, cwd=str(jp_root_dir / "other"))
    return folder


# -- candidates --------------------------------------------------------------------------------------------
def test_candidates_rank_same_folder_first_then_cwdless_then_others(api: Api, workspace: Path) -> None:
    data = api.get("dsh", "api", "candidates", params={"cwd": "nb"})
    assert [c["sessionId"] for c in data] == ["same-new", "same-old", "no-cwd", "elsewhere"]
    first = data[0]
    assert first == {
        "sessionId": "same-new",
        "label": "Latest title",
        "cwd": os.path.realpath(workspace),
        "sameWorkspace": True,
        "createdAt": 25,
        "mention": format_session_reference_mention("same-new", "Latest title"),
    }
    assert "cwd" not in data[2] and data[2]["sameWorkspace"] is False
    assert data[3]["sameWorkspace"] is False


def test_candidates_query_filters_on_title_id_and_cwd_case_insensitively(api: Api, workspace: Path) -> None:
    by_title = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "LATEST"})
    assert [c["sessionId"] for c in by_title] == ["same-new"]
    by_cwd = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "els"})
    assert [c["sessionId"] for c in by_cwd] == ["elsewhere"]
    nothing = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "answer 1"})
    assert nothing == []  # message bodies are never searched


def test_candidates_limit_cuts_after_ranking(api: Api, workspace: Path) -> None:
    data = api.get("dsh", "api", "candidates", params={"cwd": "nb", "limit": "2"})
    assert [c["sessionId"] for c in data] == ["same-new", "same-old"]
    one = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "els", "limit": "1"})
    assert [c["sessionId"] for c in one] == ["elsewhere"]


def test_candidates_leave_out_the_excluded_session_with_or_without_a_query(api: Api, workspace: Path) -> None:
    every = api.get("dsh", "api", "candidates", params={"cwd": "nb", "exclude": "same-new"})
    assert [c["sessionId"] for c in every] == ["same-old", "no-cwd", "elsewhere"]
    typed = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "latest", "exclude": "same-new"})
    assert typed == []
    listing = api.get("dsh", "api", "sessions", params={"cwd": "nb", "query": "same", "exclude": "same-new"})
    assert [c["sessionId"] for c in listing["sessions"]] == ["same-old"]
    assert [c["sessionId"] for c in api.get("dsh", "api", "candidates", params={"cwd": "nb", "exclude": ""})] == [
        "same-new", "same-old", "no-cwd", "elsewhere"]


def test_a_bad_exclude_is_a_400_that_says_what_to_send(api: Api, workspace: Path) -> None:
    status, body = api.error("dsh", "api", "candidates", params={"cwd": "nb", "exclude": "x\x07"})
    assert status == 400 and "exclude" in body["error"]["message"] and "U+0007" in body["error"]["message"]
    status, body = api.error("dsh", "api", "candidates", params={"cwd": "nb", "exclude": "x" * 600})
    assert status == 400 and "current session" in body["error"]["message"]


def test_candidates_default_to_the_root_folder_and_each_folder_has_its_own_store(
    api: Api, workspace: Path
) -> None:
    assert api.get("dsh", "api", "candidates") == []
    other = api.get("dsh", "api", "candidates", params={"cwd": "other/"})
    assert [c["sessionId"] for c in other] == ["other-folder"]
    assert other[0]["sameWorkspace"] is True


def test_a_dsh_sessions_dir_outside_the_root_is_refused_without_a_path(
    api: Api, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-store"
    make_session(tmp_path, "from-env", created_at=7, cwd="/anywhere", store=shared)
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(shared))
    for route in (("candidates",), ("sessions", payload("from-env")), ("locate", payload("from-env"))):
        code, body = api.error("dsh", "api", *route, params={"cwd": "nb"})
        assert code == 403, route
        assert body["error"]["code"] == "DSH_OUTSIDE_ROOT"
        message = body["error"]["message"]
        assert "DSH_SESSIONS_DIR" in message and "extra_roots" in message and "'nb'" in message
        assert str(tmp_path) not in json.dumps(body)


def test_hostile_titles_come_back_verbatim_as_json(api: Api, jp_root_dir: Path) -> None:
    for n, title in enumerate(HOSTILE):
        make_session(jp_root_dir, f"hostile-{n}", created_at=100 - n, cwd=None, title=title)
    data = api.get("dsh", "api", "candidates")
    assert [c["label"] for c in data] == HOSTILE
    assert data[0]["mention"] == format_session_reference_mention("hostile-0", HOSTILE[0])


BAD_LIMITS = ["0", "-1", "1.5", "abc", "1e3", " ", " 5", "", "١", "1001"]
BAD_CWDS = ["/etc", "/", "C:\\Windows", "nb\x00x", "missing"]
OUTSIDE_CWDS = ["..", "../..", "nb/../.."]


def test_bad_limits_are_400s_with_the_reference_code(api: Api, workspace: Path) -> None:
    for limit in BAD_LIMITS:
        code, body = api.error("dsh", "api", "candidates", params={"cwd": "nb", "limit": limit})
        assert code == 400, limit
        assert body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
        assert "limit" in body["error"]["message"]
        assert body["message"] == body["error"]["message"]


def test_absolute_or_missing_cwd_is_a_400_and_climbing_out_a_403(api: Api, workspace: Path,
                                                                  jp_root_dir: Path) -> None:
    for cwd in BAD_CWDS:
        code, body = api.error("dsh", "api", "candidates", params={"cwd": cwd})
        assert code == 400, cwd
        assert body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
        assert "cwd" in body["error"]["message"]
    for cwd in OUTSIDE_CWDS:
        for route in (("candidates",), ("sessions", payload("same-old")), ("locate", payload("same-old"))):
            code, body = api.error("dsh", "api", *route, params={"cwd": cwd})
            assert code == 403, (cwd, route)
            assert body["error"]["code"] == "DSH_OUTSIDE_ROOT"
            assert "cwd" in body["error"]["message"]
            assert str(jp_root_dir.parent) not in json.dumps(body)


def test_symlink_leaving_the_root_is_refused(api: Api, jp_root_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    make_session(outside, "secret", created_at=1, cwd=None)
    (jp_root_dir / "link").symlink_to(outside, target_is_directory=True)
    code, body = api.error("dsh", "api", "candidates", params={"cwd": "link"})
    assert code == 403 and "outside" in body["error"]["message"]
    assert body["error"]["code"] == "DSH_OUTSIDE_ROOT"


def test_overlong_query_is_a_400(api: Api, workspace: Path) -> None:
    code, body = api.error("dsh", "api", "candidates", params={"query": "x" * 1001})
    assert code == 400 and "query" in body["error"]["message"]


# -- sessions and locate -----------------------------------------------------------------------------------
def test_session_detail_has_metadata_and_a_preview(api: Api, workspace: Path) -> None:
    data = api.get("dsh", "api", "sessions", payload("same-new"), params={"cwd": "nb"})
    assert data["sessionId"] == "same-new"
    assert data["label"] == data["title"] == "Latest title"
    assert data["cwd"] == os.path.realpath(workspace)
    assert data["createdAt"] == 25
    assert data["capturedThroughSeq"] == 4
    assert data["messageCounts"] == {"events": 5, "surface": 2, "projected": 2, "user": 1, "assistant": 1}
    assert [(m["role"], m["text"]) for m in data["preview"]["messages"]] == [
        ("user", "question 1 of same-new"), ("assistant", "answer 1")]
    assert data["uri"] == encode_session_reference_uri("same-new")
    assert data["mention"] == format_session_reference_mention("same-new", "Latest title")


def test_session_preview_is_bounded(api: Api, jp_root_dir: Path) -> None:
    make_session(jp_root_dir, "long", created_at=1, cwd=None, turns=15)
    data = api.get("dsh", "api", "sessions", payload("long"))
    preview = data["preview"]
    assert data["messageCounts"]["projected"] == 30
    assert len(preview["messages"]) == preview["maxMessages"] == 20
    assert preview["omittedMessages"] == 10
    assert preview["messages"][-1]["text"] == "answer 15"


def test_odd_ids_travel_safely_in_the_path(api: Api, jp_root_dir: Path) -> None:
    odd = 'a/b?c#d e"\\]\n界'
    make_session(jp_root_dir, odd, created_at=1, cwd=None)
    data = api.get("dsh", "api", "sessions", payload(odd))
    assert data["sessionId"] == odd
    where = api.get("dsh", "api", "locate", payload(odd))
    assert where["kind"] == "jsonl"
    assert Path(where["path"]).is_file()
    assert Path(where["path"]).parent.parent == (jp_root_dir / ".dsh" / "sessions").resolve()


def test_locate_returns_the_log_path(api: Api, workspace: Path, jp_root_dir: Path) -> None:
    data = api.get("dsh", "api", "locate", payload("same-old"), params={"cwd": "nb"})
    store = JsonlStore(workspace / ".dsh" / "sessions")
    assert data == {
        "kind": "jsonl",
        "path": str(store.log_path("same-old")),
        "contentsPath": store.log_path("same-old").resolve().relative_to(jp_root_dir.resolve()).as_posix(),
    }


def test_unknown_session_is_a_404_json(api: Api, workspace: Path) -> None:
    for route in ("sessions", "locate"):
        code, body = api.error("dsh", "api", route, payload("nope"), params={"cwd": "nb"})
        assert code == 404
        assert body["error"]["code"] == "SESSION_REFERENCE_READ_FAILED"
        assert "'nope'" in body["error"]["message"] and "'nb'" in body["error"]["message"]
        assert "/" not in body["error"]["message"].replace("dsh/api/candidates", "")  # no path of the server


def test_unknown_session_in_the_root_says_so_without_its_path(api: Api, jp_root_dir: Path) -> None:
    code, body = api.error("dsh", "api", "sessions", payload("nope"))
    assert code == 404
    assert "the server root" in body["error"]["message"]
    assert str(jp_root_dir) not in json.dumps(body) and os.path.realpath(jp_root_dir) not in json.dumps(body)


def test_traversal_ids_never_leave_the_store(api: Api, jp_root_dir: Path, tmp_path: Path) -> None:
    store_root = jp_root_dir / ".dsh" / "sessions"
    store_root.mkdir(parents=True)
    for session_id in [*TRAVERSAL_IDS, ""]:
        # A real log placed where a naive join of the id would land must stay unreachable.
        bait = store_root / session_id / "session.jsonl"
        try:
            bait.parent.mkdir(parents=True, exist_ok=True)
            bait.write_text(json.dumps({"type": "session", "version": 0, "id": session_id, "createdAt": 1,
                                        "delegationDepth": 0}) + "\n")
        except OSError:
            pass
        for route in ("sessions", "locate"):
            code, body = api.error("dsh", "api", route, payload(session_id))
            assert code == 404, (route, session_id)
            assert body["error"]["code"] == "SESSION_REFERENCE_READ_FAILED"
    assert (jp_root_dir / "etc" / "pwn" / "session.jsonl").is_file()  # the bait was really there


def test_malformed_payloads_are_400s(api: Api, jp_root_dir: Path) -> None:
    for bad in ["IiJ", "%%%", "abc=", "eyJpZCI6IngifQ", "dsh-session:IiI", "IiI%20"]:
        code, body = api.error("dsh", "api", "sessions", quote(bad, safe=""))
        assert code == 400, bad
        assert body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"


# -- authentication, authorisation, read-only --------------------------------------------------------------
ROUTES = ["dsh/api/candidates", f"dsh/api/sessions/{payload('same-old')}?cwd=nb",
          f"dsh/api/locate/{payload('same-old')}?cwd=nb"]


def test_requests_without_a_valid_token_are_403(api: Api, workspace: Path) -> None:
    for path in ROUTES:
        assert api.raw_status(path) == 403, path
        assert api.raw_status(path, headers={"Authorization": "token wrong"}) == 403, path


def test_endpoints_are_read_only(api: Api, workspace: Path) -> None:
    for route in [("candidates",), ("sessions", payload("same-old")), ("locate", payload("same-old"))]:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            body = None if method == "DELETE" else "{}"
            code, reply = api.error("dsh", "api", *route, method=method, body=body, allow_nonstandard_methods=True)
            assert code == 405, (route, method)
            assert reply["error"]["code"] == "HTTP_405"


def test_state_changing_methods_without_token_or_xsrf_are_refused(api: Api, workspace: Path) -> None:
    for path in ROUTES:
        for method in ("POST", "PUT", "DELETE"):
            body = None if method == "DELETE" else "{}"
            assert api.raw_status(path, method=method, body=body, allow_nonstandard_methods=True) == 403


def test_authorizer_sees_the_dsh_resource_and_can_deny(api: Api, jp_serverapp: Any, workspace: Path) -> None:
    seen: list[tuple[str, str]] = []
    authorizer = jp_serverapp.web_app.settings["authorizer"]
    original = authorizer.is_authorized

    def deny_dsh(handler: Any, user: Any, action: str, resource: str) -> bool:
        seen.append((action, resource))
        return resource != "dsh" and original(handler, user, action, resource)

    authorizer.is_authorized = deny_dsh
    try:
        code, body = api.error("dsh", "api", "candidates", params={"cwd": "nb"})
    finally:
        authorizer.is_authorized = original
    assert code == 403
    assert ("read", "dsh") in seen
    assert body["error"]["code"] == "HTTP_403"


def test_base_url_prefix_is_honoured(api: Api, jp_base_url: str, workspace: Path) -> None:
    assert jp_base_url != "/"  # pytest-jupyter serves under a non-root base URL
    data = api.get("dsh", "api", "candidates", params={"cwd": "nb", "limit": "1"})
    assert len(data) == 1


# -- the catalog: every known folder, body search -----------------------------------------------------------
def test_candidates_include_other_known_folders_after_the_same_folder(api: Api, workspace: Path,
                                                                       jp_root_dir: Path) -> None:
    api.get("dsh", "api", "candidates", params={"cwd": "other"})  # the server now knows other/'s store
    data = api.get("dsh", "api", "candidates", params={"cwd": "nb"})
    ids = [c["sessionId"] for c in data]
    assert ids[:2] == ["same-new", "same-old"] and "other-folder" in ids


def test_body_search_matches_message_text_only_when_asked(api: Api, workspace: Path) -> None:
    titles_only = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "question 1 of same-old"})
    assert titles_only == []
    bodies = api.get("dsh", "api", "candidates",
                     params={"cwd": "nb", "query": "question 1 of same-old", "body": "1"})
    assert [c["sessionId"] for c in bodies] == ["same-old"]
    status, error = api.error("dsh", "api", "candidates", params={"cwd": "nb", "body": "maybe"})
    assert status == 400 and error["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"


# -- the boundary: nothing outside the root --------------------------------------------------------------
def outsider(tmp_path: Path) -> Path:
    """A store outside the server root that the user's catalog knows (a kernel used it once)."""
    from dsh_jupyter.catalog import open_catalog

    store = tmp_path / "faraway" / ".dsh" / "sessions"
    make_session(tmp_path / "faraway", "outsider", created_at=99, cwd=str(tmp_path / "faraway"),
                 title="Secret plans")
    open_catalog().ensure_store(store, budget=None)
    return store


def test_stores_outside_the_root_are_invisible_even_when_the_catalog_knows_them(
    api: Api, workspace: Path, tmp_path: Path
) -> None:
    from dsh_jupyter.catalog import open_catalog

    outsider(tmp_path)
    everywhere = open_catalog().candidates("x", None, "question 1 of outsider", 10, body=True)
    assert [e.session_id for e in everywhere] == ["outsider"]  # the catalog itself would answer
    for params in ({"cwd": "nb"}, {}, {"cwd": "nb", "query": "Secret"}, {"cwd": "nb", "query": "outsider"},
                   {"cwd": "nb", "query": "question 1 of outsider", "body": "1"}, {"query": "plans", "body": "1"}):
        data = api.get("dsh", "api", "candidates", params=params)
        assert "outsider" not in [c["sessionId"] for c in data], params
        assert "faraway" not in json.dumps(data)
    same = api.get("dsh", "api", "candidates", params={"cwd": "nb", "query": "question 1 of same-old", "body": "1"})
    assert [c["sessionId"] for c in same] == ["same-old"]  # body search still works inside
    for route in ("sessions", "locate"):
        for cwd in ("nb", ""):
            code, body = api.error("dsh", "api", route, payload("outsider"), params={"cwd": cwd})
            assert code == 404 and str(tmp_path) not in json.dumps(body)


def test_a_session_folder_linked_out_of_the_root_is_refused(api: Api, jp_root_dir: Path, tmp_path: Path) -> None:
    make_session(jp_root_dir, "good", created_at=1, cwd=None)
    outside = make_session(tmp_path / "outside", "linked", created_at=5, cwd=None, title="Linked secret")
    store = jp_root_dir / ".dsh" / "sessions"
    (store / outside.parent.name).symlink_to(outside.parent, target_is_directory=True)
    data = api.get("dsh", "api", "candidates", params={"query": "", "body": "0"})
    assert [c["sessionId"] for c in data] == ["good"]
    assert api.get("dsh", "api", "candidates", params={"query": "question", "body": "1"}) == [
        api.get("dsh", "api", "candidates", params={"query": "good"})[0]]
    for route in ("sessions", "locate"):
        code, body = api.error("dsh", "api", route, payload("linked"))
        assert code == 403, route
        assert body["error"]["code"] == "DSH_OUTSIDE_ROOT"
        assert "'linked'" in body["error"]["message"] and "link" in body["error"]["message"]
        assert str(tmp_path) not in json.dumps(body)


def test_a_session_log_linked_out_of_the_root_is_refused(api: Api, jp_root_dir: Path, tmp_path: Path) -> None:
    make_session(jp_root_dir, "good", created_at=1, cwd=None)
    outside = make_session(tmp_path / "outside", "log-link", created_at=5, cwd=None, title="Linked log")
    folder = jp_root_dir / ".dsh" / "sessions" / outside.parent.name
    folder.mkdir()
    (folder / outside.name).symlink_to(outside)
    assert [c["sessionId"] for c in api.get("dsh", "api", "candidates")] == ["good"]
    assert api.get("dsh", "api", "candidates", params={"query": "question 1 of log-link", "body": "1"}) == []
    for route in ("sessions", "locate"):
        code, body = api.error("dsh", "api", route, payload("log-link"))
        assert code in (403, 404), route  # refused here, or not even seen by a store that never follows links
        assert str(tmp_path) not in json.dumps(body)


# -- error bodies ------------------------------------------------------------------------------------------
def test_a_damaged_log_answers_with_what_can_be_read_and_where_it_is_damaged(api: Api, jp_root_dir: Path) -> None:
    path = make_session(jp_root_dir, "broken", created_at=1, cwd=None, turns=2)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:5]) + b"{not json\n" + b"".join(lines[5:]))  # after turn 1, before turn 2
    body = api.get("dsh", "api", "sessions", payload("broken"))
    assert [m["text"] for m in body["preview"]["messages"]] == ["question 1 of broken", "answer 1"]
    (damage,) = body["damage"]
    assert damage["line"] == 6 and damage["kind"] == "line"
    assert "line 6 cannot be parsed as JSON" in damage["message"] and "not shown" in damage["message"]
    assert str(jp_root_dir) not in json.dumps(body)


def test_unexpected_failures_are_generic_500s(api: Api, workspace: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    from dsh_jupyter.server import sessions

    def explode(*args: object, **kwargs: object) -> object:
        raise RuntimeError("/very/secret/path exploded")

    monkeypatch.setattr(sessions, "list_candidates", explode)
    code, body = api.error("dsh", "api", "candidates", params={"cwd": "nb"})
    assert code == 500 and body["error"]["code"] == "DSH_INTERNAL_ERROR"
    assert "secret" not in json.dumps(body)
    assert "/very/secret/path exploded" in caplog.text


def test_client_errors_raised_by_tornado_keep_their_reason(api: Api, workspace: Path) -> None:
    code, body = api.error("dsh", "api", "candidates", method="POST", body="{}")
    assert code == 405 and body["error"]["code"] == "HTTP_405"
    assert "internal" not in body["error"]["message"]
