"""A notebook on a real kernel (nbclient) with ``DshMagics.store = "postgres"``: the turn lands in the
database under the kernel's role, there is no session file, and the DSN's password is never shown."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, named_outputs, output_text
from pg_helpers import PgServer

from dsh_jupyter.store.postgres_schema import ensure_schema

HOOKS = Path(__file__).parent / "hook_scripts"
PASSWORD = "alice-pw-Z9q"

CELLS = {
    "load": "%load_ext dsh_jupyter",
    "config": '%config DshMagics.store = "postgres"\n%config DshMagics.claude_hooks = {claude!r}\n'
              "%config DshMagics.codex_hooks = {codex!r}",
    "turn": "%%dsh\nhello postgres",
    "locate": "loc = %dsh locate\nprint('location:', repr(loc))",
    "env": "import os\nprint('jsonl:', repr(os.environ.get('DSH_SESSION_JSONL')), "
           "'id:', os.environ.get('DSH_SESSION_ID'))",
    "bash": "!echo \"bash-jsonl=[$DSH_SESSION_JSONL]\"",
    "sessions": "%dsh new\n%dsh sessions --body hello postg",
    "settings": "%config DshMagics",
    "dsn_value": "%config DshMagics.postgres_dsn = {dsn!r}\n%config DshMagics",
    "bad_dsn": "%config DshMagics.postgres_dsn = {bad!r}\n%dsh new",
    "bad_turn": "%%dsh\nthis cannot be saved",
}


@dataclass
class Ran:
    cells: dict[str, str]
    dsn: str
    admin: str
    records: Path


def _settings(event: str, command: str) -> dict[str, Any]:
    return {"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]}}


@pytest.fixture(scope="module")
def ran(pg_server: PgServer, kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    import psycopg

    name = pg_server.create_database("nb")
    with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
        ensure_schema(conn)
    pg_server.create_role("nb_alice", PASSWORD)
    dsn = pg_server.dsn(name, "nb_alice", PASSWORD)
    work = tmp_path_factory.mktemp("pg-notebook")
    home = tmp_path_factory.mktemp("pg-home")
    records = tmp_path_factory.mktemp("pg-hooks")
    claude, codex = work / "claude.json", work / "codex.json"
    for path, dialect in ((claude, "claude"), (codex, "codex")):
        command = f"{sys.executable} {HOOKS / 'record.py'} {records / dialect}"
        path.write_text(json.dumps(_settings("UserPromptSubmit", command)))
    bad = pg_server.dsn(name, "nb_alice", "not-the-password")
    sources = {key: code.format(claude=str(claude), codex=str(codex), dsn=dsn, bad=bad) for key, code in CELLS.items()}
    try:
        nb = kernel_runner.run(list(sources.values()), work, env={"DSH_HOME": str(home), "DSH_POSTGRES_DSN": dsn},
                               allow_errors=True)
        cells = {key: output_text(outputs) for key, outputs in named_outputs(list(sources), nb).items()}
        yield Ran(cells, dsn, pg_server.dsn(name), records)
    finally:
        pg_server.drop_database(name)


@pytest.mark.slow
def test_the_turn_lands_in_the_database_under_the_kernels_role(ran: Ran) -> None:
    import psycopg

    with psycopg.connect(ran.admin) as conn:
        rows = conn.execute("SELECT owner, next_seq, header FROM dsh.sessions").fetchall()
        assert len(rows) == 1
        owner, next_seq, header = rows[0]
        assert owner == "nb_alice" and next_seq > 3
        session_id = json.loads(bytes(header))["id"]
        bodies = [json.loads(bytes(b)) for (b,) in conn.execute(
            "SELECT body FROM dsh.events WHERE type = 'user/message' ORDER BY seq")]
    assert bodies[0]["data"]["content"][0]["text"] == "hello postgres"
    assert f"id: {session_id}" in ran.cells["env"]


@pytest.mark.slow
def test_the_kernel_finds_it_by_its_body(ran: Ran) -> None:
    session_id = ran.cells["env"].split("id: ", 1)[1].split()[0]
    assert session_id in ran.cells["sessions"], ran.cells["sessions"]


@pytest.mark.slow
def test_there_is_no_session_file(ran: Ran) -> None:
    assert "location: None" in ran.cells["locate"]
    assert "PostgreSQL store postgresql://nb_alice@127.0.0.1" in ran.cells["locate"]
    assert "keeps no per-session file" in ran.cells["locate"]
    assert "jsonl: None" in ran.cells["env"]
    assert "bash-jsonl=[]" in ran.cells["bash"]


@pytest.mark.slow
def test_hooks_get_no_transcript_path(ran: Ran) -> None:
    claude = json.loads((ran.records / "claude" / "stdin.bin").read_bytes())
    codex = json.loads((ran.records / "codex" / "stdin.bin").read_bytes())
    assert claude["prompt"] == codex["prompt"] == "hello postgres"
    assert claude["transcript_path"] == "" and codex["transcript_path"] is None


@pytest.mark.slow
def test_the_password_is_never_shown(ran: Ran) -> None:
    everything = "\n".join(ran.cells.values())
    assert PASSWORD not in everything and "not-the-password" not in everything
    assert "postgres_dsn" in ran.cells["settings"]
    assert "postgresql://nb_alice@127.0.0.1" in ran.cells["dsn_value"]


@pytest.mark.slow
def test_a_wrong_password_is_one_clear_message(ran: Ran) -> None:
    text = ran.cells["bad_turn"]
    assert "cannot connect to the session database postgresql://nb_alice@127.0.0.1" in text, text
    assert "postgres_dsn" in text and "Traceback" not in text and "Error:" not in text
