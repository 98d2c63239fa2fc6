"""The fold cache (catalog/folds.py): reads that skip unchanged logs, and never answer differently from a full scan.

Every case changes a real log between reads (append, compaction, same-size rewrite with the old mtime, rename
over, truncate and regrow, torn and crash tails) and compares the cached read with a fresh full scan.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from catalog_helpers import add_turn, append_turns, make_session

from dsh_jupyter.catalog import Catalog
from dsh_jupyter.catalog.folds import FoldCache
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver
from dsh_jupyter.references.projection import PROJECTION_SKIPS
from dsh_jupyter.session import SessionLog, SessionNotFoundError, SurfaceSnapshot
from dsh_jupyter.session.messages import text_block, user_message
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.scan import STREAM_SURFACE

SKIPS = frozenset(PROJECTION_SKIPS)


def fresh(store: JsonlStore, session_id: str, skip: frozenset[str] = SKIPS) -> SurfaceSnapshot:
    return store.read_surface(session_id, skip_data=skip)


def same(a: SurfaceSnapshot, b: SurfaceSnapshot) -> None:
    assert a.header == b.header
    assert a.captured_through_seq == b.captured_through_seq
    assert list(a.events) == list(b.events)


def check(cache: FoldCache, store: JsonlStore, session_id: str, skip: frozenset[str] = SKIPS) -> SurfaceSnapshot:
    got = cache.read_surface(store, session_id, skip_data=skip)
    same(got, fresh(store, session_id, skip))
    return got


def new_cache(**options: int) -> FoldCache:
    """A cache that trusts logs written a moment ago (the tests write and read within one file-time tick; the
    racy rule has its own test)."""
    return FoldCache(racy_ns=0, **options)


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "sessions")


def test_unchanged_log_is_not_scanned_again(store: JsonlStore) -> None:
    make_session(store, "s1", turns=3, title="first")
    cache = new_cache()
    check(cache, store, "s1")
    assert (cache.stats.full, cache.stats.unchanged) == (1, 0)
    snap = check(cache, store, "s1")
    assert (cache.stats.full, cache.stats.unchanged) == (1, 1)
    texts = [e.data["content"][0]["text"] for e in snap.events if e.type == "user/message"]
    assert texts == ["prompt 1", "prompt 2", "prompt 3"]


def test_appended_log_scans_only_the_new_part(store: JsonlStore) -> None:
    make_session(store, "s1", turns=2)
    cache = new_cache()
    check(cache, store, "s1")
    append_turns(store, "s1", 2, prompt="later prompt")
    snap = check(cache, store, "s1")
    assert cache.stats.appended == 1 and cache.stats.full == 1
    assert [e.data["content"][0]["text"] for e in snap.events if e.type == "user/message"][-1] == (
        "later prompt")
    check(cache, store, "s1")
    assert cache.stats.unchanged == 1


def test_compaction_appended_after_the_cached_read(store: JsonlStore) -> None:
    from store_helpers import compact

    make_session(store, "s1", turns=3)
    cache = new_cache()
    check(cache, store, "s1")
    log, writer = store.open("s1")
    with writer:
        compact(log, None, "the summary", first=0, last=-2)
        add_turn(log, 4, prompt="after compaction")
    snap = check(cache, store, "s1")
    assert cache.stats.appended == 1
    assert "the summary" in str(snap.events[0].data)


def test_same_size_rewrite_with_old_mtime_is_read_afresh(store: JsonlStore) -> None:
    make_session(store, "s1", turns=2, prompt="original prompt")
    path = store.log_path("s1")
    cache = new_cache()
    check(cache, store, "s1")
    before = os.stat(path)
    data = path.read_bytes()
    path.write_bytes(data.replace(b"original prompt", b"replaced prompt"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    snap = check(cache, store, "s1")
    assert cache.stats.unchanged == 0
    assert "replaced prompt" in str(snap.events[0].data)


def test_rename_over_is_read_afresh(store: JsonlStore, tmp_path: Path) -> None:
    make_session(store, "s1", turns=2, prompt="old file")
    other = JsonlStore(tmp_path / "other")
    make_session(other, "s1", turns=3, prompt="new file")
    cache = new_cache()
    check(cache, store, "s1")
    os.replace(other.log_path("s1"), store.log_path("s1"))
    snap = check(cache, store, "s1")
    assert cache.stats.full == 2 and cache.stats.appended == 0
    assert "new file" in str(snap.events[0].data)


def test_truncate_then_regrow_is_read_afresh(store: JsonlStore, tmp_path: Path) -> None:
    make_session(store, "s1", turns=2, prompt="first life")
    other = JsonlStore(tmp_path / "other")
    make_session(other, "s1", turns=4, prompt="second life")
    path = store.log_path("s1")
    cache = new_cache()
    check(cache, store, "s1")
    ino = os.stat(path).st_ino
    with open(path, "r+b") as fh:  # same inode, cut to nothing, then a longer, different log
        fh.truncate(0)
        fh.write(other.log_path("s1").read_bytes())
    assert os.stat(path).st_ino == ino
    snap = check(cache, store, "s1")
    assert cache.stats.appended == 0
    assert "second life" in str(snap.events[0].data)


def test_truncated_log_is_read_afresh(store: JsonlStore) -> None:
    make_session(store, "s1", turns=3)
    path = store.log_path("s1")
    cache = new_cache()
    check(cache, store, "s1")
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[: len(lines) // 2]) + b"\n")
    check(cache, store, "s1")
    assert cache.stats.unchanged == cache.stats.appended == 0


def test_torn_tail_completed_later(store: JsonlStore) -> None:
    log = make_session(store, "s1", turns=1)
    path = store.log_path("s1")
    extra = SessionLog(log.header, list(log.events))
    extra.append("session/title", {"title": "late", "messageSeqs": [], "source": {"kind": "user"}})
    from dsh_jupyter.store.jsonl import encode_event

    line = encode_event(extra.events[-1], extra.events[-1].seq)
    with open(path, "ab") as fh:
        fh.write(line[: len(line) // 2])
    cache = new_cache()
    check(cache, store, "s1")
    with open(path, "ab") as fh:
        fh.write(line[len(line) // 2 :])
    snap = check(cache, store, "s1")
    assert cache.stats.appended == 1
    assert snap.captured_through_seq == extra.events[-1].seq


def test_crash_tail_is_never_cached(store: JsonlStore) -> None:
    make_session(store, "s1", turns=1)
    path = store.log_path("s1")
    with open(path, "ab") as fh:
        fh.write(b'{"not": "an event"}\n')
    cache = new_cache()
    check(cache, store, "s1")
    check(cache, store, "s1")
    assert cache.stats.full == 2 and len(cache) == 0


def test_wrong_entry_costs_a_rescan_not_a_wrong_answer(store: JsonlStore) -> None:
    make_session(store, "s1", turns=2)
    cache = new_cache()
    check(cache, store, "s1")
    ((_key, entry),) = cache._entries.items()
    # Corrupt the saved offsets: every surviving line now points one byte into its neighbour.
    broken = {seq: (off + 1, length, no) for seq, (off, length, no) in entry.state.locations.items()}
    entry.state.locations.clear()
    entry.state.locations.update(broken)
    entry.state.skipped.clear()
    entry.decoded.clear()
    check(cache, store, "s1")
    assert cache.stats.full == 2


def test_decoded_events_are_kept_for_small_surfaces_only(store: JsonlStore) -> None:
    make_session(store, "s1", turns=2)
    cache = new_cache()
    first = check(cache, store, "s1")
    again = check(cache, store, "s1")
    assert all(a is b for a, b in zip(first.events, again.events, strict=True))  # not decoded again
    append_turns(store, "s1", 1)
    grown = check(cache, store, "s1")
    assert grown.events[0] is first.events[0] and len(grown.events) > len(first.events)
    lean = new_cache(decoded_cap=0)  # nothing kept decoded: every read decodes the surviving lines afresh
    one = check(lean, store, "s1", SKIPS | {STREAM_SURFACE})
    two = check(lean, store, "s1", SKIPS | {STREAM_SURFACE})
    assert lean.stats.unchanged == 1 and not isinstance(two.events, list)
    assert list(one.events) == list(two.events)
    assert not any(a is b for a, b in zip(one.events, two.events, strict=True) if a.data is not None)


def test_skip_sets_and_streaming(store: JsonlStore) -> None:
    make_session(store, "s1", turns=2)
    cache = new_cache()
    check(cache, store, "s1", frozenset())
    check(cache, store, "s1", SKIPS)
    assert cache.stats.full == 2  # a fold kept for one skip set never answers for another
    streamed = cache.read_surface(store, "s1", skip_data=SKIPS | {STREAM_SURFACE})
    assert cache.stats.unchanged == 1  # streaming reuses the fold of the same skip set
    same(streamed, fresh(store, "s1"))
    append_turns(store, "s1", 1)
    same(cache.read_surface(store, "s1", skip_data=SKIPS | {STREAM_SURFACE}), fresh(store, "s1"))
    assert cache.stats.appended == 1


def test_missing_log_and_bounded_entries(store: JsonlStore) -> None:
    cache = new_cache(max_entries=2)
    with pytest.raises(SessionNotFoundError):
        cache.read_surface(store, "nope")
    for name in ("a", "b", "c"):
        make_session(store, name)
        check(cache, store, name)
    assert len(cache) == 2


def test_catalog_prepare_reuses_folds_and_stays_exact(store: JsonlStore, tmp_path: Path) -> None:
    make_session(store, "src", turns=2, prompt="source prompt")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.folds.racy_ns = 0
    try:
        catalog.ensure_store(store.root, budget=None)
        query = SessionQuery(store)
        resolver = SessionReferenceResolver(query, catalog=catalog)
        target = ReferenceTarget("target", "/work/a", None)

        def prepared() -> str:
            result = resolver.prepare_sync(target, [text_block("go")], [{"sessionId": "src"}])
            context = dict(result.additional_context or {})
            context.pop("id", None)  # a new message id each time
            return str(context)

        first = prepared()
        assert (catalog.folds.stats.full, catalog.folds.stats.unchanged) == (1, 1)  # the indexer's fold, reused
        assert prepared() == first
        assert catalog.folds.stats.unchanged == 2
        log, writer = store.open("src")
        with writer:
            log.append("turn/start", {"turn": 3})
            log.append("user/message", user_message("appended prompt"))
        third = prepared()
        assert catalog.folds.stats.appended == 1
        assert "appended prompt" in third
        catalog.folds.clear()
        assert prepared() == third  # the same answer from a cold cache
    finally:
        catalog.close()


def test_indexing_leaves_the_fold_for_the_first_reference(store: JsonlStore, tmp_path: Path) -> None:
    make_session(store, "src", turns=2)
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.folds.racy_ns = 0
    try:
        catalog.ensure_store(store.root, budget=None)
        assert catalog.folds.stats.full == 1
        got = catalog.read_surface(SessionQuery(store), "src", skip_data=SKIPS | {STREAM_SURFACE})
        assert catalog.folds.stats.unchanged == 1
        same(got, fresh(store, "src"))
        append_turns(store, "src", 1)
        catalog.sync(budget=None)  # the indexer continues incrementally; the reference then reads the new part
        same(catalog.read_surface(SessionQuery(store), "src", skip_data=SKIPS), fresh(store, "src"))
    finally:
        catalog.close()


def test_a_log_read_right_after_a_change_is_not_trusted_as_unchanged(store: JsonlStore) -> None:
    import time

    make_session(store, "s1")
    cache = FoldCache(racy_ns=10**12)  # every read is "right after a change"
    check(cache, store, "s1")
    check(cache, store, "s1")
    assert (cache.stats.full, cache.stats.unchanged) == (2, 0)
    calm = FoldCache(racy_ns=20_000_000)
    time.sleep(0.05)
    check(calm, store, "s1")
    check(calm, store, "s1")
    assert (calm.stats.full, calm.stats.unchanged) == (1, 1)
