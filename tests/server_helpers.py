"""Helpers of the REST tests on a real jupyter-server (pytest-jupyter): sessions on disk and a sync client.

The tests are plain functions that drive requests on pytest-jupyter's own event loop: with pytest-asyncio
in auto mode, ``async def`` tests would run on a second loop while the server waits on the first, and every
request would time out.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPResponse

from dsh_jupyter.references import encode_session_reference_uri
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store import JsonlStore

T = TypeVar("T")

#: The server configuration every REST test starts from (the extension enabled).
SERVER_CONFIG: dict[str, Any] = {"ServerApp": {"jpserver_extensions": {"dsh_jupyter": True}}}


def payload(session_id: str) -> str:
    return encode_session_reference_uri(session_id).split(":", 1)[1]


def make_session(folder: Path, session_id: str, *, created_at: int, cwd: str | None, title: str | None = None,
                 turns: int = 1, store: Path | None = None) -> Path:
    """Write one session with ``turns`` prompt/answer pairs into ``folder``'s default store (or ``store``);
    returns its log."""
    jsonl = JsonlStore(store if store is not None else folder / ".dsh" / "sessions")
    log = SessionLog(SessionHeader(session_id, created_at, cwd))
    writer = jsonl.create(log.header)
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
    return jsonl.log_path(session_id)


@dataclass
class Reply:
    """One response of :meth:`Api.many`: its status and JSON body (``None`` when it is not JSON)."""

    code: int
    body: Any
    seconds: float


class Api:
    """Synchronous calls into the test server: ``get`` for a 200 JSON reply, ``error`` for a failure."""

    def __init__(self, jp_fetch: Any, loop: asyncio.AbstractEventLoop, client: Any, base_url: str,
                 port: int, auth: dict[str, str]) -> None:
        self._fetch = jp_fetch
        self.loop = loop
        self._client = client
        self._base_url = base_url
        self._port = port
        self._auth = auth

    def run(self, awaitable: Awaitable[T]) -> T:
        return self.loop.run_until_complete(awaitable)

    def get(self, *parts: str, params: dict[str, Any] | None = None) -> Any:
        response = self.run(self._fetch(*parts, params=params or {}))
        assert response.code == 200
        assert response.headers["Content-Type"].startswith("application/json")
        return json.loads(response.body)

    def error(self, *parts: str, method: str = "GET", params: dict[str, Any] | None = None,
              **kwargs: Any) -> tuple[int, dict[str, Any]]:
        with pytest.raises(HTTPClientError) as info:
            self.run(self._fetch(*parts, method=method, params=params or {}, **kwargs))
        response = info.value.response
        assert response is not None
        return info.value.code, json.loads(response.body)

    def raw_status(self, path: str, **kwargs: Any) -> int:
        """Status of a request sent without pytest-jupyter's token header."""
        with pytest.raises(HTTPClientError) as info:
            self.run(self._client.fetch(self._base_url + path, **kwargs))
        return info.value.code

    def raw(self, path_and_query: str) -> Reply:
        """``GET`` of ``path_and_query`` exactly as written (no encoding added), with the token header: for
        requests a well-behaved client would never send (broken percent escapes, repeated parameters)."""

        async def go() -> Reply:
            started = time.monotonic()
            response: HTTPResponse = await self._client.fetch(self._base_url + path_and_query, headers=self._auth,
                                                              raise_error=False, request_timeout=60)
            try:
                body = json.loads(response.body) if response.body else None
            except ValueError:
                body = None
            return Reply(response.code, body, time.monotonic() - started)

        return self.run(go())

    def url(self, path: str, params: dict[str, str] | None = None) -> str:
        query = "?" + urlencode(params) if params else ""
        return f"http://127.0.0.1:{self._port}{self._base_url}{path}{query}"

    def many(self, requests: Iterable[tuple[str, dict[str, str] | None]], *, poll: str | None = None,
             timeout: float = 60.0) -> tuple[list[Reply], list[Reply]]:
        """Send every ``(path, params)`` at once on a client of its own (no client-side queue) and, while they
        are answered, fetch ``poll`` every 0.1 s (at least three times); returns both lists of replies."""

        async def go() -> tuple[list[Reply], list[Reply]]:
            client = AsyncHTTPClient(force_instance=True, max_clients=256)

            async def fetch(url: str) -> Reply:
                started = time.monotonic()
                response: HTTPResponse = await client.fetch(url, headers=self._auth, raise_error=False,
                                                            request_timeout=timeout, connect_timeout=timeout)
                try:
                    body = json.loads(response.body) if response.body else None
                except ValueError:
                    body = None
                return Reply(response.code, body, time.monotonic() - started)

            try:
                waits = [asyncio.ensure_future(fetch(self.url(path, params))) for path, params in requests]
                polls: list[Reply] = []
                while poll is not None and (not all(w.done() for w in waits) or len(polls) < 3):
                    polls.append(await fetch(self.url(poll)))
                    await asyncio.sleep(0.1)
                return list(await asyncio.gather(*waits)), polls
            finally:
                client.close()

        return self.run(go())


def server_config(**dsh_server: Any) -> Any:
    """A ``jp_server_config`` fixture for a test module: the extension enabled, with these ``DshServer``
    settings. A module binds it at its top level: ``jp_server_config = server_config(index_at_start=False)``."""
    config = {**SERVER_CONFIG, "DshServer": dsh_server} if dsh_server else SERVER_CONFIG

    @pytest.fixture
    def jp_server_config() -> dict[str, Any]:
        return config

    return jp_server_config


def server_api() -> Any:
    """The ``api`` fixture for a test module (``api = server_api()`` at its top level): synchronous calls into
    pytest-jupyter's server, configured by the module's ``jp_server_config``. Fixtures that must be ready before
    the server starts (a store copied in) go first, with ``pytest.mark.usefixtures``."""

    @pytest.fixture
    def api(jp_fetch: Any, jp_asyncio_loop: asyncio.AbstractEventLoop, http_server_client: Any, jp_base_url: str,
            jp_http_port: int, jp_auth_header: dict[str, str]) -> Api:
        return Api(jp_fetch, jp_asyncio_loop, http_server_client, jp_base_url, jp_http_port, jp_auth_header)

    return api
