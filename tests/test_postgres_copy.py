"""``dsh-jupyter sessions copy``: JSONL folder -> PostgreSQL -> JSONL folder, losslessly."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from store_helpers import append_turn, compact, new_header, write_session

from dsh_jupyter.cli import main as cli_main
from dsh_jupyter.session import SessionLog
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.base import SessionStore
from dsh_jupyter.store.postgres import PostgresStore

ODD_IDS_FOR_COPY = ["../../etc/pwn", "a~b", "nul\x00id", "lone\ud800", "😀", "引号\"/slash\\/line\n"]


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli_main(list(argv), out=out), out.getvalue()


def _fill(store: SessionStore) -> list[str]:
    write_session(store, "plain", turns=3)
    header = new_header("compacted", created_at=5)
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        append_turn(log, 1)
        append_turn(log, 2, title=True)
        compact(log, 3, "what happened so far")
        append_turn(log, 3)
        log.append("future/thing", {"x": [1, "ü"]}, ignorable=True)
    for index, session_id in enumerate(ODD_IDS_FOR_COPY):
        write_session(store, session_id, turns=1, created_at=100 + index)
    return sorted(h.id for h in store.list_headers())


def _same(a: SessionStore, b: SessionStore, session_id: str) -> None:
    left, right = a.load(session_id), b.load(session_id)
    assert right.header == left.header and right.events == left.events
    assert b.read_surface(session_id) == a.read_surface(session_id)
    assert b.read_title(session_id) == a.read_title(session_id)


def test_copy_to_postgres_and_back_is_lossless(tmp_path: Path, pg_database: str) -> None:
    source = JsonlStore(tmp_path / "sessions")
    ids = _fill(source)
    code, text = cli("sessions", "copy", "--from", str(source.root), "--to", "postgres", "--dsn", pg_database)
    assert code == 0 and f"copied {len(ids)} session(s) to postgresql://dsh_admin@127.0.0.1" in text
    assert "admin-secret-pw" not in text
    database = PostgresStore(pg_database)
    assert sorted(h.id for h in database.list_headers()) == ids
    for session_id in ids:
        _same(source, database, session_id)

    back = tmp_path / "back"
    back.mkdir()
    code, text = cli("sessions", "copy", "--from", "postgres", "--to", str(back), "--dsn", pg_database)
    assert code == 0 and f"copied {len(ids)} session(s)" in text
    returned = JsonlStore(back)
    for session_id in ids:
        _same(source, returned, session_id)
        assert returned.log_path(session_id).read_bytes() == source.log_path(session_id).read_bytes()
    database.close()


def test_copy_leaves_sessions_already_there_alone(tmp_path: Path, pg_database: str) -> None:
    source = JsonlStore(tmp_path / "sessions")
    write_session(source, "one", turns=1)
    assert cli("sessions", "copy", "--from", str(source.root), "--to", "postgres", "--dsn", pg_database)[0] == 0
    write_session(source, "two", turns=1)
    code, text = cli("sessions", "copy", "--from", str(source.root), "--to", "postgres", "--dsn", pg_database)
    assert code == 0 and "copied 1 session(s)" in text and "1 already there, left alone: one" in text


@pytest.mark.parametrize(("argv", "message"), [
    (["--from", "postgres", "--to", "postgres"], "between a session folder and postgres"),
    (["--from", "/no/such/folder", "--to", "postgres"], "no session folder at /no/such/folder"),
])
def test_copy_refuses_what_it_cannot_do(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli("sessions", "copy", *argv, "--dsn", "postgresql://x@127.0.0.1:1/db")
    assert code == 2 and message in capsys.readouterr().err


def test_copy_without_a_dsn_says_how_to_give_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_POSTGRES_DSN", raising=False)
    code, _ = cli("sessions", "copy", "--from", str(tmp_path), "--to", "postgres")
    assert code == 2 and "--dsn" in capsys.readouterr().err


def test_an_unreachable_database_is_one_line_without_the_password(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    write_session(JsonlStore(tmp_path), "x", turns=1)
    code, _ = cli("sessions", "copy", "--from", str(tmp_path), "--to", "postgres", "--dsn",
                  "postgresql://someone:hunter2@127.0.0.1:1/db")
    err = capsys.readouterr().err
    assert code == 3 and "cannot connect to the session database postgresql://someone@127.0.0.1:1/db" in err
    assert "hunter2" not in err and "Traceback" not in err


async def test_copy_carries_the_sessions_images_both_ways(tmp_path: Path, pg_database: str) -> None:
    """A copied session sends its plots as the source did: the artifacts its tool results name come along."""
    from test_agent_images import agent_for

    from dsh_jupyter.images import message_artifacts
    from dsh_jupyter.models.offline import OfflineModel

    source = JsonlStore(tmp_path / "sessions")
    agent = agent_for(source, OfflineModel())
    await agent.send("/tool plot {}")
    header = agent.header
    [name] = [n for e in agent.session.events if e.message is not None for n in message_artifacts(e.message)]
    original = source.load_artifact(header, name)
    assert original is not None and original.startswith(b"\x89PNG")

    assert cli("sessions", "copy", "--from", str(source.root), "--to", "postgres", "--dsn", pg_database)[0] == 0
    database = PostgresStore(pg_database)
    assert database.load_artifact(header, name) == original
    back = tmp_path / "back"
    back.mkdir()
    assert cli("sessions", "copy", "--from", "postgres", "--to", str(back), "--dsn", pg_database)[0] == 0
    assert JsonlStore(back).load_artifact(header, name) == original
    _same(source, JsonlStore(back), header.id)
    database.close()
