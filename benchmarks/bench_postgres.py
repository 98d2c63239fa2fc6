"""Benchmark: the PostgreSQL store beside SQLite, on a local PostgreSQL server started for the run.

Run: ``.venv/bin/python benchmarks/bench_postgres.py`` (``--quick``: 5,000 sessions, a smoke run;
``--sessions N`` to choose). Needs the PostgreSQL server binaries (Debian's ``postgresql``) and psycopg
(``pip install 'dsh-jupyter[postgres]'``); without them it says so and exits 0. The server runs with
PostgreSQL's durable defaults (fsync and synchronous commit on), as the SQLite store runs with
``synchronous = FULL``.

Figures, each beside SQLite's in the same run:

- appends: 8 writer processes at once, each appending realistic turns to its own session with one commit
  (flush) per turn; per-commit p50/p99 and turns per second, PostgreSQL vs the SQLite store (one file);
- candidates over N sessions (default 100,000) in 20 folders: p50/p99 of keystroke-like queries (empty,
  growing prefixes of a title word, an id prefix, a folder name, no match), limit 50, through
  ``list_candidates`` with the PostgreSQL catalog as source, vs the SQLite session catalog indexing the
  same sessions as JSONL logs;
- body search p50 (a number one prompt holds, a common word, a prefix, two words), same comparison.

The N sessions are loaded into PostgreSQL with COPY, each row computed by the writer's own functions
(the same header, match fields and body words a flush writes); the JSONL logs for the SQLite catalog are
generated with ``bench_catalog.prefix`` and indexed by the catalog's own sync. Goals: candidates p50
≤ 10 ms, body search p50 ≤ 50 ms, reported through :func:`benchmarks._summary.goal` (the run exits 1 when
one misses).

The JSONL logs and the SQLite catalog indexing them are kept under ``benchmarks/.data/postgres-<N>/``
(git-ignored) and reused: a later run's sync finds every log unchanged instead of indexing 100,000 of them
again (about 95 s). PostgreSQL's own copy is loaded afresh each run (its server lives for the run only).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(HERE))

from benchmarks._summary import goal  # noqa: E402
from benchmarks.bench_catalog import ms, percentile, prefix, vocabulary, zipf_words  # noqa: E402

NAME = "bench_postgres"
DATA = HERE / ".data"
FOLDERS = 20
WRITERS = 8
NOW_MS = 1_790_000_000_000


def line(name: str, value: float, *, sqlite: float | None = None) -> None:
    """A figure without a goal of its own (the goals go through :func:`goal`), beside SQLite's."""
    parts = [f"{name:<40} {ms(value):>11}"]
    if sqlite is not None:
        parts.append(f"SQLite {ms(sqlite)} ({value / sqlite:.2f}× of SQLite)")
    print("  ".join(parts), flush=True)


# ----------------------------------------------------------------------------------------------- appends
def _writer(kind: str, where: str, index: int, turns: int, out: Any) -> None:
    from store_helpers import append_turn, new_header

    from dsh_jupyter.session import SessionLog
    from dsh_jupyter.store import PostgresStore, SqliteStore

    store = PostgresStore(where) if kind == "postgres" else SqliteStore(where)
    header = new_header(f"writer-{index}-{uuid.uuid4().hex[:8]}")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    commits = []
    started = time.perf_counter()
    for turn in range(1, turns + 1):
        append_turn(log, turn, size=4000)
        t0 = time.perf_counter()
        writer.flush()
        commits.append(time.perf_counter() - t0)
    writer.close()
    out.put((commits, time.perf_counter() - started))


def appends(kind: str, where: str, turns: int) -> tuple[list[float], float]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    procs = [context.Process(target=_writer, args=(kind, where, i, turns, queue)) for i in range(WRITERS)]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    wall = time.perf_counter() - started
    return [c for commits, _ in results for c in commits], WRITERS * turns / wall


# ----------------------------------------------------------------------------------------------- data
def sessions_data(count: int, seed: int = 7) -> tuple[list[dict[str, Any]], list[str]]:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    rows = []
    for i in range(count):
        rows.append({
            "id": f"{uuid.UUID(int=rng.getrandbits(128))}",
            "created_at": NOW_MS - rng.randrange(0, 90 * 86_400_000),
            "folder": i % FOLDERS,
            "prompt": f"task {i}: " + " ".join(zipf_words(rng, vocab, 8)),
            "title": " ".join(zipf_words(rng, vocab, rng.randint(2, 5))),
            "answer": " ".join(zipf_words(rng, vocab, 20)),
        })
    return rows, vocab


