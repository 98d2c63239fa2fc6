"""A scripted OpenAI-compatible chat-completions server for tests (stdlib only, bound to 127.0.0.1).

Use the ``fake_openai`` fixture: ``from fake_openai import fake_openai`` in a test module (``tests/`` has no
``__init__.py``, so pytest's default ``prepend`` import mode puts it on ``sys.path``, also under
``python -m pytest tests/...``); or ``pytest_plugins = ["fake_openai"]`` in ``tests/conftest.py``.
Outside pytest, ``FakeOpenAIServer(port=...)`` runs on its own (``close()`` stops it)::

    def test_x(fake_openai):
        fake_openai.queue(text_reply("Hello", " world"), http_error(429, retry_after="0"))
        provider = OpenAICompatibleProvider(fake_openai.base_url, "fake-model", api_key="sk-test")
        ...
        assert fake_openai.requests[0].body["model"] == "fake-model"

Each ``POST /v1/chat/completions`` takes the next behaviour from the queue (or, when it is empty, echoes
the last user message as ``"echo: <text>"``). Behaviours:

- :class:`Reply` (built by :func:`text_reply`, :func:`tool_call_reply`, ...): a list of *steps*, each a
  ``delta`` dict sent as one chunk (``{"content": ...}``, ``{"reasoning_content": ...}``,
  ``{"tool_calls": [...]}``), or one of the markers :data:`DROP` (close the connection mid-stream, an
  unterminated chunked body), :data:`INVALID` (send ``data: {not json``), :data:`STALL` (stop sending and
  hold the connection until the client goes away or :meth:`FakeOpenAIServer.close`), or a :class:`RawEvent`
  sent verbatim (such as an ``{"error": ...}`` payload mid-stream). After the steps the
  server sends the finish chunk, the usage chunk and ``data: [DONE]``. Non-stream requests get the same
  content as one ``chat.completion`` object.
- :class:`HTTPError` (:func:`http_error`): a status code with an OpenAI-style error body and headers
  (``Retry-After``...).

Every request is recorded in :attr:`FakeOpenAIServer.requests` (method, path, lower-cased headers,
decoded JSON body) for assertions; :attr:`FakeOpenAIServer.disconnects` counts stalled streams whose client
closed the connection.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DROP = "<drop>"
INVALID = "<invalid>"
STALL = "<stall>"
_MARKERS = (DROP, INVALID, STALL)


@dataclass(frozen=True)
class RawEvent:
    """A stream step sent verbatim as ``data: <json>`` (e.g. ``{"error": {...}}`` mid-stream)."""

    payload: Any


@dataclass
class Reply:
    """A scripted answer: stream steps, then finish reason and usage (``None`` leaves a part out)."""

    steps: list[Any]
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = field(default_factory=lambda: {"prompt_tokens": 12, "completion_tokens": 5,
                                                                  "total_tokens": 17})
    model: str | None = None


@dataclass
class HTTPError:
    """An HTTP error response with an OpenAI-style ``{"error": {...}}`` body."""

    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None


Behaviour = Reply | HTTPError


def text_reply(*pieces: str, reasoning: Sequence[str] = (), finish: str = "stop",
               usage: dict[str, Any] | bool | None = True) -> Reply:
    """Reasoning pieces (as ``reasoning_content``), then text pieces, one chunk each."""
    steps: list[Any] = [{"reasoning_content": r} for r in reasoning] + [{"content": p} for p in pieces]
    reply = Reply(steps, finish)
    if usage is None or usage is False:
        reply.usage = None
    elif isinstance(usage, dict):
        reply.usage = usage
    return reply


def tool_call_reply(*calls: tuple[str, str, Sequence[str]], text: Sequence[str] = (),
                    finish: str = "tool_calls") -> Reply:
    """Optional text, then each ``(id, name, argument_pieces)`` call streamed as OpenAI does: the first
    delta has id, type and name with the first piece, the next ones only argument pieces."""
    steps: list[Any] = [{"content": t} for t in text]
    for index, (call_id, name, given) in enumerate(calls):
        pieces = list(given) or [""]
        steps.append({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                      "function": {"name": name, "arguments": pieces[0]}}]})
        for piece in pieces[1:]:
            steps.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    return Reply(steps, finish)


def broken_reply(*pieces: str, marker: str = DROP) -> Reply:
    """Text pieces, then ``marker`` (:data:`DROP`, :data:`INVALID` or :data:`STALL`)."""
    if marker not in _MARKERS:
        raise ValueError(f"marker must be one of {_MARKERS}")
    return Reply([{"content": p} for p in pieces] + [marker])


def http_error(status: int, message: str = "scripted error", *, retry_after: str | None = None,
               headers: dict[str, str] | None = None) -> HTTPError:
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["Retry-After"] = retry_after
    return HTTPError(status, message, all_headers)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeOpenAIServer:
    """The server object the fixture yields. ``base_url`` ends in ``/v1``."""

    #: The request handler (a subclass may speak more wire formats: ``tests/fake_wire.py``).
    handler_class: type[_Handler]

    def __init__(self, port: int = 0) -> None:
        self._behaviours: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        self.disconnected = threading.Event()
        self.closing = threading.Event()
        self.models = ["fake-model"]
        server = self

        class Handler(getattr(self, "handler_class", _Handler)):  # type: ignore[misc]
            fake = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)
        self._thread.start()

    def queue(self, *behaviours: Behaviour) -> None:
        """Script the next chat-completions answers, in order."""
        with self._lock:
            self._behaviours.extend(behaviours)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._behaviours)

    def next_behaviour(self, body: Any) -> Behaviour:
        with self._lock:
            if self._behaviours:
                return self._behaviours.popleft()
        return text_reply("echo: ", _last_user_text(body))

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _last_user_text(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in reversed(messages or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake.record(RecordedRequest(self.command, self.path, headers, body))

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_GET(self) -> None:
        self._record(None)
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        behaviour = self.fake.next_behaviour(body)
        if isinstance(behaviour, HTTPError):
            payload = behaviour.body if behaviour.body is not None else {
                "error": {"message": behaviour.message, "type": "scripted", "code": behaviour.status}}
            self._send_json(behaviour.status, payload, behaviour.headers)
            return
        model = behaviour.model or (body.get("model") if isinstance(body, dict) else None) or "fake-model"
        if isinstance(body, dict) and body.get("stream"):
            self._stream(behaviour, model)
        else:
            self._send_json(200, _completion(behaviour, model))

    # -- streaming ------------------------------------------------------------------------------------

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, payload: Any) -> None:
        self._chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _stream(self, reply: Reply, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")  # no pooled connections left behind by a test's event loop
        self.end_headers()
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model}
        try:
            self._event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                              "finish_reason": None}]})
            for step in reply.steps:
                if step == DROP:
                    self._drop()
                    return
                if step == INVALID:
                    self._chunk(b"data: {not json\n\n")
                    continue
                if step == STALL:
                    self._stall()
                    return
                if isinstance(step, RawEvent):
                    self._event(step.payload)
                    continue
                self._event({**base, "choices": [{"index": 0, "delta": step, "finish_reason": None}]})
            if reply.finish_reason is not None:
                self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
            if reply.usage is not None:
                self._event({**base, "choices": [], "usage": reply.usage})
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _drop(self) -> None:
        """Close the socket without the terminating zero-length chunk."""
        self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _stall(self) -> None:
        """Send nothing more; return when the client closes the connection (or the server closes)."""
        sock = self.connection
        while not self.fake.closing.is_set():
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                try:
                    data = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    with self.fake._lock:
                        self.fake.disconnects += 1
                    self.fake.disconnected.set()
                    break
        self.close_connection = True


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for step in reply.steps:
        if not isinstance(step, dict):
            continue
        text.append(step.get("content") or "")
        reasoning.append(step.get("reasoning_content") or "")
        for call in step.get("tool_calls") or []:
            entry = calls.setdefault(call["index"], {"id": None, "type": "function",
                                                     "function": {"name": None, "arguments": ""}})
            entry["id"] = entry["id"] or call.get("id")
            function = call.get("function") or {}
            entry["function"]["name"] = entry["function"]["name"] or function.get("name")
            entry["function"]["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    result: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                              "model": model, "choices": [{"index": 0, "message": message,
                                                           "finish_reason": reply.finish_reason or "stop"}]}
    if reply.usage is not None:
        result["usage"] = reply.usage
    return result


async def check_cancel_mid_stream(server: FakeOpenAIServer, provider: Any, request: Any,
                                  timeout: float = 20) -> None:
    """Stream a reply that stalls after two pieces, set the cancel event once both arrived: the stream ends
    with ``ModelError(kind="cancelled")`` promptly and the HTTP connection is closed (the provider's rule for
    every wire format)."""
    import asyncio

    from dsh_jupyter.models import ModelError, TextDelta

    server.queue(broken_reply("Hel", "lo", marker=STALL))
    cancel = asyncio.Event()
    received: list[Any] = []

    async def consume() -> None:
        async for event in provider.stream(request, cancel):
            received.append(event)
            if len(received) == 2:
                cancel.set()

    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(consume(), timeout=timeout)
    assert info.value.kind == "cancelled"
    assert received == [TextDelta("Hel"), TextDelta("lo")]
    assert await asyncio.to_thread(server.disconnected.wait, 10), "the HTTP stream was left open"


def serve(server: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """Yield ``server`` and close it afterwards (the body of a fixture)."""
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A fresh scripted server on 127.0.0.1 for one test."""
    yield from serve(FakeOpenAIServer())
