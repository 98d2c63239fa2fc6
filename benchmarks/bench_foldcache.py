"""Benchmark: prepare() of three ~100 MB sources with a warm fold cache and a cold one, beside ``cat``.

Run: ``.venv/bin/python benchmarks/bench_foldcache.py`` (add ``--size-mb N`` for smaller sources).

The sources are bench_references.py's (mostly tool output, two of them compacted near the end), read
through the session catalog as a notebook does (``SessionReferenceResolver(query, catalog=...)``):

* cold: the catalog's fold cache is emptied before each run, so every log is scanned in full;
* warm: the logs have not changed since the last run, so only the lines that survive the fold are decoded;
* ``cat`` of the same three files to /dev/null, in the same run, with the page cache warm for all.

Goal: warm ≤ 4× the ``cat`` time. The split beside it times the reads alone (``catalog.read_surface`` of the
three sources, every surface event reached, as prepare() reads them): what is left of a warm prepare() is
the projection, bounding and framing of the references (references/bounded.py), which no cache of reads
can remove.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_references import CWD, SOURCES, big_store  # noqa: E402

from dsh_jupyter.catalog import Catalog  # noqa: E402
from dsh_jupyter.query import SessionQuery  # noqa: E402
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver  # noqa: E402
from dsh_jupyter.references.projection import PROJECTION_SKIPS  # noqa: E402
from dsh_jupyter.store.scan import STREAM_SURFACE  # noqa: E402

REPEATS = 5


def timed(fn, repeats: int = REPEATS) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=100)
    args = parser.parse_args()
    store = big_store(args.size_mb)
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

            def prepare() -> None:
                prepared = resolver.prepare_sync(target, [], refs)
                assert prepared.additional_context is not None

            def cold() -> None:
                catalog.folds.clear()
                prepare()

            query = SessionQuery(store)
            skip = PROJECTION_SKIPS | {STREAM_SURFACE}

            def reads() -> None:
                for session_id in SOURCES:
                    for _ in catalog.read_surface(query, session_id, skip_data=skip).events:
                        pass

            def cold_reads() -> None:
                catalog.folds.clear()
                reads()

            cat = timed(lambda: subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL, check=True))
            cold_t = timed(cold)
            prepare()
            before = catalog.folds.stats.unchanged
            warm_t = timed(prepare)
            assert catalog.folds.stats.unchanged - before == REPEATS * len(SOURCES), "warm runs were not served warm"
            cold_r = timed(cold_reads)
            reads()
            warm_r = timed(reads)
        finally:
            catalog.close()
    cat_m, cold_m, warm_m, cold_rm, warm_rm = (statistics.median(t) for t in (cat, cold_t, warm_t, cold_r, warm_r))
    print(f"prepare() through the catalog: 3 sources of {', '.join(f'{s:.0f}' for s in sizes)} MB "
          f"(medians of {REPEATS})")
    print(f"  cat of the 3 files   {cat_m:.3f} s")
    print(f"  cold (full scans)    {cold_m:.3f} s  = {cold_m / cat_m:.1f}x cat")
    print(f"  warm (fold cache)    {warm_m:.3f} s  = {warm_m / cat_m:.1f}x cat   (goal: <= 4x cat)")
    print(f"  warm vs cold: {cold_m / warm_m:.1f}x faster")
    print(f"  split, reads alone:  cold {cold_rm:.3f} s = {cold_rm / cat_m:.1f}x cat; warm {warm_rm:.3f} s = "
          f"{warm_rm / cat_m:.2f}x cat; the rest of a warm prepare() is projection and bounding")


if __name__ == "__main__":
    main()
