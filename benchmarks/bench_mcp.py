"""``dsh-jupyter mcp``: one ``search_sessions`` call over a folder of 1,000 sessions, as an MCP client sees it.

Run from the repository root::

    .venv/bin/python benchmarks/bench_mcp.py [--sessions 1000] [--calls 60]

The goal figure is the round trip of one call through the real command over stdio (the ``mcp`` SDK's client
starts ``python -m dsh_jupyter.cli mcp --root FOLDER``, as Claude Code or Codex would), after the first call
has indexed the folder. Measured beside it in the same run: the same searches without MCP
(:meth:`ServedFolder.search` called directly, the catalog's query), and the scan the catalog replaced (every
header and title of the store read per call, ``list_candidates`` without a catalog). The folder is generated
once under ``benchmarks/.data/`` (git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._summary import goal  # noqa: E402
from dsh_jupyter.session import SessionHeader, SessionLog  # noqa: E402
from dsh_jupyter.session.messages import assistant_message, text_block, user_message  # noqa: E402
from dsh_jupyter.store import JsonlStore  # noqa: E402

DATA = REPO / "benchmarks" / ".data"
GENERATOR_VERSION = 1
GOAL_P50 = 0.100  # seconds a call
BASE_TIME = 1_787_130_725_417
QUERIES = ("", "analysis 7", "churn", "sub", "s-00042", "no such words here")
MODEL = {"kind": "model", "provider": "offline", "model": "tiny"}


def generate(root: Path, sessions: int) -> None:
    """``sessions`` closed sessions with a title and one turn, a tenth of them made in ``root/sub``."""
    marker = root / f".bench-mcp-{sessions}.json"
    if marker.exists() and json.loads(marker.read_text()).get("version") == GENERATOR_VERSION:
        return
    store = JsonlStore(root / ".dsh" / "sessions")
    for index in range(sessions):
        cwd = root / "sub" if index % 10 == 0 else root
        header = SessionHeader(f"s-{index:05d}", BASE_TIME + index, str(cwd))
        log = SessionLog(header)
        with store.create(header) as writer:
            writer.attach(log)
            log.append("turn/start", {"turn": 1})
            log.append("user/message", user_message(f"why did churn move in week {index % 52}?"))
            log.append("assistant/message", {"turn": 1, "step": 1, "message": assistant_message(
                [text_block(f"Churn moved because of cohort {index % 7}.")], MODEL)})
            log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            log.append("session/title", {"title": f"Analysis {index}", "messageSeqs": [],
                                         "source": {"kind": "user"}})
    marker.write_text(json.dumps({"version": GENERATOR_VERSION, "sessions": sessions}))


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def over_stdio(root: Path, calls: int) -> tuple[float, float]:
    """(first call, p50 of the next ``calls``) of ``search_sessions`` through the real command."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {"DSH_HOME": os.environ["DSH_HOME"], "PYTHONPATH": str(REPO), "CLAUDE_CONFIG_DIR": os.environ["DSH_HOME"],
           "CODEX_HOME": os.environ["DSH_HOME"]}
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_jupyter.cli", "mcp", "--root", str(root)],
                                   env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        started = time.perf_counter()
        await client.call_tool("search_sessions", {"query": "analysis"})
        first = time.perf_counter() - started
        times = []
        for run in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("search_sessions", {"query": QUERIES[run % len(QUERIES)], "limit": 20})
            times.append(time.perf_counter() - started)
            assert not result.is_error, result
        return first, p50(times)


def direct(root: Path, calls: int) -> float:
    from dsh_jupyter.mcp_server import served

    folder = served(root)
    try:
        folder.search("analysis")
        times = []
        for run in range(calls):
            started = time.perf_counter()
            folder.search(QUERIES[run % len(QUERIES)], limit=20)
            times.append(time.perf_counter() - started)
        return p50(times)
    finally:
        folder.close()


def scanned(root: Path, calls: int) -> float:
    from dsh_jupyter.query import SessionQuery
    from dsh_jupyter.references import ReferenceTarget
    from dsh_jupyter.references.candidates import list_candidates

    query = SessionQuery(JsonlStore(root / ".dsh" / "sessions"))
    times = []
    for run in range(calls):
        started = time.perf_counter()
        list_candidates(query, ReferenceTarget(None, str(root)), QUERIES[run % len(QUERIES)], 20)
        times.append(time.perf_counter() - started)
    return p50(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    root = DATA / f"mcp-{args.sessions}"
    root.mkdir(parents=True, exist_ok=True)
    generate(root, args.sessions)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-mcp-") as home:
        os.environ["DSH_HOME"] = home  # a fresh catalog: the first call indexes the folder
        first, stdio = asyncio.run(over_stdio(root, args.calls))
        plain = direct(root, args.calls)
    scan = scanned(root, max(6, args.calls // 10))
    print(f"bench_mcp: search_sessions over {args.sessions} sessions ({args.calls} calls, p50)")
    print(f"  first call (indexes the folder): {first * 1000:.0f} ms")
    ok = goal("bench_mcp", f"search_sessions p50, stdio, {args.sessions} sessions", f"{stdio * 1000:.1f} ms",
              f"<= {GOAL_P50 * 1000:.0f} ms", f"direct {plain * 1000:.1f} ms; scan {scan * 1000:.0f} ms",
              stdio <= GOAL_P50)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
