"""What the extension keeps for its handlers in the tornado application settings."""

from __future__ import annotations

from dataclasses import dataclass

from .boundary import Boundary
from .pool import ReadPool

#: The key of :class:`ServerState` in ``web_app.settings``.
SETTINGS_KEY = "dsh_server"


@dataclass(frozen=True)
class ServerState:
    """The folders served, the reader pool every request runs in, and the per-request timeout (seconds)."""

    boundary: Boundary
    pool: ReadPool
    timeout: float
