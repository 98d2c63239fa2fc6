"""Store benchmarks: surface reads of a 100 MB log, append throughput, and (optionally) a long crash loop.

Run from the repository root::

    .venv/bin/python benchmarks/bench_store.py              # read + append figures
    .venv/bin/python benchmarks/bench_store.py --crash 500  # plus a 500-kill crash loop

Every figure is printed with its goal and its ratio to a baseline measured in the same run. Generated
data lives under ``benchmarks/.data/`` (git-ignored) and is reused across runs.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._logs import write_big_log  # noqa: E402
from dsh_jupyter.session import Event, SessionHeader, SessionLog, SurfaceFold, events_from_record  # noqa: E402
from dsh_jupyter.session.messages import text_block, tool_result_message, user_message  # noqa: E402
from dsh_jupyter.store import JsonlStore, SqliteStore  # noqa: E402

DATA = REPO / "benchmarks" / ".data"
SESSION_ID = "bench-100mb"
READ_SPEEDUP_GOAL = 3.0
MEMORY_GOAL_MB = 100.0
APPEND_GOAL = 50_000.0
MB = 1024 * 1024


# -- baselines -------------------------------------------------------------------------------------------
def naive_surface(path: Path, loads: Callable[[bytes], Any] = json.loads) -> tuple[int | None, list[Event]]:
    """The obvious reader: decode every line, fold, keep the surface events (the baseline)."""
    fold = SurfaceFold()
    kept: dict[int, Event] = {}
    last: int | None = None
    with open(path, "rb") as fh:
        fh.readline()  # header
        for line in fh:
            if not line.endswith(b"\n"):
                break
            for event in events_from_record(loads(line)):
                last = event.seq
                if event.surface_op is not None:
                    for seq in fold.apply(event.seq, event.surface_op, event.source_event_seqs):
                        kept.pop(seq, None)
                    kept[event.seq] = event
    return last, [kept[s] for s in fold.seqs]


def _max_rss_mb() -> float:
    """This process image's RSS high-water mark. ``VmHWM`` is per address space; ``ru_maxrss`` (the
    fallback) also counts the parent's peak before ``exec`` on Linux, which would hide the growth."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def memory_probe(which: str, root: str, session_id: str) -> dict[str, float]:
    """Run one reader in this (fresh) process: RSS high-water growth, then tracemalloc's peak."""
    store = JsonlStore(root)
    path = store.log_path(session_id)
    run: Callable[[], Any] = ((lambda: store.read_surface(session_id)) if which == "fast"
                              else (lambda: naive_surface(path)))
    gc.collect()
    before = _max_rss_mb()
    run()
    rss_growth = _max_rss_mb() - before
    gc.collect()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1] / MB
    tracemalloc.stop()
    return {"rss_growth_mb": rss_growth, "tracemalloc_peak_mb": peak}


