"""Benchmark: inline completion — the latency our path adds over the model's own time, and the context size.

Run from the repository root::

    .venv/bin/python benchmarks/bench_completion.py

A real jupyter-server runs on 127.0.0.1 in a child process with ``c.DshCompletion`` pointed at a
fill-in-the-middle model server (llama.cpp's ``/infill`` API) that this process runs on 127.0.0.1: it takes
a fixed time to think, then streams three pieces. Each completion is a request for the last cell of a 200-cell
notebook in the page's shape (sources, output summaries, 40 variables), with all 200 cells in it (more than
the page's 32,000-character cap sends, so the server's bounding does all the work); the prefix changes every
time so nothing is cached; each is timed to the last byte.

- ``added latency p50`` (goal ≤ 15 ms): the median through ``POST dsh/api/completion`` minus the median of
  the same model server asked directly with the same context (the baseline, measured in the same run);
- ``context for a 200-cell notebook`` (goal ≤ 8 kB): the bytes of the context sent to the model, with the
  size of the request the page sent beside it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._net import free_port  # noqa: E402
from benchmarks._summary import goal  # noqa: E402
from dsh_jupyter.completion.backends import llamacpp_infill_request  # noqa: E402
from dsh_jupyter.completion.context import build_context, parse_request  # noqa: E402

BENCH = "bench_completion"
ADDED_GOAL_MS = 15.0
CONTEXT_GOAL_BYTES = 8_000
MODEL_SECONDS = 0.040
ROUNDS = 40
TOKEN = "bench-token"


class ModelServer:
    """``/infill`` that thinks :data:`MODEL_SECONDS`, then streams three pieces as server-sent events."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                time.sleep(MODEL_SECONDS)
                events = [b'data: {"content": "%s", "stop": false}\n\n' % piece for piece in (b"ius", b" *", b" 2")]
                events.append(b'data: {"content": "", "stop": true, "tokens_evaluated": 900, '
                              b'"tokens_predicted": 3}\n\n')
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(sum(map(len, events))))
                self.end_headers()
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def notebook_request(index: int) -> dict[str, Any]:
    """What the page sends for a cursor at the end of a 200-cell notebook (see inline_completion.ts)."""
    cells = []
    for i in range(200):
        source = "\n".join(f"frame_{i}_{j} = sales[sales.region == 'r{j}'].groupby('month').sum()" for j in range(6))
        cells.append({"kind": "markdown" if i % 5 == 0 else "code", "source": source,
                      "outputs": f"<Figure size 640x480 with 1 Axes> {i}" * 4})
    return {"requestId": f"bench-{index}", "language": "python", "mode": "code",
            "prefix": f"total_{index} = frame_199_0.sum()\nrad", "suffix": "\nprint(total)\n",
            "cells": cells, "variables": [{"name": f"frame_{i}", "type": "DataFrame 1,000×12"} for i in range(40)]}


def _post(url: str, body: bytes, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                                                             **headers})
    with urllib.request.urlopen(request, timeout=30) as response:
        data = response.read()
    took = time.perf_counter() - started
    assert b"ius" in data, data[:200]
    return took


def start_server(root: Path, model: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = dict(os.environ, DSH_HOME=str(root / "dsh-home"), JUPYTER_CONFIG_DIR=str(root / "config"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "jupyter_server", f"--ServerApp.root_dir={root}", f"--ServerApp.port={port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", "--ServerApp.open_browser=False",
               "--DshServer.index_at_start=False", "--ServerApp.jpserver_extensions={'dsh_jupyter': True}",
               "--DshCompletion.model=qwen", "--DshCompletion.fim=llama.cpp", f"--DshCompletion.base_url={model}",
               "--DshCompletion.hourly_cap=0"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/dsh/api/completion?token={TOKEN}", timeout=2):
                return process, port
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the jupyter server did not start")


def main() -> int:
    sample = notebook_request(0)
    sent = len(json.dumps(sample).encode())
    context = build_context(parse_request(sample))
    ok = goal(BENCH, "context for a 200-cell notebook", f"{context.size:,} B", f"<= {CONTEXT_GOAL_BYTES:,} B",
              f"request the page sent: {sent:,} B", context.size <= CONTEXT_GOAL_BYTES)
    model = ModelServer()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-completion-") as folder:
        process, port = start_server(Path(folder), model.url)
        try:
            ours_url = f"http://127.0.0.1:{port}/dsh/api/completion"
            auth = {"Authorization": f"token {TOKEN}"}
            for warm in range(3):
                _post(ours_url, json.dumps(notebook_request(1000 + warm)).encode(), auth)
            direct: list[float] = []
            ours: list[float] = []
            for index in range(ROUNDS):
                request = notebook_request(index + 1)
                infill = llamacpp_infill_request(build_context(parse_request(request)), 64, model.url)
                direct.append(_post(infill.url, json.dumps(infill.body).encode(), {}))
                ours.append(_post(ours_url, json.dumps(request).encode(), auth))
        finally:
            process.terminate()
            process.wait(20)
    model_p50 = statistics.median(direct) * 1000
    ours_p50 = statistics.median(ours) * 1000
    added = ours_p50 - model_p50
    ok &= goal(BENCH, "added latency p50 (200-cell notebook)", f"{added:.1f} ms", f"<= {ADDED_GOAL_MS:g} ms",
               f"model alone p50 {model_p50:.1f} ms; through dsh p50 {ours_p50:.1f} ms", added <= ADDED_GOAL_MS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
