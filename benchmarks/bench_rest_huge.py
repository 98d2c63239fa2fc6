"""Benchmark: the REST API on a 1 GB session: session details and body search, time and server memory.

Run: ``.venv/bin/python benchmarks/bench_rest_huge.py`` (``--size-mb N`` for a smaller log, ``--no-old`` to
skip the old details path, which needs several GB of memory).

A real jupyter-server runs on 127.0.0.1 in a child process, serving a folder whose store holds one ~1 GB
chat-heavy session (long prompts and streamed answers: nearly every byte is conversation), with its own
empty ``DSH_HOME`` (a cold catalog) and no indexing at start. Each request's figure is its wall time and the
server process's peak RSS growth during it (the kernel's peak counter is reset before each request when
allowed, else RSS is sampled every 2 ms):

1. ``details cold``: ``GET dsh/api/sessions/<id>`` on the cold server (the log is cut: its end is read);
2. ``body search cold``: ``GET dsh/api/sessions?query=…&body=1`` (answers at once; says the session is still
   being indexed) and ``GET dsh/api/candidates?…&body=1``;
3. after the catalog has indexed the log in the background: ``details warm`` (exact counts) and
   ``body search warm`` (found, marked as searched only in part).

Baselines measured in the same run: ``cat`` of the log (the I/O floor, page cache warm), the title-only
listing (``GET dsh/api/candidates``) on the same server, and the ``old details path`` (what the endpoint
did before: read the whole surface and project it, in a child process). Goals: every details and body
search answer within 2 s with peak RSS growth <= 300 MB.

The session is the one ``bench_huge_session.py`` times the CLI on (:func:`benchmarks.huge_session.huge_session`,
generated once under ``benchmarks/.data/``, git-ignored, and shared): the folder served is the one that holds
its store. Every goal figure goes to ``run_all.py``'s summary through :func:`benchmarks._summary.goal`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _net import free_port  # noqa: E402
from bench_bigref import cat_seconds  # noqa: E402

from benchmarks._summary import goal  # noqa: E402
from benchmarks.huge_session import SESSION_ID, huge_session  # noqa: E402
from dsh_jupyter.references import encode_session_reference_uri  # noqa: E402

NAME = "bench_rest_huge"
TOKEN = "bench-rest-huge"
GOAL_SECONDS = 2.0
GOAL_GROWTH_MB = 300


# -- the server -------------------------------------------------------------------------------------
class Server:
    """A jupyter-server child process with the dsh extension, on 127.0.0.1."""

    def __init__(self, root: Path, home: Path) -> None:
        self.port = free_port()
        env = dict(os.environ, HOME=str(home), DSH_HOME=str(home / "dsh"),
                   PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
        for name in ("DSH_SESSIONS_DIR", "DSH_POSTGRES_DSN", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
            env.pop(name, None)
        self.log = open(home / "server.log", "w")  # noqa: SIM115 - closed in stop()
        command = [sys.executable, "-m", "jupyter_server", f"--ServerApp.root_dir={root}",
                   f"--ServerApp.port={self.port}", "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
                   "--ServerApp.open_browser=False", "--DshServer.index_at_start=False"]
        if os.geteuid() == 0:
            command.append("--allow-root")
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.request("api/status")
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit(f"the server did not start; see {home / 'server.log'}")

    def request(self, path: str, **params: str) -> tuple[int, Any]:
        url = f"http://127.0.0.1:{self.port}/{path}?" + urllib.parse.urlencode({**params, "token": TOKEN})
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def _status(self, field: str) -> int:
        with open(f"/proc/{self.process.pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def measure(self, path: str, **params: str) -> dict[str, Any]:
        """One request: its status, body, wall time and the server's peak RSS growth during it."""
        try:
            with open(f"/proc/{self.process.pid}/clear_refs", "w") as fh:
                fh.write("5")
            exact = True
        except OSError:
            exact = False
        before = self._status("VmRSS")
        peak = [before]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.002):
                peak[0] = max(peak[0], self._status("VmRSS"))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        code, body = self.request(path, **params)
        seconds = time.perf_counter() - started
        stop.set()
        sampler.join()
        top = max(peak[0], self._status("VmHWM") if exact else 0)
        return {"code": code, "body": body, "seconds": seconds, "growth": top - before}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


# -- the old details path (baseline, in a child) ------------------------------------------------------
def old_details(store_root: str) -> None:
    from dsh_jupyter.references.projection import project_surface
    from dsh_jupyter.store import JsonlStore

    def peak() -> int:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))

    before = peak()
    started = time.perf_counter()
    snapshot = JsonlStore(store_root).read_surface(SESSION_ID)
    projected = project_surface(snapshot)
    assert projected.messages
    print(json.dumps({"seconds": time.perf_counter() - started, "growth": peak() - before}))


