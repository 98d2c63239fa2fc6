"""The catalog against the log-scanning path: same candidates, same order, whatever happens to the logs."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from catalog_helpers import (
    BASE,
    QUERIES,
    add_turn,
    append_turns,
    cataloged,
    generate_stores,
    make_session,
    scanned,
    set_title,
    title_event,
)

from dsh_jupyter.catalog import Catalog, CatalogUnavailable, open_catalog
from dsh_jupyter.catalog.core import store_root
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import (
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    ReferenceTarget,
    SessionReferenceError,
    SessionReferenceResolver,
)
from dsh_jupyter.references.candidates import list_candidates
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.store import JsonlStore

TARGETS = [ReferenceTarget("s0-00-x", "/work/a"), ReferenceTarget("nobody", None), ReferenceTarget("t", "/work/1")]


def ids(store: JsonlStore) -> list[str]:
    return sorted(h.id for h in store.list_headers())


def indexed(tmp_path: Path, stores: list[JsonlStore], **kw: object) -> Catalog:
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False, **kw)  # type: ignore[arg-type]
    for store in stores:
        report = catalog.ensure_store(store.root, budget=None)
        assert not report.pending and not report.errors
    return catalog


#: The queries most tests compare (the main equivalence test uses all of ``QUERIES``).
QUICK = ("", "s1", "WORK/A", "title", "数据", "zzz-no-match")


def assert_same(catalog: Catalog, stores: list[JsonlStore], *, live: list[SessionLog] = (), queries=QUICK,
                limits: tuple[int, ...] = (1, 50)) -> None:
    for target in TARGETS:
        for text in queries:
            for limit in limits:
                expected = scanned(stores, target, text, limit, live)
                assert cataloged(catalog, stores, target, text, limit, live) == expected, (target, text, limit)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("catalog-stores")
    generate_stores(base, stores=3, sessions=12)
    return base


@pytest.fixture
def stores(tmp_path: Path, template: Path) -> list[JsonlStore]:
    """Three stores of twelve sessions each (a copy of one generated set: writing them fsyncs every log)."""
    shutil.copytree(template, tmp_path, dirs_exist_ok=True)
    return [JsonlStore(tmp_path / f"folder{s}" / ".dsh" / "sessions") for s in range(3)]


@pytest.mark.parametrize("seed", [1, 2])
def test_same_results_and_order_as_scanning_on_generated_stores(tmp_path: Path, seed: int) -> None:
    stores = generate_stores(tmp_path, stores=3, sessions=14, seed=seed)
    catalog = indexed(tmp_path, stores)
    assert_same(catalog, stores, queries=QUERIES, limits=(1, 2, 4, 7, 50))
    # Every known store is searched: the answer holds sessions of all three.
    found = cataloged(catalog, stores, ReferenceTarget("x", "/work/a"), "", 100)
    assert {c["sessionId"][:2] for c in found} == {"s0", "s1", "s2"}


def test_a_changed_title_is_seen_at_once(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    set_title(stores[1], ids(stores[1])[3], "Brand new Héading")
    set_title(stores[0], ids(stores[0])[5], 42)
    found = cataloged(catalog, stores, TARGETS[0], "brand new hé")
    assert [c["label"] for c in found] == ["Brand new Héading"]
    assert_same(catalog, stores, queries=("", "brand", "title", "s0-05"))


def test_a_cold_session_renamed_behind_the_catalogs_back_is_found_after_a_sweep(tmp_path: Path) -> None:
    """The documented trade-off: only hot rows and returned rows are checked on each query."""
    store = JsonlStore(tmp_path / "s")
    for i in range(6):
        make_session(store, f"cold-{i}", created_at=BASE + i, title=f"old {i}")
    catalog = indexed(tmp_path, [store], hot_window=0.0)
    target = ReferenceTarget("t", "/work/a")
    set_title(store, "cold-0", "zebra")
    # A returned row is always checked: the unfiltered list shows the new label right away.
    labels = {c["sessionId"]: c["label"] for c in cataloged(catalog, [store], target, "", 50)}
    assert labels["cold-0"] == "zebra"
    set_title(store, "cold-1", "giraffe")
    # A row that is neither hot nor returned is not re-read: the new title is not matched yet …
    assert cataloged(catalog, [store], target, "giraffe") == []
    catalog.sync()  # … until the sweep (background, every sweep_interval seconds while queries are made)
    assert [c["sessionId"] for c in cataloged(catalog, [store], target, "giraffe")] == ["cold-1"]
    assert_same(catalog, [store])


def test_deleted_sessions_disappear(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    victims = ids(stores[2])[:3]
    stores[2].delete(victims[0])  # the folder goes
    os.unlink(stores[2].log_path(victims[1]))  # only the log goes
    shutil.rmtree(stores[0].folder(ids(stores[0])[0]))
    found = {c["sessionId"] for c in cataloged(catalog, stores, TARGETS[1], "", 100)}
    assert victims[0] not in found and victims[1] not in found and victims[2] in found
    assert_same(catalog, stores)


def test_a_moved_store_drops_out_and_comes_back_where_it_was_moved_to(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    moved = tmp_path / "elsewhere" / "sessions"
    moved.parent.mkdir()
    shutil.move(str(stores[1].root), str(moved))
    remaining = [stores[0], stores[2]]
    assert_same(catalog, remaining)
    assert not any(c["sessionId"].startswith("s1") for c in cataloged(catalog, remaining, TARGETS[1], "", 100))
    new = JsonlStore(moved)
    catalog.ensure_store(moved, budget=None)  # the kernel or server starts in the new place
    assert_same(catalog, [stores[0], new, stores[2]])
    # Moved back: the old root is found again.
    shutil.move(str(moved), str(stores[1].root))
    catalog.sync()
    assert_same(catalog, stores)


def test_a_new_session_is_seen_without_being_registered(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    make_session(stores[2], "brand-new", cwd="/work/a", created_at=BASE + 10**6, title="fresh one")
    found = cataloged(catalog, stores, TARGETS[0], "", 1)
    assert found[0]["sessionId"] == "brand-new"
    assert_same(catalog, stores)


def test_a_session_folder_whose_log_appears_later_is_picked_up(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "first")
    catalog = indexed(tmp_path, [store])
    later = SessionLog(SessionHeader("later", BASE + 5, "/work/a"))
    store.folder("later").mkdir()  # a writer made its folder but has not flushed yet
    target = ReferenceTarget("t", "/work/a")
    assert [c["sessionId"] for c in cataloged(catalog, [store], target)] == ["first"]
    os.utime(store.root, ns=(1, 1))  # the folder listing is unchanged from now on
    catalog.ensure_store(store.root, budget=None)
    writer = store.create(later.header)
    writer.attach(later)
    add_turn(later, 1)
    writer.close()  # publishes the log inside the existing folder: the store's own mtime does not change
    os.utime(store.root, ns=(1, 1))
    assert [c["sessionId"] for c in cataloged(catalog, [store], target)] == ["later", "first"]


def test_a_session_copied_into_two_stores_is_listed_once(tmp_path: Path, stores: list[JsonlStore]) -> None:
    name = ids(stores[0])[4]
    shutil.copytree(stores[0].folder(name), stores[1].folder(name))
    catalog = indexed(tmp_path, stores)
    append_turns(stores[1], name, 1)  # the copy in store 1 is now the one that changed last
    set_title(stores[1], name, "continued copy")
    assert_same(catalog, stores, queries=("", "continued", name[:6]))
    found = cataloged(catalog, stores, TARGETS[1], "", 100)
    assert [c["sessionId"] for c in found].count(name) == 1


def test_live_sessions_are_read_from_memory(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    name = ids(stores[0])[2]
    stored = stores[0].load(name)
    live = SessionLog(stored.header, stored.events)
    title_event(live, "Unsaved live title")  # not flushed: only the live log has it
    fresh = SessionLog(SessionHeader("live-only", BASE + 99, "/work/a"))
    add_turn(fresh, 1)
    empty = SessionLog(SessionHeader("live-empty", BASE + 98, "/work/a"))  # no events: not listed
    assert_same(catalog, stores, live=[live, fresh, empty], queries=("", "unsaved", "live", "s0"))
    labels = {c["sessionId"]: c["label"] for c in cataloged(catalog, stores, TARGETS[1], "", 100, [live, fresh])}
    assert labels[name] == "Unsaved live title" and "live-only" in labels and "live-empty" not in labels


def test_log_appended_while_indexing(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    for i in range(8):
        make_session(store, f"busy-{i}", created_at=BASE + i, title=f"t{i}")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            log, w = store.open("busy-3")
            with w:
                turn = 2
                while not stop.is_set():
                    add_turn(log, turn, prompt=f"prompt number {turn}")
                    title_event(log, f"Running title {turn}")
                    w.flush()
                    turn += 1
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.monotonic() + 0.8
        rounds = 0
        while time.monotonic() < deadline or rounds < 5:
            catalog.ensure_store(store.root, budget=None)
            for text in ("", "running", "busy"):
                found = cataloged(catalog, [store], ReferenceTarget("t", "/work/a"), text)
                assert all(c["sessionId"].startswith("busy-") for c in found)
            rounds += 1
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert_same(catalog, [store], queries=("", "running", "busy", "t3"))
    row = catalog.lookup("busy-3")[0]
    full = store.load("busy-3")
    assert row.events == len(full) and row.title == full.title()["title"]


def test_incremental_and_full_reads_agree(tmp_path: Path) -> None:
    """A row refreshed incrementally holds what a fresh index of the same log holds."""
    store = JsonlStore(tmp_path / "s")
    make_session(store, "grow", title="one")
    catalog = indexed(tmp_path, [store])
    for turn in range(3):
        append_turns(store, "grow", 1, prompt=f"step {turn} about parquet")
        catalog.session_changed(store.root, "grow")
    set_title(store, "grow", "three")
    catalog.session_changed(store.root, "grow")
    fresh = indexed(tmp_path / "other", [store])
    assert catalog.lookup("grow")[0] == fresh.lookup("grow")[0]
    assert cataloged(catalog, [store], ReferenceTarget("t", None), "parquet", body=True) == \
        cataloged(fresh, [store], ReferenceTarget("t", None), "parquet", body=True) != []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "zeroed-page"])
def test_a_corrupted_catalog_is_rebuilt_without_user_action(tmp_path: Path, stores: list[JsonlStore],
                                                            damage: str) -> None:
    path = tmp_path / "home" / "catalog.sqlite"
    indexed(tmp_path, stores).close()
    data = bytearray(path.read_bytes())
    if damage == "garbage":
        data[:100] = b"not a database at all " * 4 + b"...." * 3
    elif damage == "truncated":
        data = data[: len(data) // 3]
    else:
        for page in range(1, len(data) // 4096):
            data[page * 4096 : page * 4096 + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    catalog = Catalog(path, background=False, fallback_budget=30.0)
    # The first answers come from reading the logs (bounded); the catalog is set aside and rebuilt.
    assert_same(catalog, stores, queries=("", "title"))
    catalog.sync()
    assert catalog.stats()["sessions"] == 36
    assert_same(catalog, stores)
    if damage != "truncated":
        assert Path(str(path) + ".corrupt").exists()


def test_a_missing_catalog_is_rebuilt_from_the_known_stores(tmp_path: Path, stores: list[JsonlStore]) -> None:
    path = tmp_path / "home" / "catalog.sqlite"
    indexed(tmp_path, stores).close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    catalog = Catalog(path, background=True, fallback_budget=30.0)
    assert_same(catalog, stores, queries=("", "pandas"))  # answered while the rebuild runs
    assert catalog.wait_idle(30)
    assert [s.ready for s in catalog.stores()] == [True, True, True]
    assert_same(catalog, stores)
    catalog.close()


def test_a_locked_catalog_never_blocks_a_query_for_long(tmp_path: Path, stores: list[JsonlStore]) -> None:
    path = tmp_path / "home" / "catalog.sqlite"
    indexed(tmp_path, stores).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        catalog = Catalog(path, background=False, fallback_budget=5.0)
        started = time.monotonic()
        assert_same(catalog, stores, queries=("", "title"))
        assert time.monotonic() - started < 20  # 18 queries, each bounded; none waits on the lock for long
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_same(catalog, stores)


def test_a_busy_writer_does_not_stop_refreshed_rows_from_being_used(tmp_path: Path, stores: list[JsonlStore]) -> None:
    path = tmp_path / "home" / "catalog.sqlite"
    catalog = indexed(tmp_path, stores)
    name = ids(stores[0])[0]
    set_title(stores[0], name, "renamed while locked")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process is writing; readers are not blocked (WAL)
    try:
        found = cataloged(catalog, stores, TARGETS[1], "renamed while")
        assert [c["sessionId"] for c in found] == [name]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_same(catalog, stores, queries=("", "renamed"))


TWO_KERNELS = r"""
import sys, time
sys.path.insert(0, {tests!r})
from catalog_helpers import make_session, set_title, add_turn, title_event, BASE
from dsh_jupyter.catalog import Catalog
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.references.candidates import list_candidates
from dsh_jupyter.store import JsonlStore
name, root, shared = sys.argv[1], sys.argv[2], sys.argv[3]
catalog = Catalog({home!r} + "/catalog.sqlite", background=True)
own = JsonlStore(root)
catalog.ensure_store(root)
catalog.ensure_store(shared)
query = SessionQuery(own)
for i in range(12):
    sid = f"{{name}}-{{i}}"
    store = own if i % 2 else JsonlStore(shared)
    make_session(store, sid, cwd="/work/a", created_at=BASE + i, title=f"{{name}} title {{i}}")
    catalog.register_session(store.root, sid, notebook=f"{{name}}.ipynb")
    if i % 3 == 0:
        set_title(store, sid, f"{{name}} renamed {{i}}")
        catalog.session_changed(store.root, sid)
    found = list_candidates(query, ReferenceTarget("x", "/work/a"), name, 50, source=catalog)
    assert any(c.session_id == sid for c in found), (sid, [c.session_id for c in found])
