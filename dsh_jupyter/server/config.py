"""The settings of the dsh server extension: ``c.DshServer.<name>`` in ``jupyter_server_config.py``.

``DshServer`` is configured from the server's own configuration (it is created with the ``ServerApp`` as
its parent), so ``jupyter server --DshServer.request_timeout=5`` works too.
"""

from __future__ import annotations

import os

from traitlets import Bool, Float, Int, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from ..services import POSTGRES_DSN_ENV
from ..traits import DsnUnicode
from .boundary import Boundary
from .pool import DEFAULT_QUEUED, DEFAULT_WORKERS, ReadPool
from .postgres import ServedPostgres, served_postgres


class DshServer(Configurable):
    """Options of the dsh REST endpoints (the session picker of JupyterLab)."""

    extra_roots = List(
        Unicode(),
        help="Folders outside the server root whose session stores the server may also serve (absolute, or "
        "relative to the server root). By default only stores at or below the server root are served: "
        "sessions of other folders, a $DSH_SESSIONS_DIR elsewhere and links leading out of the root are "
        "refused.",
    ).tag(config=True)
    read_workers = Int(
        DEFAULT_WORKERS,
        help="Threads reading session stores for REST requests. They are the server's own, never the shared "
        "executor Jupyter's handlers use, so a slow or hostile store cannot starve Jupyter.",
    ).tag(config=True)
    max_queued = Int(
        DEFAULT_QUEUED,
        help="Requests that may wait for a free reading thread; beyond that a request is refused at once "
        "with 503 (busy).",
    ).tag(config=True)
    request_timeout = Float(
        10.0,
        help="Seconds a REST request may spend reading session stores before it is answered with 504 "
        "(too slow).",
    ).tag(config=True)
    index_at_start = Bool(
        True,
        help="Index the session stores of the server root and of extra_roots in the session catalog when the "
        "server starts (in a background thread of its own), so a store copied in is found at once.",
    ).tag(config=True)

    postgres_dsn = DsnUnicode(
        help="PostgreSQL session store whose sessions the server lists and serves beside the JSONL stores of "
        "its folders (`postgresql://role@host/db`; its password is never shown or logged). The server reads "
        "them as the DSN's role, so the database's row-level security decides what it sees: that role's own "
        "sessions and those shared with it. Default: `$DSH_POSTGRES_DSN` (what a JupyterHub spawner gives "
        "each user's server); empty: no PostgreSQL sessions are served.",
    ).tag(config=True)

    @default("postgres_dsn")
    def _dsn_from_environment(self) -> str:
        return os.environ.get(POSTGRES_DSN_ENV, "").strip()

    @validate("read_workers")
    def _positive_workers(self, proposal: dict[str, int]) -> int:
        value = int(proposal["value"])
        if value < 1:
            raise TraitError(f"DshServer.read_workers must be at least 1, got {value}")
        return value

    @validate("max_queued")
    def _nonnegative_queue(self, proposal: dict[str, int]) -> int:
        value = int(proposal["value"])
        if value < 0:
            raise TraitError(f"DshServer.max_queued cannot be negative, got {value}")
        return value

    @validate("request_timeout")
    def _positive_timeout(self, proposal: dict[str, float]) -> float:
        value = float(proposal["value"])
        if not value > 0:
            raise TraitError(f"DshServer.request_timeout must be a positive number of seconds, got {value}")
        return value

    def boundary(self, root_dir: str) -> Boundary:
        """The folders served by a server rooted at ``root_dir``."""
        return Boundary.of(root_dir, self.extra_roots)

    def make_pool(self) -> ReadPool:
        return ReadPool(self.read_workers, self.max_queued)

    def make_postgres(self) -> ServedPostgres | None:
        """The PostgreSQL store to serve, or ``None`` (no DSN, or psycopg missing)."""
        return served_postgres(self.postgres_dsn, self.request_timeout)
