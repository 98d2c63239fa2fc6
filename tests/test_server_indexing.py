"""Indexing at server start: only served stores, in a thread of its own, failures logged and never raised."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from server_helpers import Api, make_session, server_api, server_config

from dsh_jupyter.server.boundary import Boundary
from dsh_jupyter.server.indexing import THREAD_NAME, index_in_background, index_stores, served_stores


def test_served_stores_are_those_of_the_root_and_extra_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boundary = Boundary.of(tmp_path / "root", [tmp_path / "team"])
    real = Path(os.path.realpath(tmp_path))
    assert served_stores(boundary) == [real / "root" / ".dsh" / "sessions", real / "team" / ".dsh" / "sessions"]
    monkeypatch.setenv("DSH_SESSIONS_DIR", "shared")  # relative: one per served folder
    assert served_stores(boundary) == [real / "root" / "shared", real / "team" / "shared"]
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(tmp_path / "elsewhere"))
    assert served_stores(boundary) == []


def test_a_failing_store_is_logged_and_the_next_one_still_indexed(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    boundary = Boundary.of(tmp_path / "root", [tmp_path / "team"])
    seen: list[Path] = []

    def index(store: Path) -> None:
        seen.append(store)
        if len(seen) == 1:
            raise MemoryError("the header reader ran away")

    index_stores(boundary, index)
    assert len(seen) == 2
    assert "indexing the session store of" in caplog.text and "the header reader ran away" in caplog.text
    assert str(tmp_path) not in caplog.messages[0]


def test_indexing_runs_in_a_daemon_thread_of_its_own(tmp_path: Path) -> None:
    names: list[str] = []
    thread = index_in_background(Boundary.of(tmp_path), lambda store: names.append(threading.current_thread().name))
    thread.join(10)
    assert names == [THREAD_NAME] and thread.daemon


# -- on a real server ---------------------------------------------------------------------------------------
@pytest.fixture
def copied_in(jp_root_dir: Path) -> Path:
    """A store copied into the root before the server starts."""
    return make_session(jp_root_dir, "copied-in", created_at=5, cwd="/colleague/machine", title="From a colleague")


jp_server_config = server_config()


api = server_api()


@pytest.mark.usefixtures("copied_in")  # set up first: the store is there before the server starts
def test_the_root_store_is_indexed_at_start_without_a_request(api: Api, copied_in: Path) -> None:
    from dsh_jupyter.catalog import open_catalog

    for thread in [t for t in threading.enumerate() if t.name == THREAD_NAME]:
        thread.join(30)
    catalog = open_catalog()
    assert catalog.wait_idle(30)
    assert [e.session_id for e in catalog.sessions()] == ["copied-in"]
    assert os.path.realpath(copied_in.parent.parent) in [s.root for s in catalog.stores()]