def write_jsonl(base: Path, rows: list[dict[str, Any]]) -> list[Path]:
    from dsh_jupyter.store.paths import session_folder_name

    roots = [base / f"project{f:02d}" / ".dsh" / "sessions" for f in range(FOLDERS)]
    marker = base / f"generated-{len(rows)}"
    if marker.exists():
        return roots
    shutil.rmtree(base, ignore_errors=True)
    for row in rows:
        cwd = str(base / f"project{row['folder']:02d}")
        folder = roots[row["folder"]] / session_folder_name(row["id"])
        folder.mkdir(parents=True)
        (folder / "session.jsonl").write_bytes(
            prefix(row["id"], row["created_at"], cwd, row["prompt"], row["title"], row["answer"]))
    marker.write_text("ok")
    return roots


def load_postgres(dsn: str, base: Path, rows: list[dict[str, Any]]) -> float:
    """COPY the sessions in, every row made by the writer's own functions; returns seconds."""
    import psycopg

    from dsh_jupyter._json import dumpb, loads
    from dsh_jupyter.session import SessionHeader, SessionLog, event_from_json
    from dsh_jupyter.session.words import body_words, event_texts, match_fields
    from dsh_jupyter.store.jsonl import encode_event
    from dsh_jupyter.store.postgres_schema import ensure_schema
    from dsh_jupyter.store.sql import event_row as row_of
    from dsh_jupyter.store.sql import session_key

    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_schema(conn)
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy("COPY dsh.sessions (key, header, created_at, updated_at, next_seq, types, title, cwd, "
                          "match_id, match_cwd, match_label, words) FROM STDIN") as sessions_copy:
                events_rows: list[tuple[Any, ...]] = []
                for row in rows:
                    cwd = str(base / f"project{row['folder']:02d}")
                    lines = prefix(row["id"], row["created_at"], cwd, row["prompt"], row["title"],
                                   row["answer"]).splitlines()
                    events = [event_from_json(loads(x)) for x in lines[1:]]
                    log = SessionLog(SessionHeader.from_line(lines[0]), events)
                    header, events = log.header, log.events
                    key = session_key(header.id)
                    words = body_words(event_texts(log.surface()))
                    mid, mcwd, mlabel = match_fields(header, row["title"])
                    lexemes = " ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in words)
                    sessions_copy.write_row((key, dumpb(header.to_json()), header.created_at, events[-1].time,
                                             len(events), sorted({e.type for e in events}), row["title"],
                                             header.cwd, mid, mcwd, mlabel, lexemes))
                    events_rows.extend((key, *row_of(e, encode_event(e, e.seq))) for e in events)
            with cur.copy("COPY dsh.events (key, seq, type, op, cited, body) FROM STDIN") as events_copy:
                for event_row in events_rows:
                    events_copy.write_row(event_row)
        conn.execute("ANALYZE dsh.sessions")
        conn.execute("ANALYZE dsh.events")
    return time.perf_counter() - started


