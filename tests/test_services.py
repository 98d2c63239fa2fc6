"""The one wiring module: what it builds from settings, what a change forgets, and how it says "no session"."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_helpers import write_session
from user_helpers import as_nobody, shared_tmp

from dsh_jupyter.services import ServiceError, Services, ServiceSettings
from dsh_jupyter.session import SessionHeader
from dsh_jupyter.store import JsonlStore, SqliteStore


def services(tmp_path: Path, **changes: object) -> Services:
    return Services(ServiceSettings(cwd=str(tmp_path), **changes), index_in_background=False)  # type: ignore[arg-type]


def test_defaults_put_a_jsonl_store_beside_the_folder(tmp_path: Path) -> None:
    s = services(tmp_path)
    assert isinstance(s.store, JsonlStore)
    assert s.sessions_root() == tmp_path / ".dsh" / "sessions"
    assert s.store_root == s.sessions_root()
    assert s.query.store is s.store
    assert s.store is s.store  # built once


def test_sessions_dir_setting_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(tmp_path / "from-env"))
    assert services(tmp_path).sessions_root() == tmp_path / "from-env"
    assert services(tmp_path, sessions_dir=str(tmp_path / "set")).sessions_root() == tmp_path / "set"


def test_sqlite_store_has_no_catalog_and_no_root(tmp_path: Path) -> None:
    s = services(tmp_path, store="sqlite")
    assert isinstance(s.store, SqliteStore)
    assert s.store_root is None
    assert s.catalog is None
    assert "SQLite" in s.describe_store()


def test_catalog_follows_the_setting(tmp_path: Path) -> None:
    assert services(tmp_path, catalog=False).catalog is None
    s = services(tmp_path)
    catalog = s.catalog
    assert catalog is not None
    assert s.resolver.catalog is catalog


def test_a_change_forgets_exactly_what_it_feeds(tmp_path: Path) -> None:
    s = services(tmp_path)
    store, resolver, env = s.store, s.resolver, s.env_registry
    changed = s.configure(ServiceSettings(cwd=str(tmp_path), candidate_limit=7))
    assert changed == {"candidate_limit"}
    assert s.store is store and s.env_registry is env
    assert s.resolver is not resolver and s.resolver.candidate_limit == 7
    changed = s.configure(ServiceSettings(cwd=str(tmp_path), candidate_limit=7, sessions_dir=str(tmp_path / "b")))
    assert changed == {"sessions_dir"}
    assert s.store is not store and s.sessions_root() == tmp_path / "b"
    changed = s.configure(ServiceSettings(cwd=str(tmp_path), candidate_limit=7, sessions_dir=str(tmp_path / "b"),
                                          dsh_home=str(tmp_path / "home")))
    assert changed == {"dsh_home"}
    assert s.env_registry is not env
    assert s.dsh_home() == str(tmp_path / "home")


def test_from_config_reads_attributes_of_the_same_names(tmp_path: Path) -> None:
    class Config:
        store = "sqlite"
        candidate_limit = 9
        model = "not a service setting"

    settings = ServiceSettings.from_config(Config(), str(tmp_path))
    assert settings.store == "sqlite" and settings.candidate_limit == 9 and settings.cwd == str(tmp_path)


def test_no_session_is_a_target_without_id(tmp_path: Path) -> None:
    s = services(tmp_path)
    nobody = s.target()
    assert nobody.session_id is None and nobody.cwd == str(tmp_path)
    header = SessionHeader.new(str(tmp_path))
    mine = s.target(header, context_window=1000)
    assert mine.session_id == header.id and mine.context_window == 1000
    assert mine.session_dir == s.store.session_dir(header)


def test_a_budget_that_is_not_positive_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match=r"--budget takes a positive number of bytes, got -5"):
        services(tmp_path).make_resolver(-5, option="--budget")


def test_read_only_folder_is_readable_but_not_writable() -> None:
    with shared_tmp() as tmp:  # as root the check runs as nobody, who must reach the folder
        root = tmp / "ro"
        root.mkdir()
        write_session(JsonlStore(root), "kept-1", turns=1)
        root.chmod(0o555)

        def check() -> dict[str, str]:
            s = services(tmp, sessions_dir=str(root))
            listed = ",".join(row.id for row in s.query.list_sessions())
            try:
                s.check_writable()
            except ServiceError as exc:
                return {"listed": listed, "refused": str(exc)}
            return {"listed": listed, "refused": ""}

        try:
            seen = as_nobody(check)
        finally:
            root.chmod(0o755)
    assert seen["listed"] == "kept-1"
    assert "read-only" in seen["refused"] and "DSH_SESSIONS_DIR" in seen["refused"], seen["refused"]
