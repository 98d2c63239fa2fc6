"""The list of known stores beside the catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_jupyter.catalog.registry import add_roots, read_roots, registry_path, remove_roots


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