# ----------------------------------------------------------------------------------------------- queries
def timed(fn: Any, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 sessions and fewer turns: a smoke run")
    parser.add_argument("--sessions", type=int, default=None, help="sessions for the query figures (100,000)")
    args = parser.parse_args()
    count = args.sessions or (5000 if args.quick else 100_000)
    turns = 10 if args.quick else 40

    try:
        import psycopg  # noqa: F401
    except ImportError:
        print("skipped: psycopg is not installed (pip install 'dsh-jupyter[postgres]')")
        return 0
    from pg_helpers import SUPERUSER, find_bindir, start_server, stop_server

    bindir = find_bindir()
    if bindir is None:
        print("skipped: no PostgreSQL server binaries (apt-get install postgresql)")
        return 0
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            print("skipped: running as root without a 'postgres' OS user to run the server as")
            return 0

    from dsh_jupyter.catalog import Catalog
    from dsh_jupyter.catalog.postgres import PostgresCatalog
    from dsh_jupyter.query import SessionQuery
    from dsh_jupyter.references import ReferenceTarget
    from dsh_jupyter.references.candidates import list_candidates
    from dsh_jupyter.store import JsonlStore, PostgresStore

    server = start_server(bindir, durable=True)
    work = Path(tempfile.mkdtemp(prefix="dsh-bench-pg-"))
    try:
        print(f"PostgreSQL {bindir.parts[-2]} on 127.0.0.1:{server.port} (durable defaults), role {SUPERUSER}")
        # -- appends
        append_db = server.create_database("appends")
        dsn = server.dsn(append_db)
        with PostgresStore(dsn).connection():
            pass  # schema in place before the writers start
        pg_commits, pg_rate = appends("postgres", dsn, turns)
        sq_commits, sq_rate = appends("sqlite", str(work / "appends.sqlite"), turns)
        print(f"\nappends: {WRITERS} writer processes at once, {turns} turns each, one commit per turn:")
        line("  commit p50", statistics.median(pg_commits), sqlite=statistics.median(sq_commits))
        line("  commit p99", percentile(pg_commits, 0.99), sqlite=percentile(sq_commits, 0.99))
        print(f"  turns/s (all writers)                     PostgreSQL {pg_rate:,.0f}  SQLite {sq_rate:,.0f}")

        # -- the data set
        rows, vocab = sessions_data(count)
        base = DATA / f"postgres-{count}"
        t0 = time.perf_counter()
        roots = write_jsonl(base, rows)
        took = time.perf_counter() - t0
        print(f"\ndata: {count} sessions in {FOLDERS} folders (JSONL written/reused in {took:.0f} s)")
        query_db = server.create_database("queries")
        qdsn = server.dsn(query_db)
        loaded = load_postgres(qdsn, base, rows)
        # Queries run as a plain role (no superuser, no BYPASSRLS), so row-level security is paid for.
        server.create_role("bench_user", "bench-user-pw")
        with server.admin(query_db) as conn:
            conn.execute("UPDATE dsh.sessions SET owner = 'bench_user'")
            conn.execute("VACUUM ANALYZE dsh.sessions")
        qdsn = server.dsn(query_db, "bench_user", "bench-user-pw")
        print(f"  PostgreSQL: loaded with COPY in {loaded:.1f} s; queried as the plain role bench_user")
        home = base / "catalog-home"  # kept with the logs it indexes: a later run's sync finds them unchanged
        home.mkdir(exist_ok=True)
        reused = (home / "catalog.sqlite").exists()
        catalog = Catalog(home / "catalog.sqlite", background=False)
        for root in roots:
            catalog.register_store(root)
        t0 = time.perf_counter()
        catalog.sync(budget=None)
        print(f"  SQLite catalog: {'synced (reused)' if reused else 'indexed'} in {time.perf_counter() - t0:.1f} s")
        catalog.close()
        catalog = Catalog(home / "catalog.sqlite")

        cwd = str(base / "project03")
        pg_store = PostgresStore(qdsn)
        pg_source = PostgresCatalog(pg_store)
        pg_query = SessionQuery(pg_store)
        sq_query = SessionQuery(JsonlStore(roots[3]))
        target = ReferenceTarget("\x00bench-target", cwd)
        word = vocab[30]
        texts = ["", word[:1], word[:2], word[:3], word[:4], word, rows[7]["id"][:3], "project07", "task 12",
                 "zzzz-no-such-session"]
        rounds = 20
        for q, source in ((pg_query, pg_source), (sq_query, catalog)):
            list_candidates(q, target, "", 50, source=source)  # warm up
        pg_times: dict[str, list[float]] = {}
        sq_times: dict[str, list[float]] = {}
        for text in texts:
            pg_times[text] = timed(lambda t=text: list_candidates(pg_query, target, t, 50, source=pg_source), rounds)
            sq_times[text] = timed(lambda t=text: list_candidates(sq_query, target, t, 50, source=catalog), rounds)
            pg_ids = [c.session_id for c in list_candidates(pg_query, target, text, 50, source=pg_source)]
            sq_ids = [c.session_id for c in list_candidates(sq_query, target, text, 50, source=catalog)]
            if pg_ids != sq_ids:
                print(f"  note: {text!r}: the two stores ranked differently ({len(pg_ids)} vs {len(sq_ids)})")
        pg_all = [v for vs in pg_times.values() for v in vs]
        sq_all = [v for vs in sq_times.values() for v in vs]
        print(f"\ncandidates over {count} sessions ({len(pg_all)} keystroke queries, limit 50):")
        ok = goal(NAME, f"candidates p50 over {count:,} sessions", ms(statistics.median(pg_all)), "<= 10 ms",
                  f"SQLite catalog {ms(statistics.median(sq_all))}", statistics.median(pg_all) <= 0.010)
        line("  p99", percentile(pg_all, 0.99), sqlite=percentile(sq_all, 0.99))
        for text in texts:
            label = repr(text) if text else "'' (empty)"
            line(f"    p50 {label[:28]}", statistics.median(pg_times[text]),
                 sqlite=statistics.median(sq_times[text]))

        body_texts = [str(min(4242, count - 1)), vocab[5], vocab[40][:3], f"{vocab[8]} {vocab[600]}"]
        pg_body: list[float] = []
        sq_body: list[float] = []
        counts = []
        for text in body_texts:
            pg_body += timed(lambda t=text: list_candidates(pg_query, target, t, 50, source=pg_source, body=True),
                             10)
            sq_body += timed(lambda t=text: list_candidates(sq_query, target, t, 50, source=catalog, body=True), 10)
            counts.append(len(list_candidates(pg_query, target, text, 50, source=pg_source, body=True)))
        print(f"\nbody search over {count} sessions (tsvector of exact folded words, GIN index):")
        ok &= goal(NAME, f"body search p50 over {count:,} sessions", ms(statistics.median(pg_body)), "<= 50 ms",
                   f"SQLite catalog {ms(statistics.median(sq_body))}", statistics.median(pg_body) <= 0.050)
        line("  p99", percentile(pg_body, 0.99), sqlite=percentile(sq_body, 0.99))
        print(f"    queries {body_texts} matched {counts} sessions (limit 50)")
        catalog.close()
        pg_store.close()
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
