"""Indexing at server start: the session stores of the served folders, registered in the session catalog.

It obeys the same rules as a request: only stores inside the :class:`~dsh_jupyter.server.boundary.Boundary`
are touched, the work runs in one daemon thread of its own (never the executor Jupyter's handlers share,
never the request pool), each store gets a time budget after which the catalog's own background worker
carries on, and every failure is logged, never raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from ..store import default_sessions_dir
from .boundary import Boundary
from .sessions import server_catalog

log = logging.getLogger(__name__)

#: Name of the indexing thread (one per server start).
THREAD_NAME = "dsh-server-index"


def served_stores(boundary: Boundary) -> list[Path]:
    """The default session store of each served folder (the root first) that lies inside the boundary."""
    stores: list[Path] = []
    for folder in boundary.roots:
        store = default_sessions_dir(folder)
        if not boundary.allows(store):
            log.info("dsh-jupyter: not indexing the session store of %s: it lies outside the served folders "
                     "(DSH_SESSIONS_DIR?)", boundary.shown(folder))
            continue
        if store not in stores:
            stores.append(store)
    return stores


def index_stores(boundary: Boundary, index: Callable[[Path], object] | None = None) -> None:
    """Index each of :func:`served_stores` with ``index`` (default: register it in the session catalog).

    Never raises: a store that cannot be indexed is logged and the next one is tried."""
    if index is None:
        index = server_catalog
    for store in served_stores(boundary):
        try:
            index(store)
        except Exception:
            log.exception("dsh-jupyter: indexing the session store of %s at start failed",
                          boundary.shown(store))


def index_in_background(boundary: Boundary, index: Callable[[Path], object] | None = None) -> threading.Thread:
    """Run :func:`index_stores` in a daemon thread of its own; returns the thread."""
    thread = threading.Thread(target=index_stores, args=(boundary, index), name=THREAD_NAME, daemon=True)
    thread.start()
    return thread
