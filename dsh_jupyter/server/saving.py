"""The server's pre-save hook: a notebook saved mid-turn does not keep "● running" in the file.

Registered on the server's ContentsManager by :func:`~dsh_jupyter.server._load_jupyter_server_extension`;
what it rewrites and why is in :mod:`dsh_jupyter.ui.saved_footer`. The session log is read only for a footer
that still says "running", from the store of the notebook's folder, within the folders the server serves.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .boundary import Boundary, require_log
from .sessions import _store_of, allowed_store, resolve_folder

log = logging.getLogger(__name__)


def turn_outcomes(folder: Path, boundary: Boundary) -> Callable[[str, float], tuple[str, float] | None]:
    """How a turn of a session in ``folder``'s store ended, read from its log (``None``: not known)."""
    from ..ui.saved_footer import turn_outcome

    def outcome(session_id: str, started_at: float) -> tuple[str, float] | None:
        store = _store_of(allowed_store(folder, boundary))
        if not store.exists(session_id):
            return None
        require_log(store.log_path(session_id), session_id, boundary)
        return turn_outcome(store.load(session_id).events, started_at)

    return outcome


def settle_footers_hook(root_dir: str, boundary: Boundary) -> Callable[..., None]:
    """The pre-save hook: each footer of a saved notebook still "running" says what is known instead."""

    def hook(model: dict[str, Any], path: str, **_kwargs: Any) -> None:
        content = model.get("content") if isinstance(model, dict) else None
        if model.get("type") != "notebook" or not isinstance(content, dict):
            return
        from ..ui.saved_footer import settle_saved_footers

        try:
            folder = resolve_folder(root_dir, posixpath.dirname(path.strip("/")))
        except Exception:  # an odd path: the footers are settled without the log
            log.debug("dsh: no session store for %s", path, exc_info=True)
            settle_saved_footers(content, lambda _session, _started: None)
            return
        settled = settle_saved_footers(content, turn_outcomes(folder, boundary))
        if settled:
            log.info("dsh-jupyter: %s was saved mid-turn; %d footer(s) say so in the file", path, settled)

    return hook
