"""The session catalog: keystroke-fast discovery of sessions across every notebook folder.

An SQLite index in ``DSH_HOME`` of every session in every known JSONL store (id, store, cwd, created time,
latest title, message counts, log size and mtime), with full-text search over projected user/assistant
text. It is derived from the logs and rebuilt from them when missing or damaged.

- :func:`open_catalog` / :class:`Catalog`: the index and its queries;
- :class:`CatalogEntry`: one session as the catalog knows it.

See :mod:`dsh_jupyter.catalog.core` for how freshness is kept cheap and where each concern lives.
"""

from __future__ import annotations

from .core import Catalog, open_catalog
from .entries import CatalogEntry
from .indexer import SyncReport
from .registry import StoreInfo, store_root
from .schema import CatalogCorrupt, CatalogUnavailable

__all__ = [
    "Catalog",
    "CatalogCorrupt",
    "CatalogEntry",
    "CatalogUnavailable",
    "StoreInfo",
    "SyncReport",
    "open_catalog",
    "store_root",
]
