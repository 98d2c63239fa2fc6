"""``dsh-jupyter sessions locate ID`` at 10,000 sessions: the direct lookup beside the old ways, in one run.

Run from the repository root::

    .venv/bin/python benchmarks/bench_locate.py [--sessions 10000] [--lookups 200]

The direct lookup encodes the id to its folder and reads that one header. Measured beside it, in the same
process and store: the old command path (bring the catalog up to date with the store, which lists the store
and stats every log, then resolve the id in the catalog), and reading every header of the store
(``JsonlStore.list_headers``), which is what ``locate`` cost before the catalog. The store is generated once
under ``benchmarks/.data/`` (git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from dsh_jupyter._json import dumpb  # noqa: E402
from dsh_jupyter.session import SessionHeader  # noqa: E402
from dsh_jupyter.session.messages import user_message  # noqa: E402
from dsh_jupyter.store import JsonlStore  # noqa: E402
from dsh_jupyter.store.paths import session_folder_name  # noqa: E402

DATA = REPO / "benchmarks" / ".data"
GENERATOR_VERSION = 1
GOAL_P50 = 0.005  # seconds: a direct lookup is a stat and one short read
BASE_TIME = 1_787_130_725_417


def generate(root: Path, sessions: int) -> None:
    """``sessions`` small closed sessions (header, one turn) written as the JSONL writer lays them out."""
    marker = root.parent / f"locate-{sessions}.json"
    if marker.exists() and json.loads(marker.read_text()).get("version") == GENERATOR_VERSION:
        return
    started = time.monotonic()
    for index in range(sessions):
        session_id = f"loc-{index:06d}-{random.Random(index).getrandbits(48):012x}"
        header = SessionHeader(session_id, BASE_TIME + index, f"/work/project-{index % 40}")
        folder = root / session_folder_name(session_id)
        folder.mkdir(parents=True, exist_ok=True)
        lines = [dumpb(header.to_json())]
        for seq, (kind, data) in enumerate((
                ("turn/start", {"turn": 1}),
                ("user/message", user_message(f"question {index}")),
                ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}))):
            record = {"type": kind, "seq": seq, "time": BASE_TIME + index, "data": data}
            if kind == "user/message":
                record["surfaceOp"] = "append"
            lines.append(dumpb(record))
        (folder / "session.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    marker.write_text(json.dumps({"version": GENERATOR_VERSION, "sessions": sessions,
                                  "seconds": round(time.monotonic() - started, 1)}))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def timed(runs: int, action: Callable[[int], None]) -> list[float]:
    times = []
    for run in range(runs):
        started = time.perf_counter()
        action(run)
        times.append(time.perf_counter() - started)
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=200, help="direct lookups to time")
    parser.add_argument("--baseline-lookups", type=int, default=15, help="lookups the old ways (each is slow)")
    options = parser.parse_args()

    root = DATA / f"locate-{options.sessions}" / ".dsh" / "sessions"
    generate(root, options.sessions)
    store = JsonlStore(root)
    ids = sorted(entry.name for entry in os.scandir(root))  # the folder names are the ids here
    rng = random.Random(7)
    wanted = [rng.choice(ids) for _ in range(max(options.lookups, options.baseline_lookups))]

    home = tempfile.mkdtemp(prefix="dsh-bench-locate-")
    os.environ["DSH_HOME"] = home
    from dsh_jupyter.catalog import Catalog
    from dsh_jupyter.cli import main as cli_main
    from dsh_jupyter.cli.scope import resolve, scope
    from dsh_jupyter.cli.sessions import cmd_locate

    # The old command: every locate first synced the catalog with the store (one listing, a stat per log),
    # then resolved the id there. The catalog is indexed once beforehand, as it is after the first command.
    catalog = Catalog(background=False)
    args = argparse.Namespace(store=str(root), all=False, json=False)
    started = time.perf_counter()
    scope(catalog, args)
    first_index = time.perf_counter() - started

    def direct(run: int) -> None:
        out = io.StringIO()
        args.session = wanted[run]
        assert cmd_locate(catalog, args, out) == 0
        assert out.getvalue() == f"{store.log_path(wanted[run])}\n"

    def whole_command(run: int) -> None:
        out = io.StringIO()
        assert cli_main(["sessions", "locate", wanted[run], "--store", str(root)], out=out) == 0

    def old_catalog(run: int) -> None:
        entry = resolve(catalog, wanted[run], scope(catalog, args))
        assert entry.session_id == wanted[run]

    def every_header(run: int) -> None:
        assert any(h.id == wanted[run] for h in store.list_headers())

    new = timed(options.lookups, direct)
    command = timed(options.lookups, whole_command)
    old = timed(options.baseline_lookups, old_catalog)
    scan = timed(options.baseline_lookups, every_header)
    catalog.close()

    p50, p95 = percentile(new, 0.5), percentile(new, 0.95)
    old_p50, scan_p50 = percentile(old, 0.5), percentile(scan, 0.5)
    print(f"store: {options.sessions:,} sessions under {root}")
    print(f"catalog indexing of the store (once, before the old path) {ms(first_index)}")
    verdict = "OK" if p50 <= GOAL_P50 else "MISSED"
    print(f"locate by id, direct lookup   p50 {ms(p50)}  p95 {ms(p95)}  goal p50 ≤ {GOAL_P50 * 1000:.0f} ms "
          f"{verdict}  ({options.lookups} lookups of the locate command)")
    from benchmarks._summary import goal

    ok = goal("bench_locate", "locate by id, p50", ms(p50).strip(), f"<= {GOAL_P50 * 1000:.0f} ms",
              f"old path {ms(old_p50).strip()}", p50 <= GOAL_P50)
    print(f"  the same through main()     p50 {ms(percentile(command, 0.5))}  (adds argument parsing and opening the "
          "catalog object; a new process adds the interpreter start)")
    print(f"old: catalog sync + resolve   p50 {ms(old_p50)}  → direct is {old_p50 / p50:,.0f}× faster "
          f"({options.baseline_lookups} lookups)")
    print(f"old: read every header        p50 {ms(scan_p50)}  → direct is {scan_p50 / p50:,.0f}× faster "
          f"({options.baseline_lookups} lookups)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
