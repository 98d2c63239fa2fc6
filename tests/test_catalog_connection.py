"""The catalog file: one connection per thread, plain errors when it cannot be had, reopening when replaced."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from dsh_jupyter.catalog import connection
from dsh_jupyter.catalog.connection import Connections
from dsh_jupyter.catalog.registry import add_roots
from dsh_jupyter.catalog.schema import CatalogCorrupt, CatalogUnavailable


def test_each_thread_has_its_own_connection_and_a_new_catalog_learns_the_stores(tmp_path: Path) -> None:
    home = tmp_path / "home"
    add_roots(home, ["/s1", "/s2"])
    conns = Connections(home / "catalog.sqlite", home)
    with conns.db(40) as conn:
        assert [r[0] for r in conn.execute("SELECT root FROM stores ORDER BY id")] == [b"/s1", b"/s2"]
        again = conn
    with conns.db(40) as conn:
        assert conn is again
    other: list[sqlite3.Connection] = []

    def use() -> None:
        with conns.db(40) as c:
            other.append(c)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    assert other and other[0] is not again
    conns.close()
    with pytest.raises(CatalogUnavailable, match="closed"), conns.db(40):
        pass


def test_a_catalog_that_cannot_be_created_says_where_and_is_not_retried_at_once(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    conns = Connections(blocker / "catalog.sqlite", blocker)
    with pytest.raises(CatalogUnavailable, match=f"cannot create the catalog at {blocker}"), conns.db(40):
        pass
    blocker.unlink()
    with pytest.raises(CatalogUnavailable, match="cannot create"), conns.db(40):
        pass  # within the retry pause: the same answer, without trying
    assert connection.RETRY_SECONDS > 0
    conns._retry_at = time.monotonic()  # the pause is over
    with conns.db(40) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() is not None


def test_a_damaged_file_is_set_aside_and_a_replaced_one_reopened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = home / "catalog.sqlite"
    conns = Connections(path, home)
    with conns.db(40) as conn:
        conn.execute("CREATE TABLE marker(x)")
    conns.close()
    path.write_bytes(b"this is not a database" * 300)
    conns = Connections(path, home)
    with pytest.raises(CatalogCorrupt, match="rebuilt from the logs"), conns.db(40) as conn:
        conn.execute("SELECT * FROM marker")
    assert Path(str(path) + ".corrupt").exists()
    with conns.db(40) as conn:  # a fresh file, with the schema
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
        conn.execute("CREATE TABLE marker(x)")
    path.unlink()  # replaced under us: the next use opens the new file
    with conns.db(40) as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'marker'").fetchone() is None
    conns.close()
