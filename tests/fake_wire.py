"""A scripted model server for tests that speaks three wire formats (stdlib only, bound to 127.0.0.1).

:class:`FakeWireServer` is :class:`fake_openai.FakeOpenAIServer` (same queue of :class:`fake_openai.Reply` /
:class:`fake_openai.HTTPError` behaviours, same request records) that also answers

- **Anthropic** ``POST /v1/messages`` (``stream: true``): ``message_start`` (input tokens),
  ``content_block_start`` / ``content_block_delta`` (``text_delta``, ``thinking_delta``, ``input_json_delta``
  of a ``tool_use`` block) / ``content_block_stop``, ``message_delta`` (stop reason, output tokens),
  ``message_stop``; errors as ``{"type": "error", "error": {"type", "message"}}``.
- **Gemini** ``POST /models/<model>:streamGenerateContent?alt=sse``: ``data:`` chunks of ``candidates`` with
  ``text`` parts (``thought: true`` for reasoning) and ``functionCall`` parts (arguments whole, as Gemini
  sends them), the last with ``finishReason`` and ``usageMetadata``; errors as ``{"error": {"code",
  "message", "status"}}``.

A reply's steps are read the same way for every format: ``{"content": ...}`` is text,
``{"reasoning_content": ...}`` reasoning, ``{"tool_calls": [...]}`` OpenAI-style tool-call pieces; its usage
(``prompt_tokens``/``completion_tokens``) becomes each format's own usage fields. ``root_url`` is what
LiteLLM takes as ``api_base`` for Anthropic and Gemini; ``base_url`` (ending in ``/v1``) is the OpenAI one.
"""

from __future__ import annotations

import json
from typing import Any

from fake_openai import FakeOpenAIServer, HTTPError, Reply, _Handler

_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_GEMINI_STOP = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"}
_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                     404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


class _WireHandler(_Handler):
    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/v1/messages"):
            self._answer(self._anthropic, self._anthropic_error)
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            self._answer(self._gemini, self._gemini_error)
        else:
            super().do_POST()

    def _answer(self, stream: Any, error: Any) -> None:
        body = self._read_body()
        self._record(body)
        behaviour = self.fake.next_behaviour(body)
        if isinstance(behaviour, HTTPError):
            self._send_json(behaviour.status, behaviour.body if behaviour.body is not None else error(behaviour),
                            behaviour.headers)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            stream(behaviour, body if isinstance(body, dict) else {})
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _sse(self, payload: Any, event: str | None = None) -> None:
        head = f"event: {event}\n".encode() if event else b""
        self._chunk(head + b"data: " + json.dumps(payload).encode() + b"\n\n")

    # -- Anthropic ------------------------------------------------------------------------------------

    @staticmethod
    def _anthropic_error(error: HTTPError) -> dict[str, Any]:
        return {"type": "error", "error": {"type": _ANTHROPIC_ERRORS.get(error.status, "api_error"),
                                           "message": error.message}}

    def _anthropic(self, reply: Reply, body: dict[str, Any]) -> None:
        usage = reply.usage or {}
        self._sse({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": 1}}}, "message_start")
        index = -1
        open_kind: str | None = None
        calls: dict[int, int] = {}  # OpenAI tool-call index -> Anthropic block index

        def start(kind: str, block: dict[str, Any]) -> None:
            nonlocal index, open_kind
            if open_kind is not None:
                self._sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
            open_kind = kind
            self._sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")

        for step in reply.steps:
            if not isinstance(step, dict):
                continue
            if step.get("reasoning_content"):
                if open_kind != "thinking":
                    start("thinking", {"type": "thinking", "thinking": ""})
                self._sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "thinking_delta", "thinking": step["reasoning_content"]}},
                          "content_block_delta")
            if step.get("content"):
                if open_kind != "text":
                    start("text", {"type": "text", "text": ""})
                self._sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": step["content"]}}, "content_block_delta")
            for call in step.get("tool_calls") or []:
                function = call.get("function") or {}
                if call["index"] not in calls:
                    start("tool_use", {"type": "tool_use", "id": call.get("id") or f"toolu_{call['index']}",
                                       "name": function.get("name"), "input": {}})
                    calls[call["index"]] = index
                if function.get("arguments"):
                    self._sse({"type": "content_block_delta", "index": calls[call["index"]],
                               "delta": {"type": "input_json_delta", "partial_json": function["arguments"]}},
                              "content_block_delta")
        if open_kind is not None:
            self._sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        self._sse({"type": "message_delta",
                   "delta": {"stop_reason": _ANTHROPIC_STOP.get(reply.finish_reason or "stop", "end_turn"),
                             "stop_sequence": None},
                   "usage": {"output_tokens": usage.get("completion_tokens", 0)}}, "message_delta")
        self._sse({"type": "message_stop"}, "message_stop")

    # -- Gemini ---------------------------------------------------------------------------------------

    @staticmethod
    def _gemini_error(error: HTTPError) -> dict[str, Any]:
        return {"error": {"code": error.status, "message": error.message,
                          "status": _GEMINI_STATUS.get(error.status, "UNKNOWN")}}

    def _gemini(self, reply: Reply, body: dict[str, Any]) -> None:
        calls: dict[int, dict[str, Any]] = {}
        for step in reply.steps:
            if not isinstance(step, dict):
                continue
            parts: list[dict[str, Any]] = []
            if step.get("reasoning_content"):
                parts.append({"text": step["reasoning_content"], "thought": True})
            if step.get("content"):
                parts.append({"text": step["content"]})
            if parts:
                self._sse({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]})
            for call in step.get("tool_calls") or []:
                function = call.get("function") or {}
                entry = calls.setdefault(call["index"], {"name": function.get("name"), "arguments": ""})
                entry["arguments"] += function.get("arguments") or ""
        usage = reply.usage or {}
        last: dict[str, Any] = {"candidates": [{
            "content": {"parts": [{"functionCall": {"name": c["name"], "args": json.loads(c["arguments"] or "{}")}}
                                  for _, c in sorted(calls.items())] or [{"text": ""}], "role": "model"},
            "finishReason": _GEMINI_STOP.get(reply.finish_reason or "stop", "STOP"), "index": 0}]}
        if reply.usage is not None:
            last["usageMetadata"] = {"promptTokenCount": usage.get("prompt_tokens", 0),
                                     "candidatesTokenCount": usage.get("completion_tokens", 0),
                                     "totalTokenCount": usage.get("prompt_tokens", 0)
                                     + usage.get("completion_tokens", 0)}
        self._sse(last)


class FakeWireServer(FakeOpenAIServer):
    """The fake server speaking OpenAI, Anthropic and Gemini (see the module docstring)."""

    handler_class = _WireHandler

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.root_url = f"http://127.0.0.1:{self.port}"

    @property
    def model_requests(self) -> list[Any]:
        """Every POST the server answered, in order (any wire format)."""
        return [r for r in self.requests if r.method == "POST"]

