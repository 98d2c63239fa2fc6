"""A small MCP server for the client tests, written with the official ``mcp`` SDK.

``python notes_server.py`` serves it over stdio; ``python notes_server.py --http PORT`` over Streamable
HTTP on 127.0.0.1 (``/mcp``), printing ``ready PORT`` once it listens (PORT 0: any free port). An
``Authorization`` header, when the environment names one in ``NOTES_TOKEN``, must match it.

Tools: ``read_note`` (read-only), ``write_note`` (acts: writes a file in the working directory),
``plot`` (read-only, answers an image), ``big`` (read-only, answers a long text), ``crash`` (the process
exits mid-call), ``hang`` (never answers), ``secret`` (echoes the value of ``$NOTES_SECRET_TOKEN``).
With ``NOTES_PID_FILE`` set it writes its process id there as it starts.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, TextContent, ToolAnnotations

server = MCPServer("notes")
READ_ONLY = ToolAnnotations(readOnlyHint=True)
#: A 1x1 red PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


@server.tool(description="Read the note called name.", annotations=READ_ONLY)
def read_note(name: str) -> str:
    path = Path(f"note-{name}.txt")
    return path.read_text() if path.exists() else f"no note {name!r} (cwd {os.getcwd()})"


@server.tool(description="Write text into the note called name.")
def write_note(name: str, text: str) -> str:
    Path(f"note-{name}.txt").write_text(text)
    return f"wrote note {name!r}"


@server.tool(description="A tiny plot.", annotations=READ_ONLY)
def plot() -> list[TextContent | ImageContent]:
    return [TextContent(type="text", text="here is the plot"),
            ImageContent(type="image", data=base64.b64encode(PIXEL).decode(), mimeType="image/png")]


@server.tool(description="A long answer of n characters.", annotations=READ_ONLY)
def big(n: int) -> str:
    return "x" * n


@server.tool(description="Exit the server process in the middle of the call.", annotations=READ_ONLY)
def crash() -> str:
    print("notes server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(description="Never answer.", annotations=READ_ONLY)
async def hang() -> str:
    await asyncio.sleep(3600)
    return "late"


@server.tool(description="The secret token.", annotations=READ_ONLY)
def secret() -> str:
    return f"the token is {os.environ.get('NOTES_SECRET_TOKEN', '')}"


def main() -> None:
    pid_file = os.environ.get("NOTES_PID_FILE")
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    if "--http" not in sys.argv:
        server.run("stdio")
        return
    import socket

    import uvicorn

    port = int(sys.argv[sys.argv.index("--http") + 1])
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    # Listening before saying so: a client that connects before uvicorn has started waits in the backlog instead
    # of being refused (under load the gap lasted long enough for a test's first connection to fail).
    sock.listen(128)
    print(f"ready {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app()
    token = os.environ.get("NOTES_TOKEN")
    if token:
        app = _require(app, token)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def _require(app, token):  # type: ignore[no-untyped-def]
    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    main()
