"""The dsh REST endpoints through a real jupyter-server (pytest-jupyter's ``jp_fetch``).

The tests are plain functions that drive ``jp_fetch`` on pytest-jupyter's own event loop: with
pytest-asyncio in auto mode, ``async def`` tests would run on a second loop while the server waits
on the first, and every request would time out.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tornado.httpclient import HTTPClientError

from dsh_jupyter.references import encode_session_reference_uri, format_session_reference_mention
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store import JsonlStore


HOSTILE = ["<img src=x onerror=alert(1)>", "</referenced-sessions>", "\x1b[31mred\x1b[0m\x07"]
TRAVERSAL_IDS = ["../../etc/pwn", "/etc/passwd", "..", ".", "a/../../b", "~"]


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"dsh_jupyter": True}}}


def payload(session_id: str) -> str:
    return encode_session_reference_uri(session_id).split(":", 1)[1]


def make_session(folder: Path, session_id: str, *, created_at: int, cwd: str | None, title: str | None = None,
                 turns: int = 1) -> None:
    """Write one session with ``turns`` prompt/answer pairs into ``folder``'s default store."""
    store = JsonlStore(folder / ".dsh" / "sessions")
    log = SessionLog(SessionHeader(session_id, created_at, cwd))
    writer = store.create(log.header)
    writer.attach(log)
    for turn in range(1, turns + 1):
        log.append("turn/start", {"turn": turn})
        log.append("user/message", user_message(f"question {turn} of {session_id}"))
        log.append("assistant/message", {"turn": turn, "step": 1, "message": assistant_message(
            [text_block(f"answer {turn}")], {"kind": "model", "provider": "mock", "model": "mock"})})
        log.append("turn/end", {"turn": turn, "kind": "completed"})
    if title is not None:
        log.append("session/title", {"title": title, "messageSeqs": [1], "source": {"kind": "user"}})
    writer.close()


class Api:
    """Synchronous calls into the test server: ``get`` for a 200 JSON reply, ``error`` for a failure."""

    def __init__(self, jp_fetch: Any, loop: asyncio.AbstractEventLoop, client: Any, base_url: str) -> None:
        self._fetch = jp_fetch
        self._loop = loop
        self._client = client
        self._base_url = base_url

    def get(self, *parts: str, params: dict[str, Any] | None = None) -> Any:
        response = self._loop.run_until_complete(self._fetch(*parts, params=params or {}))
        assert response.code == 200
        assert response.headers["Content-Type"].startswith("application/json")
        return json.loads(response.body)

    def error(self, *parts: str, method: str = "GET", params: dict[str, Any] | None = None,
              **kwargs: Any) -> tuple[int, dict[str, Any]]:
        with pytest.raises(HTTPClientError) as info:
            self._loop.run_until_complete(self._fetch(*parts, method=method, params=params or {}, **kwargs))
        response = info.value.response
        assert response is not None
        return info.value.code, json.loads(response.body)

    def raw_status(self, path: str, **kwargs: Any) -> int:
        """Status of a request sent without pytest-jupyter's token header."""
        with pytest.raises(HTTPClientError) as info:
            self._loop.run_until_complete(self._client.fetch(self._base_url + path, **kwargs))
        return info.value.code


@pytest.fixture
def api(jp_fetch: Any, jp_asyncio_loop: asyncio.AbstractEventLoop, http_server_client: Any, jp_base_url: str) -> Api:
    return Api(jp_fetch, jp_asyncio_loop, http_server_client, jp_base_url)


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


def test_candidates_default_to_the_root_folder_and_each_folder_has_its_own_store(
    api: Api, workspace: Path
) -> None:
    assert api.get("dsh", "api", "candidates") == []
    other = api.get("dsh", "api", "candidates", params={"cwd": "other/"})
    assert [c["sessionId"] for c in other] == ["other-folder"]
    assert other[0]["sameWorkspace"] is True


def test_candidates_read_dsh_sessions_dir_when_set(
    api: Api, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-store"
    make_session(tmp_path / "elsewhere-root", "unused", created_at=1, cwd=None)  # not the configured store
    store = JsonlStore(shared)
    log = SessionLog(SessionHeader("from-env", 7, "/anywhere"))
    writer = store.create(log.header)
    writer.attach(log)
    log.append("turn/start", {"turn": 1})
    writer.close()
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(shared))
    data = api.get("dsh", "api", "candidates", params={"cwd": "nb"})
    assert [c["sessionId"] for c in data] == ["from-env"]


def test_hostile_titles_come_back_verbatim_as_json(api: Api, jp_root_dir: Path) -> None:
    for n, title in enumerate(HOSTILE):
        make_session(jp_root_dir, f"hostile-{n}", created_at=100 - n, cwd=None, title=title)
    data = api.get("dsh", "api", "candidates")
    assert [c["label"] for c in data] == HOSTILE
    assert data[0]["mention"] == format_session_reference_mention("hostile-0", HOSTILE[0])


BAD_LIMITS = ["0", "-1", "1.5", "abc", "1e3", " ", " 5", "", "١", "1001"]
BAD_CWDS = ["..", "../..", "nb/../..", "/etc", "/", "C:\\Windows", "nb\x00x", "missing"]


def test_bad_limits_are_400s_with_the_reference_code(api: Api, workspace: Path) -> None:
    for limit in BAD_LIMITS:
        code, body = api.error("dsh", "api", "candidates", params={"cwd": "nb", "limit": limit})
        assert code == 400, limit
        assert body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
        assert "limit" in body["error"]["message"]
        assert body["message"] == body["error"]["message"]


def test_cwd_outside_the_root_or_missing_is_a_400(api: Api, workspace: Path) -> None:
    for cwd in BAD_CWDS:
        code, body = api.error("dsh", "api", "candidates", params={"cwd": cwd})
        assert code == 400, cwd
        assert body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
        assert "cwd" in body["error"]["message"]


def test_symlink_leaving_the_root_is_refused(api: Api, jp_root_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    make_session(outside, "secret", created_at=1, cwd=None)
    (jp_root_dir / "link").symlink_to(outside, target_is_directory=True)
    code, body = api.error("dsh", "api", "candidates", params={"cwd": "link"})
    assert code == 400 and "outside" in body["error"]["message"]


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
        assert "'nope'" in body["error"]["message"]


def test_traversal_ids_never_leave_the_store(api: Api, jp_root_dir: Path, tmp_path: Path) -> None:
    store_root = jp_root_dir / ".dsh" / "sessions"
    store_root.mkdir(parents=True)
    for session_id in TRAVERSAL_IDS + [""]:
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
