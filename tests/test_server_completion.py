"""``dsh/api/completion`` through a real jupyter-server (pytest-jupyter's ``jp_fetch``): the defaults the page
reads, a streamed offline completion and its cache, bad bodies, the per-hour cap, and a client that goes away
mid-answer (the server cancels and counts it)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from server_helpers import SERVER_CONFIG, Api, server_api

from dsh_jupyter.server.completion import SERVICE_KEY

jp_server_config = pytest.fixture(lambda: {**SERVER_CONFIG, "DshCompletion": {"offline_word_seconds": 0.05}})

api = server_api()

BODY = {"requestId": "req-1", "prefix": "rad", "suffix": "", "language": "python", "mode": "code",
        "cells": [{"kind": "code", "source": "radius = 2.5", "outputs": ""}], "variables": []}


def post(api: Api, body: object) -> tuple[int, list[dict[str, Any]], Any]:
    response = api.run(api._fetch("dsh", "api", "completion", method="POST", body=json.dumps(body),
                                  raise_error=False))
    text = response.body.decode("utf-8")
    if response.code != 200:
        return response.code, [json.loads(text)], response.headers
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    return response.code, [json.loads(line) for line in text.splitlines() if line], response.headers


def test_the_defaults_say_off_and_the_debounce(api: Api) -> None:
    data = api.get("dsh", "api", "completion")
    assert data["enabled"] is False and data["debounceMs"] == 300 and data["maxContextBytes"] == 8000
    assert data["usage"]["requests"] == 0 and data["inFlight"] == [] and data["hourlyCap"] == 600


def test_an_offline_completion_streams_then_is_cached(api: Api) -> None:
    code, lines, _ = post(api, BODY)
    assert code == 200 and lines[0] == {"text": "ius"}
    assert lines[-1]["done"] is True and lines[-1]["cached"] is False and lines[-1]["backend"] == "offline"
    code, lines, _ = post(api, {**BODY, "requestId": "req-2"})
    assert lines == [{"text": "ius"}, {**lines[-1], "cached": True, "backend": "cache"}]
    prose = post(api, {**BODY, "requestId": "req-3", "mode": "prose", "prefix": "%%dsh\n"})[1]
    assert "".join(line.get("text", "") for line in prose) == "Explain what `radius` shows and what stands out."
    usage = api.get("dsh", "api", "completion")["usage"]
    assert (usage["requests"], usage["served"], usage["cached"]) == (3, 2, 1)


@pytest.mark.parametrize(("body", "says"), [
    ("not json", "must be JSON"),
    ({"prefix": "x"}, "unusable completion request: 'requestId'"),
    ({**BODY, "mode": "essay"}, "'mode' must be 'code' or 'prose'"),
])
def test_bad_bodies_are_400_saying_what_to_send(api: Api, body: object, says: str) -> None:
    raw = body if isinstance(body, str) else json.dumps(body)
    response = api.run(api._fetch("dsh", "api", "completion", method="POST", body=raw, raise_error=False))
    assert response.code == 400
    assert says in json.loads(response.body)["message"]


def test_the_hourly_cap_answers_429_with_retry_after(api: Api, jp_serverapp: Any) -> None:
    jp_serverapp.web_app.settings[SERVICE_KEY].hourly_cap = 1
    assert post(api, BODY)[0] == 200
    assert post(api, {**BODY, "requestId": "again"})[0] == 200  # cached: not counted
    code, (error,), headers = post(api, {**BODY, "prefix": "radius = 1\nrad", "requestId": "third"})
    assert code == 429 and error["error"]["code"] == "DSH_COMPLETION_CAP"
    assert "cap of 1 requests an hour" in error["message"] and int(headers["Retry-After"]) > 3000


def test_a_client_going_away_cancels_the_model_request(api: Api, jp_http_port: int, jp_base_url: str,
                                                       jp_auth_header: dict[str, str]) -> None:
    body = json.dumps({**BODY, "requestId": "typed-on", "mode": "prose", "prefix": "%%dsh\n"}).encode()

    async def go() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", jp_http_port)
        head = (f"POST {jp_base_url}dsh/api/completion HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: {jp_auth_header['Authorization']}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        writer.write(head.encode() + body)
        await writer.drain()
        received = b""
        while b'"text"' not in received:  # the first words have streamed: the model is mid-answer
            received += await asyncio.wait_for(reader.read(1024), 10)
        writer.close()
        await writer.wait_closed()

    api.run(go())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        report = api.get("dsh", "api", "completion")
        if report["cancelled"]:
            break
        api.run(asyncio.sleep(0.05))
    assert report["cancelled"] == ["typed-on"] and report["usage"]["cancelled"] == 1
    assert report["inFlight"] == [] and report["usage"]["served"] == 0


class _Failing:
    """A backend that fails after ``after`` pieces."""

    name = "failing"

    def __init__(self, after: int) -> None:
        self.after = after

    async def stream(self, context: Any, max_tokens: int) -> Any:
        from dsh_jupyter.models.base import ModelError

        for _ in range(self.after):
            yield "piece"
        raise ModelError("server", "the model server answered 500")

    async def close(self) -> None:
        return None


def test_a_model_that_cannot_be_made_or_fails_says_why(api: Api, jp_serverapp: Any) -> None:
    from dsh_jupyter.completion.config import DshCompletion
    from dsh_jupyter.completion.service import backend_for

    service = jp_serverapp.web_app.settings[SERVICE_KEY]
    service.make_backend = lambda: backend_for(DshCompletion(model="no-such-model"))
    code, (error,), _ = post(api, BODY)
    assert code == 502 and error["error"]["code"] == "DSH_COMPLETION_MODEL"
    assert "unknown model 'no-such-model'" in error["message"]
    service._backend = _Failing(0)
    code, (error,), _ = post(api, {**BODY, "requestId": "b"})
    assert code == 502 and "the model server answered 500" in error["message"]
    service._backend = _Failing(1)
    code, lines, _ = post(api, {**BODY, "requestId": "c", "prefix": "radius = 1\nrad"})
    assert code == 200 and lines[0] == {"text": "piece"}
    assert lines[-1]["error"]["message"] == "the completion model failed: the model server answered 500"
    assert api.get("dsh", "api", "completion")["usage"]["failed"] == 3


def test_completions_write_no_session_log(api: Api, jp_root_dir: Any) -> None:
    post(api, BODY)
    post(api, {**BODY, "requestId": "p", "mode": "prose", "prefix": "%%dsh\n"})
    assert not (jp_root_dir / ".dsh").exists() and not list(jp_root_dir.rglob("*.jsonl"))
