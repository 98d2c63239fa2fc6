"""Sharing under the database's own authorisation: two real roles on the test server.

Alice's sessions are hers: Bob sees none of them through the store API, the candidates, the CLI or raw
SQL until Alice shares one; then he can reference it (prepare() through the resolver), still not write it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from notebook_helpers import loaded_shell
from pg_helpers import PgServer, RoleDatabase
from store_helpers import append_turn, new_header, write_session

from dsh_jupyter.cli import main as cli_main
from dsh_jupyter.references import SessionReferenceError
from dsh_jupyter.services import Services, ServiceSettings
from dsh_jupyter.session import SessionLockedError, SessionLog, SessionNotFoundError
from dsh_jupyter.session.messages import text_block

ALICE, BOB, CAROL, TEAM = "share_alice", "share_bob", "share_carol", "share_team"
PASSWORDS = {ALICE: "alice-pw", BOB: "bob-pw", CAROL: "carol-pw"}


class World(RoleDatabase):
    """The sharing roles' database, initialised with ``dsh-jupyter postgres init``."""

    def services(self, role: str, cwd: str = "/home/dev/project") -> Services:
        return Services(ServiceSettings(cwd=cwd, store="postgres", postgres_dsn=self.dsn(role), catalog=False),
                        index_in_background=False)

    def sql(self, role: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.dsn(role), autocommit=True) as conn:
            cur = conn.execute(statement.encode(), params)
            return cur.fetchall() if cur.description else []


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli_main(list(argv), out=out), out.getvalue()


@pytest.fixture
def world(pg_server: PgServer, pg_database: str) -> Iterator[World]:
    world = World.with_roles(pg_server, pg_database, PASSWORDS)
    with pg_server.admin() as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (TEAM,)).fetchone() is None:
            conn.execute(f'CREATE ROLE "{TEAM}" NOLOGIN')
            conn.execute(f'GRANT "{TEAM}" TO "{CAROL}"')
    code, text = cli("postgres", "init", "--dsn", pg_database)
    assert code == 0 and "created the session tables" in text
    yield world


