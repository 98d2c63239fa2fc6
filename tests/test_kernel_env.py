"""The managed variables reach the kernel's own cells on every store: ``os.environ`` in a cell, ``!`` and
``%%bash`` see ``DSH_SESSION_ID`` and ``DSH_HOME`` after a ``%%dsh`` turn, ``DSH_SESSION_JSONL`` only where
there is a file, and values that do not belong to this kernel's session never linger."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kernel_helpers import KernelRunner, stream_text
from pg_helpers import PgServer

from dsh_jupyter.tools.env import ProcessEnv, ShellEnvContributor, ShellEnvRegistry

CELLS = [
    "%load_ext dsh_jupyter",
    "import os\nprint('before', os.environ.get('DSH_SESSION_ID'), os.environ.get('DSH_SESSION_JSONL'), "
    "os.environ.get('DSH_SHELL'))",
    "{config}",
    "%%dsh\nhello",
    "print('cell', os.environ.get('DSH_SESSION_ID'), os.environ.get('DSH_SESSION_JSONL'), os.environ.get('DSH_HOME'))",
    '!echo "bang=[$DSH_SESSION_ID] jsonl=[$DSH_SESSION_JSONL] home=[$DSH_HOME]"',
    '%%bash\necho "bash=[$DSH_SESSION_ID]"',
    "%dsh new",
    "print('new', os.environ.get('DSH_SESSION_ID'))",
    "%config DshMagics.export_env = False",
    "print('off', os.environ.get('DSH_SESSION_ID'), os.environ.get('DSH_HOME'))",
]


def run_kernel(runner: KernelRunner, work: Path, config: str, env: dict[str, str] | None = None) -> list[str]:
    # What a kernel started from an agent's shell would inherit: none of it names this kernel's session.
    inherited = {"DSH_SESSION_ID": "inherited-session", "DSH_SESSION_JSONL": "/nowhere/session.jsonl", "DSH_SHELL": "1"}
    cells = [code.replace("{config}", config) for code in CELLS]
    nb = runner.run(cells, work, env={**inherited, **(env or {})}, allow_errors=True)
    return [stream_text(cell.outputs) for cell in nb.cells]


def check(out: list[str], home: str, jsonl: bool) -> None:
    assert out[1].startswith("before None None None"), out[1]  # inherited values are gone before any session
    session_id = out[4].split()[1]
    assert len(session_id) == 36, out
    location = out[4].split()[2]
    if jsonl:
        assert location.endswith(f"{session_id}/session.jsonl") and Path(location).is_file()
    else:
        assert location == "None"
    assert out[4].split()[3] == home
    assert f"bang=[{session_id}]" in out[5] and f"home=[{home}]" in out[5]
    assert ("jsonl=[]" in out[5]) is not jsonl
    assert f"bash=[{session_id}]" in out[6]
    new_id = out[8].split()[1]
    assert new_id != session_id and len(new_id) == 36, out[8]  # %dsh new: the new session's id at once
    assert out[10].split()[1:] == ["inherited-session", home], out[10]  # export_env off: what the kernel had


@pytest.mark.slow
@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_every_file_store_exports_the_session(store: str, tmp_path: Path, kernel_runner: KernelRunner) -> None:
    out = run_kernel(kernel_runner, tmp_path, f'%config DshMagics.store = "{store}"')
    check(out, os.environ["DSH_HOME"], jsonl=store == "jsonl")


@pytest.mark.slow
def test_postgres_exports_the_session(pg_server: PgServer, tmp_path: Path, kernel_runner: KernelRunner) -> None:
    import psycopg

    from dsh_jupyter.store.postgres_schema import ensure_schema

    name = pg_server.create_database("env")
    try:
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            ensure_schema(conn)
        pg_server.create_role("env_user", "env-user-pw")
        out = run_kernel(kernel_runner, tmp_path, '%config DshMagics.store = "postgres"',
                         {"DSH_POSTGRES_DSN": pg_server.dsn(name, "env_user", "env-user-pw")})
    finally:
        pg_server.drop_database(name)
    check(out, os.environ["DSH_HOME"], jsonl=False)


# --------------------------------------------------------------------------- the rule, without a kernel


def test_process_env_follows_the_registry_snapshot(tmp_path: Path) -> None:
    from dsh_jupyter.session.header import SessionHeader
    from dsh_jupyter.tools.base import ToolExecution

    registry = ShellEnvRegistry(tmp_path, env={})
    registry.register(ShellEnvContributor("extra", {"DSH_EXTRA": "An extra fact."}, lambda e: {"DSH_EXTRA": "x"}
                                          if e.header is not None else {}))
    environ = {"DSH_SESSION_ID": "stale", "DSH_SHELL": "1", "DSH_EXTRA": "old", "PATH": "/bin"}
    process = ProcessEnv(environ)
    session = ToolExecution.create("env", str(tmp_path), header=SessionHeader(id="s-1", created_at=1, cwd=None))
    process.apply(registry, registry.collect(session))
    assert environ == {"DSH_SESSION_ID": "s-1", "DSH_EXTRA": "x", "DSH_HOME": str(tmp_path), "PATH": "/bin"}
    process.apply(registry, registry.collect(ToolExecution.create("env", str(tmp_path))))
    assert environ == {"DSH_HOME": str(tmp_path), "PATH": "/bin"}  # no session: nothing of one lingers
    process.withdraw()
    assert environ == {"DSH_SESSION_ID": "stale", "DSH_SHELL": "1", "DSH_EXTRA": "old", "PATH": "/bin"}


def test_a_broken_contributor_costs_its_values_never_the_session(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_jupyter.notebook.config import DshSettings
    from dsh_jupyter.notebook.host import NotebookHost

    host = NotebookHost(DshSettings(model="offline", model_titles=False, catalog=False), shell=None,
                        cwd=str(tmp_path))
    try:
        host.env_registry.register(ShellEnvContributor("broken", {"DSH_BROKEN": "Breaks."},
                                                       lambda e: {"DSH_BROKEN": 42}))  # type: ignore[dict-item]
        agent, _ = host.new_session()
        assert host.agent is agent
        assert "could not all be given to the kernel" in capsys.readouterr().err
        assert "DSH_SESSION_ID" not in os.environ and os.environ["DSH_HOME"] == str(host.env_registry.dsh_home)
    finally:
        host.close()
