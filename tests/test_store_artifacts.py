"""Session artifacts in every backend: files in the JSONL session folder, a table in SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from store_helpers import ALL_BACKENDS, Backend, new_header, open_backend_store, write_session

from dsh_jupyter.store import JsonlStore, SqliteStore
from dsh_jupyter.store.artifacts import ArtifactError, artifact_name, check_name


def name_of(data: bytes, extension: str = "png") -> str:
    return artifact_name(hashlib.sha256(data).hexdigest(), extension)


def test_names_are_content_addressed_and_checked() -> None:
    name = name_of(b"plot")
    assert name == f"artifacts/{hashlib.sha256(b'plot').hexdigest()}.png"
    for bad in ("artifacts/../session.jsonl", "../x.png", "artifacts/abc.png", "/etc/passwd",
                f"artifacts/{'a' * 64}.exe", f"other/{'a' * 64}.png", f"artifacts/{'A' * 64}.png"):
        with pytest.raises(ArtifactError):
            check_name(bad)


@pytest.mark.parametrize("backend", ALL_BACKENDS, ids=str)
def test_save_and_load_in_every_backend(backend: Backend, tmp_path: Path, request: Any) -> None:
    store = open_backend_store(backend, tmp_path, request)
    log = write_session(store, "with-plot", turns=1)
    header = log.header
    data = b"\x89PNG fake bytes" * 50
    name = name_of(data)
    assert store.load_artifact(header, name) is None
    store.save_artifact(header, name, data)
    store.save_artifact(header, name, data)  # the same plot twice: one artifact, no error
    assert store.load_artifact(header, name) == data
    other = new_header("no-such-session")
    assert store.load_artifact(other, name) is None
    with pytest.raises(ArtifactError):
        store.load_artifact(header, "artifacts/../../secret.png")
    store.delete("with-plot")
    assert store.load_artifact(header, name) is None


def test_jsonl_keeps_one_file_per_picture_in_the_session_folder(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    log = write_session(store, "s-jsonl", turns=1)
    data = b"picture"
    name = name_of(data)
    store.save_artifact(log.header, name, data)
    store.save_artifact(log.header, name, data)
    folder = store.session_dir(log.header) / "artifacts"
    assert [p.name for p in folder.iterdir()] == [name.split("/", 1)[1]]
    assert (store.session_dir(log.header) / name).read_bytes() == data
    assert [h.id for h in store.list_headers()] == ["s-jsonl"]  # the folder still lists as one session


def test_jsonl_does_not_follow_a_planted_link(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    log = write_session(store, "s-link", turns=1)
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"private")
    name = name_of(b"x")
    target = store.session_dir(log.header) / name
    target.parent.mkdir(parents=True)
    os.symlink(secret, target)
    assert store.load_artifact(log.header, name) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target.unlink()
    target.parent.rmdir()
    os.symlink(elsewhere, target.parent)
    with pytest.raises(ArtifactError, match="is a link"):
        store.save_artifact(log.header, name, b"x")
    assert list(elsewhere.iterdir()) == []


def test_sqlite_creates_its_table_on_first_use(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "sessions.db")
    log = write_session(store, "s-sql", turns=1)
    with sqlite3.connect(store.path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "dsh_artifacts" not in tables  # an older database: nothing to upgrade, nothing found
    assert store.load_artifact(log.header, name_of(b"x")) is None
    store.save_artifact(log.header, name_of(b"x"), b"x")
    assert store.load_artifact(log.header, name_of(b"x")) == b"x"
    assert store.load_artifact(log.header, name_of(b"x", "jpg")) is None


def test_a_store_without_a_place_says_so(tmp_path: Path) -> None:
    from dsh_jupyter.store.base import SessionStore

    class Nowhere(JsonlStore):
        def session_dir(self, header: Any) -> Any:
            return None

    store: SessionStore = Nowhere(tmp_path / "s")
    with pytest.raises(ArtifactError, match="no place for artifacts"):
        store.save_artifact(new_header(), name_of(b"x"), b"x")
    assert store.load_artifact(new_header(), name_of(b"x")) is None


def test_postgres_artifacts_follow_the_session_rules(pg_server: Any, pg_database: str) -> None:
    """Alice's artifacts: Bob cannot read them until she shares the session, and can never add one."""
    import psycopg

    from dsh_jupyter.cli import main as cli_main
    from dsh_jupyter.store.postgres import PostgresStore

    roles = {"art_alice": "alice-pw", "art_bob": "bob-pw"}
    for role, password in roles.items():
        pg_server.create_role(role, password)
    db = pg_database.rsplit("/", 1)[1]
    assert cli_main(["postgres", "init", "--dsn", pg_database], out=io.StringIO()) == 0
    alice = PostgresStore(pg_server.dsn(db, "art_alice", roles["art_alice"]))
    bob = PostgresStore(pg_server.dsn(db, "art_bob", roles["art_bob"]))
    try:
        log = write_session(alice, "alice-plot", turns=1)
        data = b"alice's plot"
        name = name_of(data)
        alice.save_artifact(log.header, name, data)
        assert alice.load_artifact(log.header, name) == data
        assert bob.load_artifact(log.header, name) is None
        with pytest.raises(psycopg.Error):
            bob.save_artifact(log.header, name_of(b"bob"), b"bob")
        alice.share("alice-plot", "art_bob")
        assert bob.load_artifact(log.header, name) == data
        with pytest.raises(psycopg.Error):
            bob.save_artifact(log.header, name_of(b"bob"), b"bob")
        alice.delete("alice-plot")
        assert alice.load_artifact(log.header, name) is None
    finally:
        alice.close()
        bob.close()


def test_postgres_without_the_artifacts_table_until_init_runs_again(pg_database: str) -> None:
    import psycopg

    from dsh_jupyter.cli import main as cli_main
    from dsh_jupyter.store.postgres import PostgresStore

    store = PostgresStore(pg_database)
    try:
        log = write_session(store, "older-db", turns=1)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("DROP TABLE dsh.artifacts")  # a database initialised by an earlier version
        with pytest.raises(ArtifactError, match=r"no artifacts table yet; .*`dsh-jupyter postgres init` again"):
            store.save_artifact(log.header, name_of(b"x"), b"x")
        assert store.load_artifact(log.header, name_of(b"x")) is None
        assert [h.id for h in store.list_headers()] == ["older-db"]  # sessions still work
        out = io.StringIO()
        assert cli_main(["postgres", "init", "--dsn", pg_database], out=out) == 0
        store.save_artifact(log.header, name_of(b"x"), b"x")
        assert store.load_artifact(log.header, name_of(b"x")) == b"x"
    finally:
        store.close()
