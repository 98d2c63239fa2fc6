"""Benchmark: prepare() of three ~100 MB sources with a warm fold cache and a cold one, beside ``cat``.

Run: ``.venv/bin/python benchmarks/bench_foldcache.py`` (add ``--size-mb N`` for smaller sources).

Two shapes of source, each three logs read through the session catalog as a notebook does
(``SessionReferenceResolver(query, catalog=...)``):

* ``tool-heavy``: bench_references.py's logs (mostly tool output, two of them compacted near the end);
* ``session-shaped``: ``_session_logs.write_session_log`` (a compaction every 12 MiB, reasoning blocks, tool
  results, 80-120 kB streamed answers): the conversation after the latest checkpoint is large, so every
  reference is cut and its full snapshot (several MB) is spilled.

Figures, all in the same run with the page cache warm:

* ``cat`` of the three files to /dev/null;
* cold: prepare() as a kernel's first one for these sources: the catalog's fold cache, the held projections and
  the remembered spills are all emptied before each run (and each run spills into an empty folder, as a new
  session's is), so every log is scanned in full, its surviving lines decoded and projected, and its full
  snapshot written. The emptying is done before the timer starts: freeing what the run before left held is not
  the work of a kernel's first prepare() (it was 2.3 ms of the session-shaped figure, 12.5 ms of the tool-heavy);
* cold fold, projection held (information): only the fold cache is emptied, as when a log's fold was evicted while
  its projection is still held: every log is scanned in full, but nothing is decoded, projected or written (the
  figure this benchmark published as "cold" until 2026-12-07, which is not the cold the goal is about);
* warm (after): the logs have not changed since the last run: the fold cache vouches for them, so their bounded
  projections are used again and their spilled files named again instead of written (references/reuse.py);
* warm, nothing reused (before): the same with both registries turned off, as prepare() was before them: the
  surviving lines come from the fold cache, but every call projects every message and renders and writes its
  full snapshots again (the baseline, measured in the same run);
* reads alone: ``catalog.read_surface`` of the three sources with every surface event reached (what a warm
  prepare() no longer does);
* three floors for the cold figure, in CPU seconds: the line-pass floor (store/scan.py's block reader finding every
  line of the three files and doing nothing with them), the typed floor (:func:`typed_floor`: every line's type
  and seq matched, packed rows counted and log-only lines checked to be JSON, as the damaged-line rules need,
  with no fold and no decode) and the surviving-line decode (decoding only the lines that survive the fold, found
  beforehand). A cold prepare() must scan and decode, so the typed floor plus the surviving-line decode is the
  least a line-by-line Python reader keeping those rules can cost; the fold-only variant, which decodes nothing,
  has the typed floor alone.

Goals: warm <= 2x ``cat`` on both shapes; cold <= 4x ``cat`` on the session-shaped logs, in CPU seconds on both
sides (the wall time of a cold run on a shared machine measures the other jobs and the disk's queue; it is printed
too), with the cold surface reads alone (store/scan.py, no cache) beside it. The 4x is issue 23's goal for logs
shaped like real sessions. The tool-heavy logs' cold figure is printed as information beside its floors: 96% of
those logs is tool output, beside 66,000 lines of markers and chunk rows, and one of them was never compacted, so
4,344 messages survive; the typed floor and the surviving-line decode alone are 3.6-4.1x ``cat`` there, so 4x would
leave projecting those messages and writing their snapshot almost nothing. Their cold prepare() is held to
bench_references.py's goal (<= 0.5 s of CPU for the three logs).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _session_logs import write_session_log  # noqa: E402
from bench_references import CWD, DATA, SOURCES, big_store  # noqa: E402

from benchmarks._summary import goal  # noqa: E402
from dsh_jupyter._json import loads  # noqa: E402
from dsh_jupyter.catalog import Catalog  # noqa: E402
from dsh_jupyter.query import SessionQuery  # noqa: E402
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver  # noqa: E402
from dsh_jupyter.references.projection import PROJECTION_SKIPS  # noqa: E402
from dsh_jupyter.references.reuse import SavedSpills, WarmProjections  # noqa: E402
from dsh_jupyter.session import events_from_record  # noqa: E402
from dsh_jupyter.session.events import SURFACE_TYPES  # noqa: E402
from dsh_jupyter.store import JsonlStore, scan  # noqa: E402
from dsh_jupyter.store.scan import STREAM_SURFACE, _Lines, fold_lines  # noqa: E402
from dsh_jupyter.store.wellformed import WellFormed  # noqa: E402

REPEATS = 5
NAME = "bench_foldcache"


def cpu_timed(fn, repeats: int = REPEATS, setup=None) -> list[float]:  # type: ignore[no-untyped-def]
    """CPU seconds of each call: this process's threads and the children it waited for (``cat``). ``setup`` runs
    before each call, outside the time (forgetting what the call before left held is not the call's work)."""
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.process_time()
        fn()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        children = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        times.append(time.process_time() - started + children)
    return times


def timed(fn, repeats: int = REPEATS, setup=None) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def session_store(size_mb: int) -> JsonlStore:
    """Three session-shaped logs of about ``size_mb`` MiB each (generated once, regenerated when the generator
    changes)."""
    import hashlib

    version = hashlib.sha256(b"".join((HERE / name).read_bytes()
                                      for name in ("_logs.py", "_session_logs.py"))).hexdigest()[:16]
    store = JsonlStore(DATA / f"foldcache-sessions-{size_mb}mb")
    for index, session_id in enumerate(SOURCES):
        path = store.log_path(session_id)
        marker = path.with_name("generated-by")
        if path.exists() and marker.exists() and marker.read_text() == version:
            continue
        write_session_log(path, size_mb=size_mb, session_id=session_id, cwd=CWD, seed=index)
        marker.write_text(version)
    return store


def line_pass(paths: list[str]) -> None:
    """The line-pass floor: every line of every file found (store/scan.py's block reader), nothing done with it."""
    for path in paths:
        with open(path, "rb") as fh:
            for _ in _Lines(fh, 0):
                pass


_SURFACE_B = frozenset(t.encode() for t in SURFACE_TYPES)


def typed_floor(paths: list[str]) -> None:
    """The typed floor: every line found, its envelope (type and seq) or packed-row prefix matched, a packed row's
    ``dt`` list counted, and each log-only line of up to 64 KiB checked to be JSON; no fold, no bookkeeping, no
    decode. The least a line-by-line reader does that keeps the damaged-line rules exactly (store/scan.py), the
    cold figure's floor once the projection of an unchanged log is held (nothing is decoded then)."""
    check = WellFormed().check
    envelope, packed, members = scan._ENVELOPE.match, scan._PACKED.match, scan._packed_members
    parse_max = scan.PARSE_MAX
    for path in paths:
        with open(path, "rb") as fh:
            for buf, start, end, _ in _Lines(fh, 0):
                small = end - start <= parse_max
                found = envelope(buf, start, end)
                if found is None:
                    row = packed(buf, start, end)
                    if row is not None and members(buf, row.end(), end) and small:
                        check(buf[start:end])
                elif small and found.group(1) not in _SURFACE_B:
                    check(buf[start:end])


def surviving_decode(paths: list[str]) -> Callable[[], None]:
    """Decoding only the lines that survive the fold (found beforehand), each read on its own: what any reader
    must decode. As in prepare(), surviving lines whose data the projection skips (tool results) are not decoded."""
    survivors: list[tuple[str, list[tuple[int, int, int]]]] = []
    for path in paths:
        with open(path, "rb") as fh:
            state = fold_lines(fh, path, skip_data=PROJECTION_SKIPS)
        survivors.append((path, [state.locations[seq] for seq in state.nodes if seq not in state.skipped]))

    def run() -> None:
        for path, where in survivors:
            with open(path, "rb") as fh:
                for offset, length, _line in where:
                    events_from_record(loads(os.pread(fh.fileno(), length, offset)))

    return run


WARM_GOAL = 2.0
COLD_GOAL = 4.0
#: The shapes whose cold prepare() is held to :data:`COLD_GOAL`: issue 23 sets it for logs shaped like real sessions.
#: On the tool-heavy logs it is printed as information beside its floors: they are bench_references.py's logs, whose
#: cold prepare() has that benchmark's goal (<= 0.5 s of CPU), and 4x is the wrong goal for them (see the module
#: notes and docs/benchmarks.md).
COLD_GOAL_SHAPES = frozenset({"session-shaped"})


def bench(shape: str, store: JsonlStore) -> bool:
    paths = [str(store.log_path(s)) for s in SOURCES]
    sizes = [Path(p).stat().st_size / 2**20 for p in paths]
    for path in paths:  # the page cache warm for every variant
        with open(path, "rb") as fh:
            while fh.read(1 << 24):
                pass
    with tempfile.TemporaryDirectory() as home:
        catalog = Catalog(Path(home) / "catalog.sqlite", background=False)
        try:
            resolver = SessionReferenceResolver(SessionQuery(store), catalog=catalog)
            target = ReferenceTarget("bench-target", CWD, Path(home) / "spill")
            refs = [{"sessionId": s} for s in SOURCES]
            spilled: list[int] = []

            def prepare(into: ReferenceTarget = target) -> None:
                prepared = resolver.prepare_sync(into, [], refs)
                assert prepared.additional_context is not None
                spilled[:] = [r.bytes or 0 for r in prepared.spills.values()]

            cold_target: list[ReferenceTarget] = []

            def forget() -> None:  # see the module notes: nothing held, an empty spill folder
                catalog.folds.clear()
                resolver.warm_projections = WarmProjections()
                resolver.saved_spills = SavedSpills()
                folder = Path(tempfile.mkdtemp(dir=home, prefix="cold-"))
                cold_target[:] = [ReferenceTarget("bench-target", CWD, folder)]

            def cold() -> None:
                prepare(cold_target[0])

            query = SessionQuery(store)
            skip = PROJECTION_SKIPS | {STREAM_SURFACE}

            def reads() -> None:
                for session_id in SOURCES:
                    for _ in catalog.read_surface(query, session_id, skip_data=skip).events:
                        pass

            def run_cat() -> None:
                subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL, check=True)

            cat = timed(run_cat)
            cold_t = timed(cold, setup=forget)
            cat_cpu, cold_cpu = cpu_timed(run_cat), cpu_timed(cold, setup=forget)
            prepare()  # the held registries again, for the fold-only variant and the warm runs
            fold_cpu = cpu_timed(prepare, setup=catalog.folds.clear)
            time.sleep(0.1)  # past the fold cache's racy window: the logs were just read, not just written
            prepare()
            before = catalog.folds.stats.unchanged
            warm_t = timed(prepare)
            assert catalog.folds.stats.unchanged - before == REPEATS * len(SOURCES), "warm runs were not served warm"
            files = len(list((Path(home) / "spill").iterdir()))
            resolver.saved_spills = SavedSpills(max_remembered=0)  # as before: every call projects and writes
            resolver.warm_projections = WarmProjections(max_held_text=0)
            rewrite_t = timed(prepare)
            reads()
            warm_r = timed(reads)
            cold_r = cpu_timed(lambda: [store.read_surface(s, skip_data=skip) for s in SOURCES])
            floor_c, decode_c = cpu_timed(lambda: line_pass(paths)), cpu_timed(surviving_decode(paths))
            typed_c = cpu_timed(lambda: typed_floor(paths))
        finally:
            catalog.close()
    cat_m, cold_m, warm_m, rewrite_m, warm_rm, cold_rm, cat_c, cold_c, floor_m, decode_m, typed_m, fold_c = (
        statistics.median(t) for t in (cat, cold_t, warm_t, rewrite_t, warm_r, cold_r, cat_cpu, cold_cpu, floor_c,
                                       decode_c, typed_c, fold_cpu))
    ok = warm_m <= WARM_GOAL * cat_m
    print(f"prepare() through the catalog, {shape}: 3 sources of {', '.join(f'{s:.0f}' for s in sizes)} MB "
          f"(medians of {REPEATS}; {len(spilled)} spilled, {sum(spilled) / 2**20:.1f} MB of full snapshots)")
    print(f"  cat of the 3 files            {cat_m:.3f} s")
    print(f"  cold (full scans)             {cold_m:.3f} s  = {cold_m / cat_m:.1f}x cat (wall; the goal: CPU, below)")
    print(f"  warm, nothing reused (before) {rewrite_m:.3f} s  = {rewrite_m / cat_m:.1f}x cat")
    print(f"  warm, reused (after)          {warm_m:.3f} s  = {warm_m / cat_m:.1f}x cat   "
          f"(goal: <= {WARM_GOAL:.0f}x cat: {'met' if ok else 'NOT met'}; {files} spill files after "
          f"{REPEATS + 1} warm calls)")
    print(f"  reads alone, warm             {warm_rm:.3f} s  = {warm_rm / cat_m:.2f}x cat (every surface event "
          "reached, which a warm prepare() no longer needs)")
    print(f"  cold, CPU seconds             {cold_c:.3f} s  = {cold_c / cat_c:.1f}x cat's {cat_c:.3f} s CPU; the "
          f"surface reads alone {cold_rm:.3f} s ({cold_rm / cat_c:.1f}x)")
    print(f"  cold fold, projection held    {fold_c:.3f} s  = {fold_c / cat_c:.1f}x cat (CPU; information: nothing "
          "decoded, projected or written)")
    print(f"  line-pass floor, CPU          {floor_m:.3f} s  = {floor_m / cat_c:.1f}x cat (one pass over every line of "
          "the 3 files, doing nothing with them)")
    print(f"  surviving-line decode, CPU    {decode_m:.3f} s  = {decode_m / cat_c:.1f}x cat (decoding only the lines "
          "that survive, read one by one)")
    print(f"  typed floor, CPU              {typed_m:.3f} s  = {typed_m / cat_c:.1f}x cat (every line's type and seq "
          "matched, packed rows counted, log-only lines checked; no fold, no decode)")
    goal(NAME, f"warm prepare(), {shape}", f"{warm_m / cat_m:.1f}x cat", f"<= {WARM_GOAL:.0f}x cat",
         f"cat {cat_m:.3f} s, nothing reused {rewrite_m / cat_m:.1f}x", ok)
    # Cold on CPU seconds, both sides (prepare()'s threads and cat's process): the wall time of a cold run on a
    # shared machine measures the neighbours and the disk's queue (printed above).
    floors = (typed_m + decode_m) / cat_c
    cold_x = cold_c / cat_c
    baseline = (f"cat {cat_c:.3f} s CPU, wall {cold_m / cat_m:.1f}x, surface reads alone {cold_rm / cat_c:.1f}x, "
                f"cold fold with the projection held {fold_c / cat_c:.1f}x, line-pass floor {floor_m / cat_c:.1f}x, "
                f"typed floor {typed_m / cat_c:.1f}x, surviving decode {decode_m / cat_c:.1f}x")
    if shape not in COLD_GOAL_SHAPES:
        print(f"  cold prepare(), {shape} (CPU): {cold_x:.1f}x cat, {cold_c / (typed_m + decode_m):.2f}x its floors "
              f"(information, no goal: the typed floor and the surviving-line decode alone are {floors:.1f}x cat "
              f"here, which leaves the projection of every surviving message and the spill "
              f"{max(COLD_GOAL - floors, 0):.1f}x of {COLD_GOAL:.0f}x; these logs' cold prepare() is held to "
              f"bench_references.py's <= 0.5 s; {baseline})")
        return ok
    cold_ok = goal(NAME, f"cold prepare(), {shape} (CPU)", f"{cold_x:.1f}x cat", f"<= {COLD_GOAL:.0f}x cat", baseline,
                   cold_x <= COLD_GOAL)
    return ok and cold_ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=100)
    args = parser.parse_args()
    ok = bench("tool-heavy", big_store(args.size_mb))
    ok = bench("session-shaped", session_store(args.size_mb)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
