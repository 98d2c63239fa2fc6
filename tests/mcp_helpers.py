"""The test MCP server (tests/mcp_servers/notes_server.py, the ``mcp`` SDK's own server) as a process."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NOTES_SERVER = Path(__file__).parent / "mcp_servers" / "notes_server.py"


def stdio_entry(**env: str) -> dict[str, object]:
    """The ``mcpServers`` entry that starts the notes server over stdio."""
    entry: dict[str, object] = {"command": sys.executable, "args": [str(NOTES_SERVER)]}
    if env:
        entry["env"] = env
    return entry


@contextmanager
def http_notes_server(folder: Path, token: str) -> Iterator[int]:
    """The notes server over Streamable HTTP on 127.0.0.1 (any free port, yielded), answering only requests
    that carry ``Authorization: Bearer <token>``; run in ``folder``."""
    process = subprocess.Popen([sys.executable, str(NOTES_SERVER), "--http", "0"], cwd=folder, text=True,
                               stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "NOTES_TOKEN": token})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.match(r"ready (\d+)", line)
        assert match, f"the HTTP MCP server did not start: {line!r}"
        yield int(match.group(1))
    finally:
        process.terminate()
        process.wait(10)
