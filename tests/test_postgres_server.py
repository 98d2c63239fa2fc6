"""The test suite's own PostgreSQL server (tests/pg_helpers.py): real, local, non-root, password-protected."""

from __future__ import annotations

import pytest
from pg_helpers import PgServer


def test_server_runs_as_a_non_root_role_on_loopback(pg_server: PgServer, pg_database: str) -> None:
    import psycopg

    with psycopg.connect(pg_database) as conn:
        row = conn.execute("SELECT inet_server_addr()::text, inet_server_port()").fetchone()
        assert row is not None
        addr, port = row
        assert addr.startswith("127.0.0.1") and port == pg_server.port
        assert conn.execute("SHOW data_directory").fetchone() == (str(pg_server.data),)
    assert (pg_server.data / "postmaster.pid").stat().st_uid != 0


def test_a_wrong_password_is_refused(pg_server: PgServer) -> None:
    import psycopg

    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_server.dsn(password="wrong"))


def test_each_test_gets_an_empty_database(pg_database: str) -> None:
    import psycopg

    with psycopg.connect(pg_database) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
        assert tables.fetchone() == (0,)
