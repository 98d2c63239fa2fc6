"""Which folders the server serves, and how messages name them (never with an absolute path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_jupyter.server.boundary import OUTSIDE_LABEL, Boundary, require_log, require_store
from dsh_jupyter.server.errors import ApiError


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for folder in ("root/nb", "root/deep/er", "shared/x", "else"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "root" / "out").symlink_to(tmp_path / "else", target_is_directory=True)
    (tmp_path / "root" / "alias").symlink_to(tmp_path / "root" / "nb", target_is_directory=True)
    return tmp_path


def test_the_root_and_what_lies_below_it_are_allowed_after_resolving_links(tree: Path) -> None:
    boundary = Boundary.of(tree / "root")
    assert boundary.root == Path(os.path.realpath(tree / "root"))
    assert boundary.allows(tree / "root")
    assert boundary.allows(tree / "root" / "deep" / "er" / "not-yet-there")
    assert boundary.allows(tree / "root" / "alias" / "x")
    assert not boundary.allows(tree / "root" / "out")
    assert not boundary.allows(tree / "root" / "out" / "x")
    assert not boundary.allows(tree / "root" / ".." / "else")
    assert not boundary.allows(tree / "rootish")  # a sibling sharing the prefix
    assert not boundary.allows("/dev/zero")


def test_extra_roots_are_allowed_too_and_relative_ones_start_at_the_root(tree: Path) -> None:
    boundary = Boundary.of(tree / "root", [str(tree / "shared"), "../else", "", str(tree / "root")])
    assert boundary.extra == (Path(os.path.realpath(tree / "shared")), Path(os.path.realpath(tree / "else")))
    assert boundary.allows(tree / "shared" / "x") and boundary.allows(tree / "root" / "out")
    assert not boundary.allows(tree)


def test_shown_never_names_an_absolute_path(tree: Path) -> None:
    boundary = Boundary.of(tree / "root", [tree / "shared"])
    assert boundary.shown(tree / "root") == "the server root"
    assert boundary.shown(tree / "root" / "deep" / "er") == "'deep/er'"
    assert boundary.shown(tree / "root" / "alias") == "'nb'"
    assert boundary.shown(tree / "shared") == "extra root 1"
    assert boundary.shown(tree / "shared" / "x") == "extra root 1 ('x')"
    assert boundary.shown(tree / "else") == OUTSIDE_LABEL
    assert str(tree) not in boundary.shown(tree / "root" / "out")


def test_require_store_and_require_log_are_403s_in_the_users_terms(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boundary = Boundary.of(tree / "root")
    require_store(tree / "root" / "nb" / ".dsh" / "sessions", tree / "root" / "nb", boundary)
    require_log(tree / "root" / "nb" / "s" / "session.jsonl", "s", boundary)
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(tree / "else"))
    with pytest.raises(ApiError) as info:
        require_store(tree / "else", tree / "root" / "nb", boundary)
    error = info.value
    assert (error.status, error.code) == (403, "DSH_OUTSIDE_ROOT")
    assert "'nb'" in error.message and "DSH_SESSIONS_DIR" in error.message and "extra_roots" in error.message
    assert str(tree) not in error.message
    with pytest.raises(ApiError) as info:
        require_log(tree / "root" / "out" / "session.jsonl", "odd\nid", boundary)
    assert info.value.status == 403 and "'odd\\nid'" in info.value.message and str(tree) not in info.value.message
