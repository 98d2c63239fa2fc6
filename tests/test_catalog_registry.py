"""Known stores: the ``stores`` table and the list kept beside the catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_jupyter.catalog.registry import (
    StoreInfo,
    add_roots,
    load_stores,
    read_roots,
    registry_path,
    remove_roots,
    store_id,
    store_infos,
    store_root,
)
from dsh_jupyter.catalog.rows import transaction, upsert_store
from dsh_jupyter.catalog.schema import connect, ensure_schema


def test_roots_are_added_once_and_kept_in_order(tmp_path: Path) -> None:
    assert read_roots(tmp_path) == []
    assert add_roots(tmp_path, ["/a", "/b", "/a"]) == ["/a", "/b"]
    assert add_roots(tmp_path, ["/b", "/c"]) == ["/c"]
    assert read_roots(tmp_path) == ["/a", "/b", "/c"]
    remove_roots(tmp_path, ["/b", "/nowhere"])
    assert read_roots(tmp_path) == ["/a", "/c"]
    data = json.loads(registry_path(tmp_path).read_text())
    assert data["version"] == 1 and [s["root"] for s in data["stores"]] == ["/a", "/c"]


def test_undecodable_paths_round_trip(tmp_path: Path) -> None:
    odd = "/data/caf\udce9"  # a Latin-1 byte in a path, as os.fsdecode gives it
    add_roots(tmp_path, [odd])
    assert read_roots(tmp_path) == [odd]


@pytest.mark.parametrize("content", ["{not json", '{"stores": "nope"}', '[1, 2]', '{"stores": [{"root": 3}, 5]}'])
def test_a_damaged_list_reads_as_empty_and_is_replaced(tmp_path: Path, content: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    registry_path(tmp_path).write_text(content)
    assert read_roots(tmp_path) == []
    assert add_roots(tmp_path, ["/x"]) == ["/x"]
    assert read_roots(tmp_path) == ["/x"]


def test_an_unwritable_home_is_reported_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert add_roots(blocker, ["/x"]) == []
    assert "could not record" in caplog.text


def test_a_store_is_named_by_its_resolved_path_and_listed_from_the_table(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert store_root(tmp_path / "link" / ".." / "real") == store_root(tmp_path / "link") == str(real)
    conn = connect(tmp_path / "c.sqlite", busy_ms=100)
    try:
        ensure_schema(conn)
        first, _ = transaction(conn, lambda c: upsert_store(c, str(real)))
        transaction(conn, lambda c: upsert_store(c, "/b\udcff"))
        assert store_id(conn, str(real)) == first and store_id(conn, "/nowhere") is None
        known = load_stores(conn)
        assert [s.root for s in known.values()] == [str(real), "/b\udcff"]
        assert not known[first].ready and known[first].dir_mtime_ns == -1
        assert store_infos(conn) == [StoreInfo("/b\udcff", 0, False, False), StoreInfo(str(real), 0, False, False)]
        assert store_infos(conn)[0].to_json() == {"root": "/b\udcff", "sessions": 0, "ready": False, "missing": False}
    finally:
        conn.close()
