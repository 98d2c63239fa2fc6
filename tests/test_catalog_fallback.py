"""The scanning fallback: the reference's rules read straight from the logs, bounded in time."""

from __future__ import annotations

import threading
from pathlib import Path

from catalog_helpers import BASE, generate_stores, make_session, scanned

from dsh_jupyter.catalog.fallback import ScanSource, deadline_in, scan_candidates
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.store import JsonlStore


def as_json(entries: list, target_cwd: str | None) -> list[dict]:
    out = []
    for e in entries:
        record = {"sessionId": e.session_id, "label": e.label}
        if e.cwd is not None:
            record["cwd"] = e.cwd
        record["sameWorkspace"] = e.cwd is not None and e.cwd == target_cwd
        record["createdAt"] = e.created_at
        out.append(record)
    return out


def test_a_full_scan_matches_the_scanning_path(tmp_path: Path) -> None:
    store = generate_stores(tmp_path, stores=1, sessions=15)[0]
    for cwd in ("/work/a", None):
        target = ReferenceTarget("t", cwd)
        for text in ("", "title", "s0", "zzz"):
            outcome = scan_candidates([ScanSource(str(store.root))], "t", cwd, text.lower(), 5)
            assert outcome.complete
            assert as_json(outcome.entries, cwd) == scanned([store], target, text, 5)


def test_folders_and_exclusions_narrow_the_scan(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    for i in range(4):
        make_session(store, f"s{i}", created_at=BASE + i)
    only = frozenset({store.folder("s1").name, store.folder("s2").name})
    outcome = scan_candidates([ScanSource(str(store.root), only)], "s2", None, "", 10, exclude=frozenset({"s3"}))
    assert [e.session_id for e in outcome.entries] == ["s1"] and not outcome.entries[0].indexed


def test_a_passed_deadline_or_a_cancel_stops_with_what_was_found(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    for i in range(3):
        make_session(store, f"s{i}", created_at=BASE + i)
    late = scan_candidates([ScanSource(str(store.root))], "t", None, "", 10, deadline=deadline_in(0))
    assert not late.complete and late.entries == []
    cancel = threading.Event()
    cancel.set()
    stopped = scan_candidates([ScanSource(str(store.root))], "t", None, "", 10, cancel=cancel)
    assert not stopped.complete
    assert deadline_in(None) is None


def test_missing_stores_and_unreadable_logs_are_skipped(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "good")
    (store.root / "broken").mkdir()
    (store.root / "broken" / "session.jsonl").write_bytes(b"garbage\n")
    (store.root / "stray-file").write_text("x")
    outcome = scan_candidates([ScanSource(str(tmp_path / "missing")), ScanSource(str(store.root))], "t", None,
                              "", 10)
    assert [e.session_id for e in outcome.entries] == ["good"] and outcome.complete


def test_a_log_nested_too_deep_to_decode_is_skipped(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "good", title="kept")
    make_session(store, "deep")
    path = store.log_path("deep")
    path.write_bytes(b"[" * 100_000 + b"\n" + path.read_bytes().split(b"\n", 1)[1])
    outcome = scan_candidates([ScanSource(str(store.root))], "t", None, "", 10)
    assert [e.session_id for e in outcome.entries] == ["good"] and outcome.complete
