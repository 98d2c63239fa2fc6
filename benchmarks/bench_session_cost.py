"""What keeping each session's cost costs the catalog: indexing logs with the cost pass, beside without it.

    .venv/bin/python benchmarks/bench_session_cost.py

Data: 200 agent sessions of 20 turns (each turn a prompt, a tool call with 2-40 kB of output, two priced
model calls; a quarter compacted halfway), about 65 MB, generated once under
``benchmarks/.data/session-cost-v2/`` and reused. The catalog reads a log below its body cap by folding its
surface, whose events are decoded anyway: without a compaction every model call is among them; after one,
it searches a map of the file for the ``assistant/message`` lines, the only ones it decodes for the cost.
Figures, both ways interleaved so they see the same machine load (median of 9 rounds):

- full read of every log (:func:`dsh_jupyter.catalog.logs.read_full`) with the cost pass, beside the same read
  with the pass replaced by nothing (the baseline): the pass may add at most 15 %;
- ``SqliteStore.spends`` for a listing's 50 sessions, beside listing their headers: at most 5 ms.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from benchmarks._summary import goal  # noqa: E402

NAME = "bench_session_cost"
SESSIONS = 200
TURNS = 20
ROUNDS = 9
OVERHEAD_GOAL = 0.15
SPENDS_GOAL_S = 0.005
DATA = REPO / "benchmarks" / ".data" / "session-cost-v2"


def _write(store: object, rng: random.Random, count: int) -> list[str]:
    from store_helpers import compact

    from dsh_jupyter.session import SessionHeader, SessionLog
    from dsh_jupyter.session.messages import assistant_message, text_block, tool_result_message, user_message

    model = {"kind": "model", "provider": "openai", "model": "gpt-4o-mini"}
    ids = []
    for n in range(count):
        header = SessionHeader(f"cost-{n:04d}", 1_787_130_725_417 + n, "/work/bench")
        log = SessionLog(header)
        with store.create(header) as writer:  # type: ignore[attr-defined]
            writer.attach(log)
            for turn in range(1, TURNS + 1):
                log.append("turn/start", {"turn": turn})
                log.append("user/message", user_message(f"turn {turn}: " + "look at the data " * rng.randint(3, 30)))
                call = f"call-{turn}"
                blocks = [text_block("Let me check."),
                          {"type": "tool-call", "id": call, "name": "bash", "arguments": '{"command":"ls"}'}]
                usage = {"inputTokens": 1000 * turn, "outputTokens": 50, "cost": 0.0001 * turn}
                log.append("assistant/message", {"turn": turn, "step": 1, "usage": usage,
                                                 "message": assistant_message(blocks, model)})
                seq = log.append("tool/call", {"turn": turn, "step": 1, "callId": call, "name": "bash",
                                               "arguments": '{"command":"ls"}'}).seq
                output = "row,value\n" + "".join(f"{i},{rng.random():.6f}\n" for i in range(rng.randint(100, 2000)))
                log.append("tool/result", {"turn": turn, "step": 1,
                                           "message": tool_result_message(call, [text_block(output)])},
                           source_event_seqs=[seq])
                log.append("assistant/message", {"turn": turn, "step": 2, "usage": usage, "message":
                                                 assistant_message([text_block("answer " * 40)], model)})
                log.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
                if n % 4 == 0 and turn == TURNS // 2:  # a quarter of them compacted halfway
                    compact(log, None)
                writer.flush()
        ids.append(header.id)
    return ids


def _data() -> Path:
    from dsh_jupyter.store import JsonlStore

    marker = DATA / "done"
    if not marker.exists():
        _write(JsonlStore(DATA / "sessions"), random.Random(25), SESSIONS)
        marker.write_text("ok")
    return DATA / "sessions"


def _read_all(paths: list[tuple[str, str]]) -> float:
    from dsh_jupyter.catalog.logs import read_full, stat_log

    started = time.perf_counter()
    for path, folder in paths:
        stat = stat_log(path)
        assert stat is not None
        read = read_full(path, folder, stat)
        assert read is not None and read.record.readable
    return time.perf_counter() - started


def measure_indexing(root: Path) -> tuple[float, float]:
    from dsh_jupyter.catalog import logs
    from dsh_jupyter.conversation.spend import Spend

    paths = [(str(p / "session.jsonl"), p.name) for p in sorted(root.iterdir()) if p.is_dir()]
    real, real_events = logs._spend_of_file, logs.spend_of_events
    with_cost: list[float] = []
    without: list[float] = []
    _read_all(paths)  # warm the page cache and the imports
    for _ in range(ROUNDS):
        with_cost.append(_read_all(paths))
        logs._spend_of_file = lambda fh, start, stop: Spend()
        logs.spend_of_events = lambda events: Spend()
        try:
            without.append(_read_all(paths))
        finally:
            logs._spend_of_file, logs.spend_of_events = real, real_events
    return statistics.median(with_cost), statistics.median(without)


def measure_spends(folder: Path) -> tuple[float, float]:
    from dsh_jupyter.store.sqlite import SqliteStore

    store = SqliteStore(folder / "sessions.db")
    ids = _write(store, random.Random(7), 50) if not store.exists("cost-0000") else [f"cost-{n:04d}"
                                                                                     for n in range(50)]
    spends: list[float] = []
    headers: list[float] = []
    for _ in range(ROUNDS * 4):
        started = time.perf_counter()
        found = store.spends(ids)
        spends.append(time.perf_counter() - started)
        started = time.perf_counter()
        store.list_headers()
        headers.append(time.perf_counter() - started)
    assert len(found) == 50
    return statistics.median(spends), statistics.median(headers)


def main() -> int:
    import tempfile

    root = _data()
    megabytes = sum(p.stat().st_size for p in root.rglob("session.jsonl")) / 2**20
    print(f"session cost ({SESSIONS} sessions, {megabytes:.0f} MB):")
    with_cost, without = measure_indexing(root)
    overhead = with_cost / without - 1
    ok = goal(NAME, "full read of every log, cost pass added", f"{overhead:+.1%}", f"≤ +{OVERHEAD_GOAL:.0%}",
              f"without it {without:.2f} s (with it {with_cost:.2f} s)", overhead <= OVERHEAD_GOAL)
    with tempfile.TemporaryDirectory() as folder:
        spends, headers = measure_spends(Path(folder))
    ok &= goal(NAME, "SqliteStore.spends of 50 listed sessions", f"{spends * 1000:.2f} ms",
               f"≤ {SPENDS_GOAL_S * 1000:.0f} ms", f"their headers {headers * 1000:.2f} ms", spends <= SPENDS_GOAL_S)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
