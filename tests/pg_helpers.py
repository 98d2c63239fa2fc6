"""A real PostgreSQL server for the tests, started by the test session itself.

``initdb`` in a fresh temporary folder, run as a non-root user (as root: the ``postgres`` OS user through
``runuser``), listening on 127.0.0.1 at a free port with its unix socket in that folder, stopped when the
test session ends. Password authentication (scram) over TCP, like a hub's database. Without the server
binaries the tests that need it are skipped, except in CI (``CI=true``), where that is a failure.

Fixtures: ``pg_server`` (session-scoped :class:`PgServer`) and ``pg_database`` (a fresh, empty database
per test, as a DSN for the superuser).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    import psycopg

    from dsh_jupyter.store.postgres import PostgresStore

SUPERUSER = "dsh_admin"
SUPERUSER_PASSWORD = "admin-secret-pw"
_counter = itertools.count()


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL server binaries (Debian layout), or ``$DSH_PG_BINDIR``."""
    env = os.environ.get("DSH_PG_BINDIR")
    if env:
        return Path(env) if (Path(env) / "initdb").is_file() else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dsn(user: str, password: str, port: int, dbname: str) -> str:
    return f"postgresql://{quote(user)}:{quote(password)}@127.0.0.1:{port}/{quote(dbname)}"


@dataclass
class PgServer:
    """A running test server: ``port``, its folder ``root``, and DSNs for any role and database."""

    bindir: Path
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    def dsn(self, dbname: str = "postgres", user: str = SUPERUSER, password: str = SUPERUSER_PASSWORD) -> str:
        return dsn(user, password, self.port, dbname)

    def admin(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        import psycopg

        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def create_database(self, prefix: str = "t") -> str:
        name = f"{prefix}_{os.getpid()}_{next(_counter)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" STRATEGY FILE_COPY')
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def create_role(self, name: str, password: str) -> str:
        """A plain login role (no superuser, no RLS bypass); returns its name."""
        with self.admin() as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
            if exists is None:
                conn.execute(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")
        return name


@dataclass
class RoleDatabase:
    """One test database and the login roles made for it: each role's DSN and its session store."""

    server: PgServer
    db: str
    passwords: Mapping[str, str]

    @classmethod
    def with_roles(cls, server: PgServer, database_dsn: str, passwords: Mapping[str, str]) -> Self:
        """The database of ``database_dsn`` (a superuser's DSN from :func:`pg_database`) with a login role for
        each name in ``passwords``."""
        for role, password in passwords.items():
            server.create_role(role, password)
        return cls(server, database_dsn.rsplit("/", 1)[1], dict(passwords))

    def dsn(self, role: str) -> str:
        return self.server.dsn(self.db, role, self.passwords[role])

    def store(self, role: str) -> PostgresStore:
        from dsh_jupyter.store.postgres import PostgresStore

        return PostgresStore(self.dsn(role))


def _as_server_user() -> list[str]:
    """The command prefix that runs a server binary as a non-root user."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "postgres", "--"]


def start_server(bindir: Path, *, durable: bool = False) -> PgServer:
    """Start a server in a new temporary folder. Tests run it without fsync; ``durable=True`` keeps
    PostgreSQL's defaults (fsync, synchronous commit), for benchmarks of commit latency."""
    root = Path(tempfile.mkdtemp(prefix="dsh-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
    os.chmod(root, 0o700)
    prefix = _as_server_user()
    pwfile = root / "pw"
    pwfile.write_text(SUPERUSER_PASSWORD + "\n")
    if os.geteuid() == 0:
        os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
    subprocess.run(
        [*prefix, str(bindir / "initdb"), "-D", str(root / "data"), "-U", SUPERUSER, f"--pwfile={pwfile}",
         "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
         "--no-sync"],
        check=True, capture_output=True,
    )
    pwfile.unlink()
    port = _free_port()
    options = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
               "-c max_connections=200 -c shared_buffers=128MB")
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    result = subprocess.run(
        [*prefix, str(bindir / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "server.log"),
         "-o", options, "-w", "-t", "60", "start"],
        check=False, capture_output=True,
    )
    if result.returncode != 0:
        log = (root / "server.log").read_text(errors="replace") if (root / "server.log").exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {result.stderr.decode()}\n{log[-3000:]}")
    return PgServer(bindir, root, port)


def stop_server(server: PgServer) -> None:
    subprocess.run([*_as_server_user(), str(server.bindir / "pg_ctl"), "-D", str(server.data), "-m", "fast",
                    "-w", "stop"], check=False, capture_output=True)
    shutil.rmtree(server.root, ignore_errors=True)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the PostgreSQL tests (scripts/run-tests.sh installs postgresql)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = find_bindir()
    if bindir is None:
        _unavailable("PostgreSQL server binaries not found (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'dsh-jupyter[postgres]')")
    assert bindir is not None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no 'postgres' OS user to run the server as")
    server = start_server(bindir)
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """A fresh empty database for one test; yields the superuser's DSN to it."""
    name = pg_server.create_database()
    try:
        yield pg_server.dsn(name)
    finally:
        pg_server.drop_database(name)

