"""What the extension keeps for its handlers in the tornado application settings."""

from __future__ import annotations

from dataclasses import dataclass

from .boundary import Boundary
from .pool import ReadPool
from .postgres import ServedPostgres

#: The key of :class:`ServerState` in ``web_app.settings``.
SETTINGS_KEY = "dsh_server"


@dataclass(frozen=True)
class ServerState:
    """The folders served, the reader pool every request runs in, the per-request timeout (seconds), and
    the PostgreSQL store served beside the folders' stores (``None``: none)."""

    boundary: Boundary
    pool: ReadPool
    timeout: float
    postgres: ServedPostgres | None = None