catalog.wait_idle(30)
catalog.close()
print("ok")
"""


def test_two_kernels_writing_and_indexing_at_once(tmp_path: Path) -> None:
    """Two processes create, rename and index sessions in their own and a shared store at the same time."""
    home = tmp_path / "home"
    home.mkdir()
    shared = tmp_path / "shared" / ".dsh" / "sessions"
    shared.mkdir(parents=True)
    roots = [tmp_path / "k1" / ".dsh" / "sessions", tmp_path / "k2" / ".dsh" / "sessions"]
    for root in roots:
        root.mkdir(parents=True)
    code = TWO_KERNELS.format(tests=str(Path(__file__).parent), home=str(home))
    env = {**os.environ, "DSH_HOME": str(home)}
    children = [subprocess.Popen([sys.executable, "-c", code, name, str(root), str(shared)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for name, root in (("k1", roots[0]), ("k2", roots[1]))]
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0 and out.strip() == "ok", err
    stores = [JsonlStore(shared), JsonlStore(roots[0]), JsonlStore(roots[1])]
    catalog = Catalog(home / "catalog.sqlite", background=False)
    assert_same(catalog, stores, queries=("", "k1", "renamed", "title 5"))
    assert catalog.stats()["sessions"] == 24
    assert catalog.lookup("k2-4")[0].notebook == "k2.ipynb"


def test_an_unindexed_store_is_answered_by_a_bounded_scan(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False, fallback_budget=30.0)
    for store in stores:
        catalog.register_store(store.root)  # known, not indexed yet (the background would do it)
    assert_same(catalog, stores, queries=("", "title", "s2"))
    assert catalog.last_query_complete
    hurried = Catalog(tmp_path / "home" / "catalog.sqlite", background=False, fallback_budget=0.0)
    assert cataloged(hurried, stores, TARGETS[0], "") == []
    assert not hurried.last_query_complete


def test_sessions_written_after_their_store_was_found_missing_are_candidates(tmp_path: Path) -> None:
    """A server starts in a folder without sessions (its store is registered and found missing), then a kernel
    writes some: the next query lists them, before the background has indexed the store."""
    store = JsonlStore(tmp_path / "notebooks" / ".dsh" / "sessions")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False, fallback_budget=30.0)
    catalog.ensure_store(store.root, budget=None)
    assert [info.missing for info in catalog.stores()] == [True]
    for name in ("first", "second"):
        make_session(store, name, title=f"{name} title")
    assert [(info.ready, info.missing) for info in catalog.stores()] == [(False, False)]  # being indexed
    found = catalog.candidates(None, "/work/a", "", 10)
    assert sorted(entry.session_id for entry in found) == ["first", "second"]
    assert catalog.last_query_complete
    catalog.close()


def test_a_catalog_that_cannot_be_created_falls_back_to_the_logs(tmp_path: Path, stores: list[JsonlStore]) -> None:
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("x")
    catalog = Catalog(blocker / "catalog.sqlite", home=blocker, background=False, fallback_budget=30.0)
    query = SessionQuery(stores[0])
    found = list_candidates(query, TARGETS[1], "", 100, source=catalog)
    expected = list_candidates(SessionQuery(stores[0]), TARGETS[1], "", 100)
    assert [c.to_json() for c in found] == [c.to_json() for c in expected]
    with pytest.raises(CatalogUnavailable, match="cannot create the catalog"):
        catalog.stats()


def test_limits_and_body_search_errors_follow_the_reference(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    query = SessionQuery(stores[0])
    for limit in (0, -1, 1.5, True, "3", 2**53):
        with pytest.raises(SessionReferenceError) as info:
            list_candidates(query, TARGETS[0], "", limit, source=catalog)  # type: ignore[arg-type]
        assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
    with pytest.raises(SessionReferenceError) as info:
        list_candidates(query, TARGETS[0], "x", 5, body=True)
    assert info.value.code == SESSION_REFERENCE_INVALID_CONFIG and "catalog" in info.value.message
    with pytest.raises(ValueError, match="positive integer"):
        catalog.candidates("t", None, "", 0)


def test_the_resolver_reads_sessions_of_other_stores_through_the_catalog(tmp_path: Path,
                                                                         stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    other = ids(stores[2])[0]
    target = ReferenceTarget("me", "/work/a", tmp_path / "me")
    with_catalog = SessionReferenceResolver(SessionQuery(stores[0]), catalog=catalog)
    assert other in [c.session_id for c in with_catalog.list_candidates(target, other)]
    prepared = with_catalog.prepare_sync(target, [{"type": "text", "text": "hi"}], [{"sessionId": other}])
    assert prepared.additional_context is not None
    without = SessionReferenceResolver(SessionQuery(stores[0]))
    with pytest.raises(SessionReferenceError) as info:
        without.prepare_sync(target, [{"type": "text", "text": "hi"}], [{"sessionId": other}])
    assert info.value.code == SESSION_REFERENCE_READ_FAILED
    with pytest.raises(SessionReferenceError) as info:
        with_catalog.prepare_sync(target, [{"type": "text", "text": "hi"}], [{"sessionId": "nowhere"}])
    assert info.value.code == SESSION_REFERENCE_READ_FAILED and "nowhere" in info.value.message


def test_a_store_the_catalog_cannot_index_is_merged_by_scanning(tmp_path: Path, stores: list[JsonlStore]) -> None:
    from references_helpers import MemoryStore

    catalog = indexed(tmp_path, stores)
    memory = MemoryStore()
    memory.new_log("in-memory", cwd="/work/a", created_at=BASE + 10**7)
    found = list_candidates(SessionQuery(memory), TARGETS[0], "", 3, source=catalog)
    assert found[0].session_id == "in-memory" and len(found) == 3


def test_registered_sessions_keep_their_notebook_and_lookups_find_prefixes(tmp_path: Path,
                                                                          stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    name = ids(stores[1])[0]
    catalog.register_session(stores[1].root, name, notebook="analysis.ipynb")
    [entry] = catalog.lookup(name)
    assert entry.notebook == "analysis.ipynb" and entry.store == store_root(stores[1].root)
    assert entry.path == str(stores[1].log_path(name))
    assert [e.session_id for e in catalog.find(name[:5])] == [name]
    assert catalog.find("s1-") and all(e.session_id.startswith("s1-") for e in catalog.find("s1-"))
    assert catalog.lookup("no-such-session") == []


def test_forgetting_and_reindexing_stores(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = indexed(tmp_path, stores)
    assert catalog.forget_store(stores[1].root) == 12
    assert_same(catalog, [stores[0], stores[2]], queries=("", "title"))
    report = catalog.reindex()
    assert report.indexed == 24 and report.stores == 2
    assert_same(catalog, [stores[0], stores[2]])
    assert catalog.reindex([stores[0].root]).indexed == 12


def test_open_catalog_is_shared_per_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "h1"))
    first = open_catalog()
    assert open_catalog() is first and first.path == tmp_path / "h1" / "catalog.sqlite"
    assert open_catalog(tmp_path / "h2") is not first
    first.close()
    assert open_catalog() is not first


def test_cancelling_a_catalog_query(tmp_path: Path, stores: list[JsonlStore]) -> None:
    from dsh_jupyter.references import SESSION_REFERENCE_CANCELLED

    catalog = indexed(tmp_path, stores)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        list_candidates(SessionQuery(stores[0]), TARGETS[0], "", 5, cancel, source=catalog)
    assert info.value.code == SESSION_REFERENCE_CANCELLED


def test_a_budgeted_start_finishes_in_the_background(tmp_path: Path, stores: list[JsonlStore]) -> None:
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", fallback_budget=30.0)
    reports = [catalog.ensure_store(store.root, budget=0.0) for store in stores]
    assert all(r.pending for r in reports)
    assert_same(catalog, stores, queries=("", "title"))  # complete meanwhile: unindexed logs are read directly
    assert catalog.wait_idle(30)
    assert all(s.ready and s.sessions == 12 for s in catalog.stores())
    assert catalog.ensure_store(stores[0].root).indexed == 0  # nothing changed: nothing read
    catalog.close()
