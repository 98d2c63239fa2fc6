"""Background indexing: the same caps and the same memory of failed logs as indexing in the foreground."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_helpers import chat_session, make_session, record_full_reads

from dsh_jupyter.catalog import Catalog, core
from dsh_jupyter.store import JsonlStore

GOOD = ["good-1", "good-2"]


def test_background_indexing_caps_text_and_never_retries_a_failing_log(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    reads = record_full_reads(monkeypatch)
    store = JsonlStore(tmp_path / "s")
    for n, sid in enumerate(GOOD):
        make_session(store, sid, created_at=1_787_000_000_000 + n, prompt="about parquet")
    chat_session(store, "big-chat", turns=20, size=20_000)
    make_session(store, "bad")
    bad = store.log_path("bad")
    bad.write_bytes(b"[" * 100_000 + b"\n" + bad.read_bytes().split(b"\n", 1)[1])
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=True, sweep_interval=0.0,
                      fallback_budget=30.0, body_cap=32 * 1024)
    try:
        catalog.register_store(store.root)  # known, not indexed: the first query hands it to the background
        first = catalog.candidates("t", None, "")
        assert {"big-chat", *GOOD} <= {e.session_id for e in first}
        assert catalog.wait_idle(60)
        for _ in range(4):  # every query may start a sweep (interval 0): the failing log is not read again
            found = catalog.candidates("t", None, "")
            assert sorted(e.session_id for e in found) == sorted(["big-chat", *GOOD])
            assert catalog.wait_idle(60)
        assert [folder for folder, _ in reads].count("bad") == 1
        assert catalog.lookup("big-chat")[0].body_truncated
        assert catalog.candidates("t", None, "omegaword", body=True) == []
        assert [e.session_id for e in catalog.candidates("t", None, "alphaword", body=True)] == ["big-chat"]
        assert catalog.stats()["failedLogs"] == 1
    finally:
        catalog.close()


def test_a_huge_new_log_is_left_to_the_background_by_a_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = record_full_reads(monkeypatch)
    monkeypatch.setattr(core, "FOREGROUND_READ_BYTES", 100_000)
    store = JsonlStore(tmp_path / "s")
    make_session(store, "small")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=True, fallback_budget=30.0)
    try:
        catalog.ensure_store(store.root, budget=None)
        assert catalog.wait_idle(60)
        chat_session(store, "huge", turns=8, size=20_000)  # ~330 kB: more than a query may read
        make_session(store, "new-small")
        found = {e.session_id for e in catalog.candidates("t", None, "")}
        assert {"small", "new-small"} <= found
        assert catalog.wait_idle(60)
        assert {e.session_id for e in catalog.candidates("t", None, "")} == {"small", "new-small", "huge"}
        assert [thread for folder, thread in reads if folder == "huge"] == ["dsh-catalog-indexer"]
    finally:
        catalog.close()


def test_a_host_flushing_a_huge_session_hands_the_read_to_the_background(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    reads = record_full_reads(monkeypatch)
    monkeypatch.setattr(core, "FOREGROUND_READ_BYTES", 100_000)
    store = JsonlStore(tmp_path / "s")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=True, fallback_budget=30.0)
    try:
        catalog.ensure_store(store.root, budget=None)
        chat_session(store, "huge", turns=8, size=20_000)
        catalog.register_session(store.root, "huge", notebook="n.ipynb")
        assert catalog.wait_idle(60)
        assert [thread for _, thread in reads] == ["dsh-catalog-indexer"]
        assert catalog.lookup("huge")[0].notebook == "n.ipynb"
    finally:
        catalog.close()