def _probe(which: str, root: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--memory-probe", which, str(root), SESSION_ID],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- sections --------------------------------------------------------------------------------------------
def _row(name: str, value: str, goal: str = "", ratio: str = "") -> None:
    print(f"  {name:<44} {value:>16}  {goal:<22} {ratio}")


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def prepare_log(size_mb: int, regenerate: bool) -> tuple[JsonlStore, dict[str, Any]]:
    root = DATA / f"store-{size_mb}mb"
    store = JsonlStore(root)
    meta_path = root / "meta.json"
    version = hashlib.sha256((REPO / "benchmarks" / "_logs.py").read_bytes()).hexdigest()[:16]
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if regenerate or meta.get("generator") != version or not store.log_path(SESSION_ID).is_file():
        shutil.rmtree(root, ignore_errors=True)
        print(f"generating a {size_mb} MB log under {root} ...", flush=True)
        meta = write_big_log(store.log_path(SESSION_ID), size_mb=size_mb, session_id=SESSION_ID,
                             cwd="/home/dev/projects/bench", seed=0)
        meta["generator"] = version
        meta_path.write_text(json.dumps(meta))
    return store, meta


def bench_read(size_mb: int, repeat: int, regenerate: bool) -> dict[str, float]:
    store, info = prepare_log(size_mb, regenerate)
    path = store.log_path(SESSION_ID)
    size = path.stat().st_size
    with open(path, "rb") as fh:  # warm the page cache so both readers start equal
        while fh.read(8 * MB):
            pass
    print(f"\nread_surface on {size / MB:.1f} MiB ({info['lines']} lines, {info['events']} events, "
          f"{len(info['surface_seqs'])} surface nodes after a compaction that shadowed {info['shadowed']})")
    fast_s, snapshot = _timed(lambda: store.read_surface(SESSION_ID), repeat)
    naive_s, (naive_last, naive_events) = _timed(lambda: naive_surface(path), max(1, repeat - 1))
    import orjson

    orjson_s, _ = _timed(lambda: naive_surface(path, orjson.loads), max(1, repeat - 1))
    assert [e.seq for e in snapshot.events] == info["surface_seqs"] == [e.seq for e in naive_events]
    assert snapshot.events == naive_events and snapshot.captured_through_seq == naive_last == info["last_seq"]
    title_s, title = _timed(lambda: store.read_title(SESSION_ID), repeat)
    assert title == info["title"]
    load_s, _ = _timed(lambda: store.load(SESSION_ID), 1)
    fast_mem, naive_mem = _probe("fast", store.root), _probe("naive", store.root)
    speedup = naive_s / fast_s
    _row("read_surface (fast path)", f"{fast_s * 1000:.0f} ms", "", f"{size / MB / fast_s:.0f} MiB/s")
    _row("naive fold, json.loads every line (baseline)", f"{naive_s * 1000:.0f} ms", "",
         f"{size / MB / naive_s:.0f} MiB/s")
    _row("  speed-up over the baseline", f"{speedup:.1f}x", f"goal >= {READ_SPEEDUP_GOAL:.0f}x",
         "OK" if speedup >= READ_SPEEDUP_GOAL else "MISSED")
    _row("naive fold, orjson.loads every line (info)", f"{orjson_s * 1000:.0f} ms", "",
         f"fast path {orjson_s / fast_s:.1f}x faster")
    _row("read_title", f"{title_s * 1000:.0f} ms", "", f"{size / MB / title_s:.0f} MiB/s")
    _row("load (full decode and validation, info)", f"{load_s * 1000:.0f} ms", "", f"{size / MB / load_s:.0f} MiB/s")
    for name, mem in (("read_surface", fast_mem), ("naive fold", naive_mem)):
        worst = max(mem["rss_growth_mb"], mem["tracemalloc_peak_mb"])
        goal = f"goal < {MEMORY_GOAL_MB:.0f} MB" if name == "read_surface" else ""
        verdict = ("OK" if worst < MEMORY_GOAL_MB else "MISSED") if name == "read_surface" else ""
        _row(f"{name}: peak RSS growth", f"{mem['rss_growth_mb']:.1f} MB", goal, verdict)
        _row(f"{name}: tracemalloc peak", f"{mem['tracemalloc_peak_mb']:.1f} MB", goal, verdict)
    _row("  memory ratio (naive / fast, RSS growth)",
         f"{naive_mem['rss_growth_mb'] / max(fast_mem['rss_growth_mb'], 0.1):.0f}x")
    return {"fast_s": fast_s, "naive_s": naive_s, "speedup": speedup, **{f"fast_{k}": v for k, v in fast_mem.items()}}


def _turn_events(log: SessionLog, turn: int, chunks: int) -> None:
    """One turn of ``chunks + 10`` events, sized like real ones (small chunks, a few KB of tool output)."""
    log.append("turn/start", {"turn": turn})
    log.append("step/start", {"turn": turn, "step": 1})
    log.append("user/message", user_message(f"prompt {turn}: please look at the failing test"))
    seqs = [log.append("assistant/chunk", {"turn": turn, "step": 1,
                                           "chunk": {"type": "text-delta", "index": 0, "text": "word "}}).seq
            for _ in range(chunks)]
    log.append("assistant/message", {"turn": turn, "step": 1, "message": {
        "role": "assistant", "content": [text_block("word " * chunks)],
        "source": {"kind": "model", "provider": "p", "model": "m"}, "id": f"a{turn}"}}, source_event_seqs=seqs)
    call = log.append("tool/call", {"turn": turn, "step": 1, "callId": f"c{turn}", "name": "bash",
                                    "arguments": "{}"}).seq
    log.append("tool/result", {"turn": turn, "step": 1, "message": tool_result_message(
        f"c{turn}", [text_block("output line\n" * 200)])}, source_event_seqs=[call])
    log.append("step/end", {"turn": turn, "step": 1})
    log.append("session/title", {"title": f"t{turn}", "messageSeqs": [2], "source": {"kind": "fallback"}})
    log.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _append_run(store: Any, name: str, turns: int, chunks: int) -> dict[str, float]:
    header = SessionHeader.new("/bench", session_id=f"append-{name}-{chunks}")
    # Buffered appends alone: events built beforehand, handed to the writer one by one.
    prebuilt = SessionLog(header)
    for turn in range(1, turns + 1):
        _turn_events(prebuilt, turn, chunks)
    events = prebuilt.events
    writer = store.create(header)
    started = time.perf_counter()
    for event in events:
        writer.append([event])
    buffered_s = time.perf_counter() - started
    writer.close()
    # End to end, as the agent does it: SessionLog.append -> attached writer, flush at every turn end.
    header2 = SessionHeader.new("/bench", session_id=f"append-{name}-{chunks}-live")
    log = SessionLog(header2)
    writer = store.create(header2)
    writer.attach(log)
    flush_s = 0.0
    started = time.perf_counter()
    for turn in range(1, turns + 1):
        _turn_events(log, turn, chunks)
        before_flush = time.perf_counter()
        writer.flush()
        flush_s += time.perf_counter() - before_flush
    total_s = time.perf_counter() - started
    writer.close()
    # Baseline in the same run: the same events in memory only (no store attached).
    started = time.perf_counter()
    bare = SessionLog(SessionHeader.new("/bench", session_id="bare"))
    for turn in range(1, turns + 1):
        _turn_events(bare, turn, chunks)
    bare_s = time.perf_counter() - started
    assert len(store.load(header2.id)) == len(log) == len(events)
    n = len(events)
    return {"events": n, "buffered_eps": n / buffered_s, "end_to_end_eps": n / total_s,
            "flush_ms_per_turn": flush_s * 1000 / turns, "flush_share": flush_s / total_s, "bare_eps": n / bare_s,
            "overhead": total_s / bare_s}


def bench_append(turns: int, chunk_counts: list[int]) -> dict[str, float]:
    results: dict[str, float] = {}
    for chunks in chunk_counts:
        count = max(50, turns * 40 // chunks)
        print(f"\nappend throughput: {count} turns of {chunks + 10} events, one flush (write + fsync) per turn end")
        for name, make in (("jsonl", lambda d: JsonlStore(d / "sessions")),
                           ("sqlite", lambda d: SqliteStore(d / "s.db"))):
            with tempfile.TemporaryDirectory(dir=DATA) as tmp:
                r = _append_run(make(Path(tmp)), name, count, chunks)
            _row(f"{name}: writer.append, buffered", f"{r['buffered_eps']:,.0f} ev/s", f"goal >= {APPEND_GOAL:,.0f}",
                 "OK" if r["buffered_eps"] >= APPEND_GOAL else "MISSED")
            _row(f"{name}: log.append + attach + flush per turn", f"{r['end_to_end_eps']:,.0f} ev/s",
                 f"goal >= {APPEND_GOAL:,.0f}", "OK" if r["end_to_end_eps"] >= APPEND_GOAL else "below (fsync-bound)")
            _row(f"{name}:   of which flushes (write + fsync)", f"{r['flush_ms_per_turn']:.1f} ms/turn", "",
                 f"{r['flush_share']:.0%} of the time")
            _row(f"{name}:   baseline: log.append, no store", f"{r['bare_eps']:,.0f} ev/s", "",
                 f"with the store: {r['overhead']:.1f}x the time")
            results.update({f"{name}_{chunks}_{k}": v for k, v in r.items()})
    return results


def bench_crash(kills: int, batch: int = 50) -> None:
    """``kills`` SIGKILLs, in sessions of ``batch`` kills each (so reopen cost does not grow without bound)."""
    sys.path.insert(0, str(REPO / "tests"))
    from store_helpers import run_crash_loop  # type: ignore[import-not-found]

    print(f"\ncrash loop: {kills} SIGKILLs at random moments, {batch} per session (writers forked by a helper script)")
    for kind in ("jsonl", "sqlite"):
        done = turns = interrupted = torn = 0
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=DATA) as tmp:
            index = 0
            while done < kills:
                n = min(batch, kills - done)
                report = run_crash_loop(kind, Path(tmp), kills=n, seed=100 + index, session_id=f"crash-{index}")
                done += report.kills
                turns += report.flushed_turns
                interrupted += report.interrupted_turns
                torn += report.torn_tails
                index += 1
        seconds = time.perf_counter() - started
        _row(f"{kind}: kills survived, every flushed turn intact", f"{done}", f"goal {kills}", "OK")
        _row(f"{kind}: flushed turns verified", f"{turns}", "",
             f"{interrupted} open turns repaired, {torn} torn tails cut")
        _row(f"{kind}: time", f"{seconds:.1f} s", "", f"{done / seconds:.1f} kills/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=100, help="size of the read benchmark log (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (best is reported)")
    parser.add_argument("--regenerate", action="store_true", help="rewrite the benchmark log")
    parser.add_argument("--turns", type=int, default=2000, help="turns for the append benchmark")
    parser.add_argument("--chunks", default="40,400", help="assistant chunks per turn, comma-separated sizes")
    parser.add_argument("--crash", type=int, default=0, metavar="KILLS", help="also run a crash loop")
    parser.add_argument("--skip-read", action="store_true")
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument("--memory-probe", nargs=3, metavar=("WHICH", "ROOT", "ID"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        print(json.dumps(memory_probe(*args.memory_probe)))
        return 0
    DATA.mkdir(parents=True, exist_ok=True)
    print(f"dsh-jupyter store benchmarks (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    if not args.skip_read:
        bench_read(args.size_mb, args.repeat, args.regenerate)
    if not args.skip_append:
        bench_append(args.turns, [int(c) for c in args.chunks.split(",")])
    if args.crash:
        bench_crash(args.crash)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