def test_init_is_idempotent_and_never_shows_the_password(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = cli("postgres", "init", "--dsn", world.server.dsn(world.db))
    assert code == 0 and "already in place" in text
    assert "admin-secret-pw" not in text and "postgresql://dsh_admin@127.0.0.1" in text


def test_an_unshared_session_is_invisible_to_another_role(world: World) -> None:
    alice, bob = world.store(ALICE), world.store(BOB)
    write_session(alice, "alice-private", turns=2)
    assert alice.owner("alice-private") == ALICE
    assert [h.id for h in bob.list_headers()] == []
    assert not bob.exists("alice-private")
    for read in (bob.load, bob.read_surface, bob.read_title, bob.open, bob.delete, bob.owner):
        with pytest.raises(SessionNotFoundError):
            read("alice-private")
    with pytest.raises(SessionNotFoundError):
        bob.share("alice-private", BOB)
    # Raw SQL as Bob: no rows at all, and nothing he can change.
    for table in ("sessions", "events", "shares"):
        assert world.sql(BOB, f"SELECT count(*) FROM dsh.{table}") == [(0,)]
    # The candidate function (it runs as the tables' owner) applies the same visibility for the caller.
    find = "SELECT count(*) FROM dsh.find_sessions('\\x'::bytea, '', '%%', NULL, NULL, 100)"
    assert world.sql(BOB, find) == [(0,)] and world.sql(ALICE, find) == [(1,)]
    key = world.sql(ALICE, "SELECT key FROM dsh.sessions")[0][0]
    assert world.sql(BOB, "UPDATE dsh.sessions SET title = 'mine' RETURNING 1") == []
    assert world.sql(BOB, "DELETE FROM dsh.events RETURNING 1") == []
    import psycopg

    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        world.sql(BOB, "INSERT INTO dsh.events (key, seq, type, body) VALUES (%s, 999, 'turn/start', '{}')", (key,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        world.sql(BOB, "INSERT INTO dsh.shares (key, owner, grantee) VALUES (%s, %s, %s)", (key, ALICE, BOB))
    with pytest.raises(psycopg.Error):
        world.sql(BOB, "INSERT INTO dsh.shares (key, grantee) VALUES (%s, %s)", (key, BOB))
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        world.sql(BOB, "INSERT INTO dsh.sessions (key, owner, header, created_at, updated_at, next_seq) "
                       "VALUES ('\\x01', %s, '\\x00', 0, 0, 0)", (ALICE,))
    assert world.sql(ALICE, "SELECT count(*) FROM dsh.events")[0][0] > 10  # all still there
    alice.close()
    bob.close()


def test_the_cli_shows_only_what_the_role_may_see(world: World) -> None:
    write_session(world.store(ALICE), "alice-notes", turns=1)
    code, text = cli("postgres", "list", "--dsn", world.dsn(BOB))
    assert code == 0 and text == "no sessions\n"
    code, text = cli("postgres", "show", "alice-notes", "--dsn", world.dsn(BOB))
    assert code == 1 and text == ""
    code, text = cli("postgres", "search", "alice", "--dsn", world.dsn(BOB), "--body")
    assert code == 0 and text == "no session matches\n"
    code, text = cli("postgres", "list", "--dsn", world.dsn(ALICE))
    assert "alice-notes" in text and "title 1" in text
    assert cli("postgres", "share", "alice-notes", "--with", BOB, "--dsn", world.dsn(ALICE))[0] == 0
    code, text = cli("postgres", "show", "alice-notes", "--dsn", world.dsn(BOB), "--json")
    assert code == 0 and f'"owner": "{ALICE}"' in text and "prompt 1" in text
    code, text = cli("postgres", "show", "alice-notes", "--dsn", world.dsn(BOB), "--messages", "1", "--chars", "3")
    assert code == 0 and "(last 1 of " in text and " earlier message" in text
    assert " more characters of this message not shown)" in text


def test_bob_cannot_reference_it_until_alice_shares_it(world: World) -> None:
    write_session(world.store(ALICE), "alice-analysis", turns=2)
    bob = world.services(BOB)
    target = bob.target()
    assert bob.resolver.list_candidates(target, "") == []
    with pytest.raises(SessionReferenceError) as info:
        bob.resolver.prepare_sync(target, [text_block("go")], [{"sessionId": "alice-analysis"}])
    assert "alice-analysis" in str(info.value)

    assert world.store(ALICE).share("alice-analysis", BOB) is True
    assert world.store(ALICE).share("alice-analysis", BOB) is False  # already shared
    assert [c.session_id for c in bob.resolver.list_candidates(target, "analysis")] == ["alice-analysis"]
    assert [c.session_id for c in bob.resolver.list_candidates(target, "answer 2", body=True)] == ["alice-analysis"]
    prepared = bob.resolver.prepare_sync(target, [text_block("go")], [{"sessionId": "alice-analysis"}])
    assert prepared.additional_context is not None
    text = str(prepared.additional_context)
    assert "prompt 1" in text and "answer 2" in text
    assert world.sql(BOB, "SELECT count(*) FROM dsh.sessions") == [(1,)]

    # Shared is read-only: Bob can neither write nor delete it.
    store = world.store(BOB)
    with pytest.raises(PermissionError, match="belongs to the database role 'share_alice'"):
        store.open("alice-analysis")
    with pytest.raises(PermissionError, match="only its owner can delete"):
        store.delete("alice-analysis")
    with pytest.raises(PermissionError, match="only its owner can share"):
        store.share("alice-analysis", CAROL)

    assert world.store(ALICE).unshare("alice-analysis", BOB) is True
    assert bob.resolver.list_candidates(target, "") == []
    assert world.sql(BOB, "SELECT count(*) FROM dsh.events") == [(0,)]


def test_sharing_with_a_group_reaches_its_members(world: World) -> None:
    write_session(world.store(ALICE), "team-notes", turns=1)
    world.store(ALICE).share("team-notes", TEAM)
    assert [h.id for h in world.store(CAROL).list_headers()] == ["team-notes"]
    assert world.store(BOB).list_headers() == []
    assert world.store(ALICE).shared_with("team-notes") == [TEAM]


def test_share_names_a_role_that_exists(world: World) -> None:
    write_session(world.store(ALICE), "s", turns=1)
    with pytest.raises(LookupError, match="no database role named 'nobody'"):
        world.store(ALICE).share("s", "nobody")


def test_one_writer_per_session_across_connections(world: World) -> None:
    alice = world.store(ALICE)
    write_session(alice, "busy", turns=1)
    log, writer = alice.open("busy")
    other = world.store(ALICE)  # another kernel of the same role
    with pytest.raises(SessionLockedError, match="already open for writing"):
        other.open("busy")
    with writer:
        append_turn(log, 2)
    _, again = other.open("busy")
    again.close()


def test_the_magics_share_and_unshare(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_POSTGRES_DSN", world.dsn(ALICE))
    with loaded_shell() as shell:
        shell.run_line_magic("config", 'DshMagics.store = "postgres"')
        shell.run_cell_magic("dsh", "", "remember the share test")  # type: ignore[no-untyped-call]
        session_id = shell.magics_manager.registry["DshMagics"].host.agent.id
        capsys.readouterr()
        shell.run_line_magic("dsh", f"share {session_id[:8]} --with {BOB}")
        shell.run_line_magic("dsh", f"share {session_id} --with nobody")
        shell.run_line_magic("dsh", f"share {session_id}")
        out = capsys.readouterr()
        assert f"session {session_id} is shared with {BOB}: they can @-reference it" in out.out
        assert "no database role named 'nobody'" in out.err
        assert "name the database role: %dsh share SESSION --with ROLE" in out.err
        assert [h.id for h in world.store(BOB).list_headers()] == [session_id]
        shell.run_line_magic("dsh", f"unshare {session_id} --with {BOB}")
        assert "is no longer shared" in capsys.readouterr().out
        assert world.store(BOB).list_headers() == []
        shell.run_line_magic("config", 'DshMagics.store = "jsonl"')
        shell.run_line_magic("dsh", f"share {session_id} --with {BOB}")
        assert "works with the PostgreSQL store" in capsys.readouterr().err
        os.environ.pop("DSH_SESSION_ID", None)
        os.environ.pop("DSH_SESSION_JSONL", None)


def test_a_new_session_of_another_role_cannot_take_an_existing_id(world: World) -> None:
    write_session(world.store(ALICE), "taken", turns=1)
    header = new_header("taken")
    log = SessionLog(header)
    writer = world.store(BOB).create(header)  # Bob cannot see it, so create() does not refuse yet...
    writer.attach(log)
    append_turn(log, 1)
    from dsh_jupyter.store import SessionExistsError

    with pytest.raises(SessionExistsError, match="Nothing was written"):
        writer.flush()  # ...but the database does, and nothing of Bob's lands
    assert world.store(ALICE).load("taken").header.id == "taken"
    assert world.sql(BOB, "SELECT count(*) FROM dsh.sessions") == [(0,)]
    writer.discard()


def _old_lock_key(session_id: str) -> int:
    """The advisory-lock key the first version of the store used (any role could take it)."""
    import hashlib

    from dsh_jupyter.store.sql import session_key

    digest = hashlib.blake2b(b"dsh-jupyter session\x00" + session_key(session_id), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def test_another_role_can_neither_block_nor_take_the_writer(world: World) -> None:
    import psycopg

    alice = world.store(ALICE)
    write_session(alice, "guarded", turns=1)
    alice.share("guarded", BOB)
    key = world.sql(ALICE, "SELECT key FROM dsh.sessions")[0][0]
    with psycopg.connect(world.dsn(BOB)) as bob:  # one open transaction holding whatever Bob can take
        bob.execute("SELECT pg_advisory_lock(%s)", (_old_lock_key("guarded"),))
        bob.execute("SELECT pg_advisory_lock(hashtext('guarded'))")
        assert bob.execute("SELECT count(*) FROM dsh.sessions").fetchone() == (1,)  # he can read it...
        for mode in ("UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"):  # ...but lock none of its rows
            assert bob.execute(f"SELECT 1 FROM dsh.sessions FOR {mode} NOWAIT".encode()).fetchall() == []
        stolen = bob.execute("UPDATE dsh.sessions SET writer_pid = pg_backend_pid(), writer_start = now() "
                             "WHERE key = %s RETURNING 1", (key,)).fetchall()
        assert stolen == []
        # Alice writes while Bob's transaction is open, and one writer per session still holds.
        log, writer = alice.open("guarded")
        with pytest.raises(SessionLockedError, match="already open for writing"):
            world.store(ALICE).open("guarded")
        with writer:
            append_turn(log, 2)
        bob.rollback()
    assert len(world.store(BOB).load("guarded").events) == len(log.events)
    with pytest.raises(PermissionError, match="only its owner can write to"):
        world.store(BOB).open("guarded")
    # Alice's lease is free again once her writer's connection is gone: she (and only she) reopens.
    _, again = world.store(ALICE).open("guarded")
    again.close()
    alice.close()


def test_a_lease_of_a_dead_connection_is_free(world: World) -> None:
    alice = world.store(ALICE)
    write_session(alice, "orphan", turns=1)
    _log, writer = alice.open("orphan")
    holder = world.sql(ALICE, "SELECT writer_pid FROM dsh.sessions")[0][0]
    with pytest.raises(SessionLockedError):
        world.store(ALICE).open("orphan")
    with world.server.admin(world.db) as admin:  # the kernel's connection dies (a killed kernel, a network cut)
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (holder,))
    _, again = world.store(ALICE).open("orphan")
    assert world.sql(ALICE, "SELECT writer_pid FROM dsh.sessions")[0][0] != holder
    again.close()
    writer.discard()


def test_a_schema_of_the_first_version_is_upgraded_by_init(world: World) -> None:
    from dsh_jupyter.store.postgres import PostgresStoreError

    write_session(world.store(ALICE), "before", turns=1)
    with world.server.admin(world.db) as admin:  # the tables as the first version created them
        admin.execute("ALTER TABLE dsh.sessions DROP COLUMN writer_pid, DROP COLUMN writer_start")
        admin.execute("UPDATE dsh.meta SET value = '1' WHERE name = 'schema_version'")
    assert [h.id for h in world.store(ALICE).list_headers()] == ["before"]  # still read as it is...
    with pytest.raises(PostgresStoreError) as info:  # ...but writing waits for the administrator
        world.store(ALICE).open("before")
    message = str(info.value)
    from dsh_jupyter.store.postgres_schema import SCHEMA_VERSION

    assert f"older dsh-jupyter (schema 1; this version needs {SCHEMA_VERSION})" in message
    assert "postgres init" in message
    assert PASSWORDS[ALICE] not in message
    code, text = cli("postgres", "init", "--dsn", world.server.dsn(world.db))
    assert code == 0, text
    log, writer = world.store(ALICE).open("before")
    with writer:
        append_turn(log, 2)
    assert world.store(ALICE).load("before").events == log.events
