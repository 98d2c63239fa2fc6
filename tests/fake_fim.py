"""A fill-in-the-middle model server for tests (stdlib only, bound to 127.0.0.1): DeepSeek's
``/beta/completions`` and llama.cpp's ``/infill`` (server-sent events) and Ollama's ``/api/generate`` (JSON
lines). Each answers ``pieces`` in the API's own stream format and records every request (path, lower-cased
headers, decoded JSON body); ``status`` other than 200 answers that status with a short error body."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeFimServer:
    pieces: tuple[str, ...] = ("ius", " * 2")
    status: int = 200
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if fake.status != 200:
                    data = b'{"error": "model not loaded"}'
                    self.send_response(fake.status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                lines = fake.events(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson" if self.path == "/api/generate"
                                 else "text/event-stream")
                self.send_header("Content-Length", str(sum(len(line) for line in lines)))
                self.end_headers()
                for line in lines:
                    self.wfile.write(line)
                    self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def events(self, path: str) -> list[bytes]:
        def sse(value: object) -> bytes:
            return b"data: " + json.dumps(value).encode() + b"\n\n"

        if path == "/api/generate":
            return [json.dumps({"response": p, "done": False}).encode() + b"\n" for p in self.pieces] + [
                json.dumps({"response": "", "done": True, "prompt_eval_count": 40, "eval_count": 3}).encode() + b"\n"]
        if path == "/infill":
            return [sse({"content": p, "stop": False}) for p in self.pieces] + [
                sse({"content": "", "stop": True, "tokens_evaluated": 40, "tokens_predicted": 3})]
        return [sse({"choices": [{"text": p, "index": 0}]}) for p in self.pieces] + [
            sse({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 3}}), b"data: [DONE]\n\n"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
