"""Saved spills used again (references/reuse.py): an unchanged source names the file written for it before,
with nothing rendered or written; a source that grew, a file edited or deleted since, another label or cap,
a newly masked secret, or a log too freshly changed to be trusted all get a new file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from catalog_helpers import append_turns, make_session
from references_helpers import omission_entries

from dsh_jupyter.catalog import Catalog
from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver
from dsh_jupyter.references import resolver as resolver_module
from dsh_jupyter.references.spill import SpillResult
from dsh_jupyter.store import JsonlStore

BIG = "a long answer line\n" * 400  # about 7 kB a prompt: the sessions below never fit a 2,000-byte budget


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    opened = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    opened.folds.racy_ns = 0  # the tests write and read within one file-time tick (the racy rule has its own test)
    yield opened
    opened.close()


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    store = JsonlStore(tmp_path / "sessions")
    make_session(store, "source", turns=3, prompt=BIG)
    return store


class Writes:
    """Counts the transcripts the resolver renders and saves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.saved: list[SpillResult] = []
        real = resolver_module.save_transcript

        def save(*args: Any) -> SpillResult:
            result = real(*args)
            self.saved.append(result)
            return result

        monkeypatch.setattr(resolver_module, "save_transcript", save)


def prepare(resolver: SessionReferenceResolver, target: ReferenceTarget, label: str | None = None) -> SpillResult:
    reference: dict[str, Any] = {"sessionId": "source"} | ({"label": label} if label is not None else {})
    prepared = resolver.prepare_sync(target, [], [reference])
    assert set(prepared.spills) == {0}
    entry = omission_entries(prepared.additional_context["content"][0]["text"])[0]  # type: ignore[index]
    assert entry["fullSnapshot"] == prepared.spills[0].to_json()
    return prepared.spills[0]


def stamp(path: Path | None) -> tuple[int, int, int]:
    assert path is not None
    info = os.stat(path)
    return info.st_ino, info.st_mtime_ns, info.st_ctime_ns


def make(store: JsonlStore, catalog: Catalog, tmp_path: Path, **config: Any) -> tuple[SessionReferenceResolver,
                                                                                      ReferenceTarget]:
    resolver = SessionReferenceResolver(SessionQuery(store), catalog=catalog, max_reference_bytes=2_000, **config)
    return resolver, ReferenceTarget("target", "/work/a", tmp_path / "target-folder")


