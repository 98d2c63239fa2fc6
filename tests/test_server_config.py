"""The ``c.DshServer`` settings: defaults, checks, and their effect on a real jupyter-server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from server_helpers import SERVER_CONFIG, Api, make_session, payload, server_api
from traitlets import TraitError
from traitlets.config import Config

from dsh_jupyter.server.config import DshServer
from dsh_jupyter.server.state import SETTINGS_KEY, ServerState


def test_every_setting_is_configurable_with_help() -> None:
    traits = DshServer.class_traits(config=True)
    assert set(traits) == {"extra_roots", "read_workers", "max_queued", "request_timeout", "index_at_start",
                           "postgres_dsn"}
    for name, trait in traits.items():
        assert trait.help and len(trait.help) > 40, name
    settings = DshServer()
    assert (settings.extra_roots, settings.read_workers, settings.max_queued, settings.request_timeout,
            settings.index_at_start) == ([], 4, 16, 10.0, True)


@pytest.mark.parametrize("name,value", [("read_workers", 0), ("max_queued", -1), ("request_timeout", 0.0),
                                        ("request_timeout", -3.0)])
def test_bad_values_are_refused_with_the_setting_named(name: str, value: object) -> None:
    with pytest.raises(TraitError, match=f"DshServer.{name}"):
        DshServer(**{name: value})


def test_settings_come_from_the_server_config(tmp_path: Path) -> None:
    config = Config({"DshServer": {"extra_roots": [str(tmp_path)], "read_workers": 2, "max_queued": 1}})
    settings = DshServer(config=config)
    pool = settings.make_pool()
    assert (pool.workers, pool.queued) == (2, 1)
    assert settings.boundary(str(tmp_path / "root")).extra == (tmp_path.resolve(),)


# -- on a real server ---------------------------------------------------------------------------------------
@pytest.fixture
def shared(tmp_path: Path) -> Path:
    return tmp_path / "shared"


@pytest.fixture
def jp_server_config(shared: Path) -> dict[str, Any]:
    return {**SERVER_CONFIG, "DshServer": {"extra_roots": [str(shared)], "read_workers": 2, "max_queued": 3,
                                           "request_timeout": 7.5, "index_at_start": False}}


api = server_api()


def test_the_server_uses_the_configured_pool_and_timeout(api: Api, jp_serverapp: Any, shared: Path) -> None:
    state: ServerState = jp_serverapp.web_app.settings[SETTINGS_KEY]
    assert (state.pool.workers, state.pool.queued, state.timeout) == (2, 3, 7.5)
    assert state.boundary.extra == (shared.resolve(),)


def test_an_extra_root_serves_a_dsh_sessions_dir_outside_the_root(
    api: Api, jp_root_dir: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = shared / "store"
    log = make_session(shared, "shared-one", created_at=3, cwd=None, store=store)
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(store))
    assert [c["sessionId"] for c in api.get("dsh", "api", "candidates")] == ["shared-one"]
    assert api.get("dsh", "api", "sessions", payload("shared-one"))["sessionId"] == "shared-one"
    where = api.get("dsh", "api", "locate", payload("shared-one"))
    assert where == {"kind": "jsonl", "path": str(log), "contentsPath": None}


def test_catalog_stores_in_an_extra_root_are_listed_and_others_are_not(
    api: Api, jp_root_dir: Path, shared: Path, tmp_path: Path
) -> None:
    from dsh_jupyter.catalog import open_catalog

    make_session(jp_root_dir, "at-root", created_at=1, cwd=None)
    make_session(shared / "team", "in-extra", created_at=2, cwd=str(shared / "team"))
    make_session(tmp_path / "private", "private", created_at=3, cwd=str(tmp_path / "private"))
    catalog = open_catalog()
    catalog.ensure_store(shared / "team" / ".dsh" / "sessions", budget=None)
    catalog.ensure_store(tmp_path / "private" / ".dsh" / "sessions", budget=None)
    data = api.get("dsh", "api", "candidates")
    assert [c["sessionId"] for c in data] == ["at-root", "in-extra"]
    assert "private" not in json.dumps(data)
