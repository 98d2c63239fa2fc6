"""The test suite's own MCP notes server (``tests/mcp_servers/notes_server.py``) keeps its word."""

from __future__ import annotations

import socket
from pathlib import Path

from mcp_helpers import http_notes_server


def test_the_http_server_takes_connections_as_soon_as_it_says_it_is_ready(tmp_path: Path) -> None:
    """``ready PORT`` comes once the socket listens: a client that connects at once waits in the backlog until the
    server runs instead of being refused (a test's first request under load was refused in the gap)."""
    with http_notes_server(tmp_path, "t0ken") as port, socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