def measure_old(root: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--old-child", str(root / ".dsh" / "sessions")],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"seconds": float("nan"), "growth": 0, "failed": done.stderr.strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- report -----------------------------------------------------------------------------------------
def _line(name: str, result: dict[str, Any], note: str = "") -> str:
    return (f"  {name:<26} {result.get('code', '-')!s:>4} {result['seconds']:7.2f} s   "
            f"peak RSS growth {result['growth'] / 2**20:8.1f} MB   {note}")


def _report(name: str, result: dict[str, Any], cat: float) -> bool:
    """The two goal figures of one answer (time, server memory); a failed request misses both."""
    answered = result["code"] == 200
    ok = goal(NAME, f"{name}: answer", f"{result['seconds']:.2f} s" + ("" if answered else f" (HTTP {result['code']})"),
              f"<= {GOAL_SECONDS:g} s", f"cat of the log {cat:.2f} s", answered and result["seconds"] <= GOAL_SECONDS)
    return goal(NAME, f"{name}: server peak RSS growth", f"{result['growth'] / 2**20:.0f} MB",
                f"<= {GOAL_GROWTH_MB} MB", "-", answered and result["growth"] <= GOAL_GROWTH_MB * 2**20) and ok


def bench(size_mb: int, old: bool) -> bool:
    session = huge_session(size_mb)
    root = session.root.parent.parent  # the folder whose .dsh/sessions holds the session
    log = session.path
    payload = encode_session_reference_uri(SESSION_ID).split(":", 1)[1]
    log_mb = log.stat().st_size / 2**20
    cat = cat_seconds(log)
    print(f"REST details and body search of a {log_mb:.0f} MB chat-heavy session (a real jupyter-server):")
    goals: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-rest-") as scratch:
        server = Server(root, Path(scratch))
        try:
            listing = server.measure("dsh/api/candidates")
            print(_line("title listing (baseline)", listing, f"{len(listing['body'])} session(s)"))
            cold = server.measure(f"dsh/api/sessions/{payload}")
            preview = cold["body"].get("preview", {}) if cold["code"] == 200 else {}
            shown = len(preview.get("messages", []))
            print(_line("details cold", cold, f"{shown} shown; {preview.get('more', cold['body'])}"))
            search = server.measure("dsh/api/sessions", query="Turn 5", body="1")
            print(_line("body search cold (listing)", search, "; ".join(search["body"].get("notes", []))
                        if search["code"] == 200 else str(search["body"])))
            candidates = server.measure("dsh/api/candidates", query="Turn 5", body="1")
            print(_line("body search cold (picker)", candidates, f"{candidates['body']!s:.80}"))
            goals += [("details cold", cold), ("body search cold (listing)", search),
                      ("body search cold (picker)", candidates)]
            started = time.monotonic()
            while time.monotonic() - started < 600:  # the catalog indexes the log in the background
                code, body = server.request("dsh/api/sessions")
                if code == 200 and body.get("complete"):
                    break
                time.sleep(2)
            print(f"  (the catalog indexed it in the background within {time.monotonic() - started:.0f} s)")
            warm = server.measure(f"dsh/api/sessions/{payload}")
            preview = warm["body"].get("preview", {}) if warm["code"] == 200 else {}
            print(_line("details warm", warm, f"{preview.get('more', warm['body'])}"))
            found = server.measure("dsh/api/sessions", query="Turn 5", body="1")
            rows = found["body"].get("sessions", []) if found["code"] == 200 else []
            notes = "; ".join(found["body"].get("notes", [])) if found["code"] == 200 else str(found["body"])
            print(_line("body search warm (listing)", found, f"{len(rows)} found; {notes}"))
            goals += [("details warm", warm), ("body search warm (listing)", found)]
        finally:
            server.stop()
    if old:
        before = measure_old(root)
        print(_line("old details path", {"code": "-", **before}, "read the whole surface and project it"))
        if cold["seconds"] > 0 and before.get("growth"):
            print(f"  old/new details: time {before['seconds'] / cold['seconds']:.0f}x, memory "
                  f"{before['growth'] / max(cold['growth'], 1):.0f}x")
    print(f"  cat of the log             {cat:7.2f} s   (a loaded machine inflates wall times)")
    met = [_report(name, result, cat) for name, result in goals]
    return all(met)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the chat-heavy log")
    parser.add_argument("--no-old", action="store_true", help="skip the old details path (needs GBs of RAM)")
    parser.add_argument("--old-child", metavar="STORE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.old_child:
        old_details(args.old_child)
        return 0
    return 0 if bench(args.size_mb, not args.no_old) else 1


if __name__ == "__main__":
    sys.exit(main())
