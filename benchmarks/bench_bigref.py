"""Benchmark: referencing huge sessions in bounded memory, with a capped full-snapshot spill.

Run: ``.venv/bin/python benchmarks/bench_bigref.py`` (``--size-mb N`` for a smaller chat log,
``--old-big`` to also run the old path on the big log, which needs several GB of memory).

1. ``prepare()`` of one reference to a ~1 GB chat-heavy session (long prompts and streamed answers,
   no tools: nearly every byte is conversation the reference projects), default budget (65,536 bytes).
2. The same for a session whose one prompt is a single 30 MB message.

Each variant runs in a fresh child process; its peak RSS growth is the peak resident size during the
run minus the resident size just before it (the kernel's peak counter is reset first when allowed).
Figures, each beside baselines measured in the same run:
- ``ours``: ``SessionReferenceResolver.prepare_sync`` (streamed read, bounded projection, capped spill);
- ``old path``: what prepare() did before: read the whole surface, project it, retain, and write the
  full transcript (``render_transcript`` of every message);
- ``cat``: ``cat`` of the log to /dev/null (the I/O floor; page cache warm).
Goals: peak RSS growth <= 300 MB for the 1 GB session; the spill file <= its cap (8 MiB) plus 1 KiB;
the 30 MB message clipped early (growth well below the old path's).

Data is generated once under ``benchmarks/.data/`` (git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from dsh_jupyter.query import SessionQuery  # noqa: E402
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver  # noqa: E402
from dsh_jupyter.references.budget import DEFAULT_MAX_REFERENCE_BYTES  # noqa: E402
from dsh_jupyter.references.projection import PROJECTION_SKIPS, project_surface  # noqa: E402
from dsh_jupyter.references.retention import retain_source  # noqa: E402
from dsh_jupyter.references.spill import DEFAULT_MAX_SPILL_BYTES, render_transcript, save_transcript  # noqa: E402
from dsh_jupyter.store import JsonlStore  # noqa: E402

DATA = HERE / ".data"
CWD = "/home/bench/chat"
GOAL_GROWTH_MB = 300


# -- data -------------------------------------------------------------------------------------------
def _store(kind: str, size_mb: int) -> tuple[JsonlStore, str]:
    from benchmarks._logs import write_chat_log, write_single_message_log

    version = hashlib.sha256((HERE / "_logs.py").read_bytes()).hexdigest()[:16]
    store = JsonlStore(DATA / f"bigref-{kind}-{size_mb}mb")
    session_id = f"bigref-{kind}"
    path = store.log_path(session_id)
    marker = path.with_name("generated-by")
    if not (path.exists() and marker.exists() and marker.read_text() == version):
        path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        writer = write_chat_log if kind == "chat" else write_single_message_log
        facts = writer(path, size_mb=size_mb, session_id=session_id, cwd=CWD)
        marker.write_text(version)
        print(f"  (generated {facts['bytes'] / 2**20:.0f} MB, {facts['messages']} messages, "
              f"in {time.monotonic() - started:.0f} s)", flush=True)
    return store, session_id


# -- measured work (children) -----------------------------------------------------------------------
def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_ours(store: JsonlStore, session_id: str, spill: Path) -> None:
    resolver = SessionReferenceResolver(SessionQuery(store))
    prepared = resolver.prepare_sync(ReferenceTarget("bench-target", CWD, spill), [], [{"sessionId": session_id}])
    assert prepared.additional_context is not None


def run_old(store: JsonlStore, session_id: str, spill: Path) -> None:
    snapshot = store.read_surface(session_id, skip_data=PROJECTION_SKIPS)
    projection = project_surface(snapshot)
    del snapshot
    retained = retain_source(projection, session_id, DEFAULT_MAX_REFERENCE_BYTES)
    assert retained is not None and retained.stats.truncated
    save_transcript(spill, 0, render_transcript(projection.data(session_id), projection.format_version))


def child(variant: str, root: str, session_id: str, spill: str) -> None:
    store = JsonlStore(root)
    folder = Path(spill)
    shutil.rmtree(folder, ignore_errors=True)
    work = run_ours if variant == "ours" else run_old
    before = _rss()
    exact = _reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    work(store, session_id, folder)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    growth = _peak() - before
    files = sorted(folder.glob("session-reference-*.txt"))
    size = files[0].stat().st_size if files else 0
    shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"wall": wall, "cpu": cpu, "growth": growth, "spill": size, "exact_peak": exact}))


def measure(variant: str, store: JsonlStore, session_id: str) -> dict[str, Any]:
    spill = DATA / f"bigref-spill-{variant}"
    out = subprocess.run([sys.executable, __file__, "--child", variant, str(store.root), session_id, str(spill)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the {variant} run failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cat_seconds(path: Path) -> float:
    with open(os.devnull, "wb") as sink:
        subprocess.run(["cat", str(path)], stdout=sink, check=True)  # warm the page cache
        started = time.perf_counter()
        subprocess.run(["cat", str(path)], stdout=sink, check=True)
    return time.perf_counter() - started


# -- report -----------------------------------------------------------------------------------------
def _line(name: str, result: dict[str, Any]) -> str:
    return (f"  {name:<9} {result['wall']:7.2f} s (CPU {result['cpu']:6.2f} s)   "
            f"peak RSS growth {result['growth'] / 2**20:8.1f} MB   "
            f"spill file {result['spill'] / 2**20:8.2f} MB")


def bench(kind: str, size_mb: int, old: bool) -> bool:
    store, session_id = _store(kind, size_mb)
    path = store.log_path(session_id)
    log_mb = path.stat().st_size / 2**20
    cat = cat_seconds(path)
    ours = measure("ours", store, session_id)
    title = "chat-heavy session" if kind == "chat" else "session with one huge message"
    print(f"prepare() of a reference to a {log_mb:.0f} MB {title} (budget {DEFAULT_MAX_REFERENCE_BYTES} bytes):")
    print(_line("ours", ours))
    cap = DEFAULT_MAX_SPILL_BYTES + 1024
    ok = bool(ours["growth"] <= GOAL_GROWTH_MB * 2**20 and ours["spill"] <= cap)
    if old:
        before = measure("old", store, session_id)
        print(_line("old path", before))
        print(f"  old/ours: time {before['wall'] / ours['wall']:.1f}x, memory "
              f"{before['growth'] / max(ours['growth'], 1):.1f}x, "
              f"spill {before['spill'] / max(ours['spill'], 1):.0f}x")
    print(f"  cat       {cat:7.2f} s   (ours / cat = {ours['wall'] / cat:.1f}x; "
          "a loaded machine inflates wall times)")
    if not ours["exact_peak"]:
        print("  (peak counter could not be reset: growth includes the interpreter's start-up peak)")
    print(f"  goals: peak RSS growth <= {GOAL_GROWTH_MB} MB, spill <= {cap / 2**20:.2f} MB: "
          f"{'met' if ok else 'NOT met'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the chat-heavy log")
    parser.add_argument("--message-mb", type=int, default=30,
                        help="size of the single huge message (one event line may hold at most 32 MiB)")
    parser.add_argument("--old-big", action="store_true", help="also run the old path on the chat log (GBs of RAM)")
    parser.add_argument("--child", nargs=4, metavar=("VARIANT", "ROOT", "SESSION", "SPILL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    ok = bench("chat", args.size_mb, args.old_big)
    ok = bench("message", args.message_mb, True) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
