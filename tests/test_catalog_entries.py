"""Catalog entries: labels, paths, JSON, and the shared ranking rule."""

from __future__ import annotations

import itertools

from dsh_jupyter.catalog.entries import CatalogEntry, workspace_rank
from dsh_jupyter.references.candidates import workspace_rank as reference_rank


def test_the_ranking_rule_is_the_references_rule() -> None:
    assert workspace_rank is reference_rank  # one rule, not a copy that could drift
    for a, b in itertools.product([None, "/a", "/b"], repeat=2):
        assert workspace_rank(a, b) == reference_rank(a, b)


def test_label_path_filter_and_json() -> None:
    entry = CatalogEntry("Id-1", "/store", "Id-1", "/Work/Proj", 5, None, 3, 2, 1, 1, 100, 7)
    assert entry.label == "Id-1" and entry.path == "/store/Id-1/session.jsonl"
    assert entry.matches("") and entry.matches("id-") and entry.matches("work/p") and not entry.matches("zz")
    titled = CatalogEntry("x", "/s", "x", None, 1, "Title", notebook="n.ipynb")
    assert titled.label == "Title" and titled.matches("title") and not titled.matches("/")
    record = titled.to_json()
    assert "cwd" not in record and record["notebook"] == "n.ipynb" and record["title"] == "Title"
    assert entry.to_json()["messageCounts"] == {"events": 3, "surface": 2, "user": 1, "assistant": 1}
    assert entry.order_key("/Work/Proj") < titled.order_key("/Work/Proj")


def test_the_log_file_name_is_the_stores() -> None:
    from dsh_jupyter.catalog.entries import LOG_NAME
    from dsh_jupyter.store.paths import LOG_NAME as STORE_LOG_NAME

    assert LOG_NAME == STORE_LOG_NAME