def test_an_unchanged_source_names_its_saved_file_without_writing(store: JsonlStore, catalog: Catalog,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    writes = Writes(monkeypatch)
    resolver, target = make(store, catalog, tmp_path)
    first = prepare(resolver, target)
    before = stamp(first.path)
    rendered: list[object] = []
    real_render = resolver_module.capped_transcript_pieces
    monkeypatch.setattr(resolver_module, "capped_transcript_pieces",
                        lambda *a: rendered.append(a) or real_render(*a))
    for _ in range(3):
        again = prepare(resolver, target)
        assert again == first
    assert len(writes.saved) == 1 and rendered == []
    assert stamp(first.path) == before  # same inode, not written since
    assert sorted(p.name for p in (tmp_path / "target-folder").iterdir()) == ["session-reference-1.txt"]
    assert catalog.folds.stats.unchanged >= 3


def test_a_source_that_grew_gets_a_new_file(store: JsonlStore, catalog: Catalog, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    writes = Writes(monkeypatch)
    resolver, target = make(store, catalog, tmp_path)
    first = prepare(resolver, target)
    old = first.path.read_text()  # type: ignore[union-attr]
    append_turns(store, "source", 1, prompt="a later prompt that the new snapshot holds")
    grown = prepare(resolver, target)
    assert len(writes.saved) == 2 and grown.path != first.path
    assert "a later prompt" in grown.path.read_text() and first.path.read_text() == old  # type: ignore[union-attr]
    assert prepare(resolver, target) == grown and len(writes.saved) == 2  # and the grown one is reused in turn


@pytest.mark.parametrize("change", ["edited", "deleted", "replaced"])
def test_a_saved_file_changed_since_is_written_again(store: JsonlStore, catalog: Catalog, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    writes = Writes(monkeypatch)
    resolver, target = make(store, catalog, tmp_path)
    first = prepare(resolver, target)
    path = first.path
    assert path is not None
    content = path.read_bytes()
    if change == "edited":  # same size, other bytes
        path.write_bytes(content[:-2] + b"X\n")
    elif change == "deleted":
        path.unlink()
    else:
        spare = path.with_name("spare")
        spare.write_bytes(content)
        os.replace(spare, path)
    again = prepare(resolver, target)
    assert len(writes.saved) == 2
    assert again.path is not None and again.path.read_bytes() == content


@pytest.mark.parametrize("setting", ["label", "cap", "budget", "secret"])
def test_another_label_cap_budget_or_secret_is_not_the_same_spill(store: JsonlStore, catalog: Catalog,
                                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   setting: str) -> None:
    writes = Writes(monkeypatch)
    resolver, target = make(store, catalog, tmp_path)
    first = prepare(resolver, target)
    label = None
    if setting == "label":
        label = "another label"
    elif setting == "cap":
        resolver.max_spill_bytes = 32_768
    elif setting == "budget":
        resolver.max_reference_bytes = 3_000
    else:  # a secret set since the first file was written must be masked in the next one
        monkeypatch.setenv("DSH_TEST_API_KEY", "answer line")
    again = prepare(resolver, target, label)
    assert len(writes.saved) == 2 and again.path != first.path
    if setting == "secret":
        assert "answer line" not in again.path.read_text()  # type: ignore[union-attr]


def test_a_log_changed_a_moment_ago_is_not_trusted(store: JsonlStore, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    try:
        catalog.folds.racy_ns = 3_600 * 10**9  # every log counts as just changed
        writes = Writes(monkeypatch)
        resolver, target = make(store, catalog, tmp_path)
        first, second = prepare(resolver, target), prepare(resolver, target)
        assert len(writes.saved) == 2 and first.path != second.path
    finally:
        catalog.close()


def test_without_the_catalog_nobody_vouches_and_every_call_writes(store: JsonlStore, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    writes = Writes(monkeypatch)
    resolver = SessionReferenceResolver(SessionQuery(store), max_reference_bytes=2_000)
    target = ReferenceTarget("target", "/work/a", tmp_path / "target-folder")
    prepare(resolver, target)
    prepare(resolver, target)
    assert len(writes.saved) == 2 and len(resolver.saved_spills) == 0


class Projections:
    """Counts the sources the resolver projects (reads event by event)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = resolver_module.bound_surface

        def bound(*args: Any) -> Any:
            self.count += 1
            return real(*args)

        monkeypatch.setattr(resolver_module, "bound_surface", bound)


def test_an_unchanged_source_is_not_projected_again_and_a_grown_one_is(store: JsonlStore, catalog: Catalog,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    projections = Projections(monkeypatch)
    resolver, target = make(store, catalog, tmp_path)
    first = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    again = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    assert projections.count == 1
    assert again.additional_context["content"] == first.additional_context["content"]  # type: ignore[index]
    append_turns(store, "source", 1, prompt="a later prompt")
    grown = resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    assert projections.count == 2 and "a later prompt" in grown.additional_context["content"][0]["text"]  # type: ignore[index]
    resolver.max_reference_bytes = 3_000  # another budget is another projection
    resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    assert projections.count == 3


def test_kept_projections_stay_under_their_text_cap(store: JsonlStore, catalog: Catalog, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.references.reuse import WarmProjections

    projections = Projections(monkeypatch)
    resolver, target = make(store, catalog, tmp_path)
    resolver.warm_projections = WarmProjections(max_held_text=1_000)  # smaller than this source's spill prefix
    resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    resolver.prepare_sync(target, [], [{"sessionId": "source"}])
    assert projections.count == 2 and len(resolver.warm_projections) == 0
