"""``dsh/mcp``: the MCP tools of ``dsh-jupyter mcp`` over Streamable HTTP, inside the Jupyter server.

Our own handler, not ``jupyter-server-mcp``'s entry point: the endpoint is one more route of this extension, so a
request passes Jupyter's own authentication (the server's token or login, ``@tornado.web.authenticated``) and
authorisation (resource ``dsh``, action ``read``) like every ``dsh/api`` request, on the server's own port and
``base_url``, with no second process, port or credential to configure. The folder served is the server root.

With the server's kernels it also offers ``notebook_read`` and ``notebook_edit`` on notebooks open in the browser
(:mod:`.mcp_workspace`; an edit is a proposal the person accepts in the page).

The request is handed to the ``mcp`` SDK's Streamable HTTP transport (stateless, JSON answers: every POST is
one JSON-RPC exchange), which runs its task group for the life of the server. Without the ``mcp`` package the
route answers 501 with the install line. The SDK loads at the first request, never when the extension starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from .._json import dumps

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from ..mcp_server.tools import FolderTools

ROUTE = r"dsh/mcp/?"
#: Where the served folder and the running transport live in the tornado settings.
SETTINGS_KEY = "dsh_mcp"
F = TypeVar("F", bound=Callable[..., Any])
#: Authorisation of every MCP request as ``read`` on ``dsh`` (its tools only read), whatever the HTTP method.
reads = cast("Callable[[F], F]", authorized("read", resource="dsh"))
INSTALL_HINT = "the MCP endpoint needs the mcp package on the server: pip install 'dsh-jupyter[mcp]'"


class McpEndpoint:
    """The served folder's MCP server and its Streamable HTTP transport, started at the first request."""

    def __init__(self, root: str, settings: Any = None) -> None:
        self.root = root
        self._settings = settings  # the tornado settings: the server's sessions and kernels
        self._manager: StreamableHTTPSessionManager | None = None
        self._tools: FolderTools | None = None
        self._started: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def manager(self) -> StreamableHTTPSessionManager:
        if self._started is None:
            self._started = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._serve(), name="dsh-mcp-http")
        await self._started.wait()
        if self._manager is None:  # the start failed (logged by _serve)
            raise web.HTTPError(500, "the MCP endpoint could not start; see the server log")
        return self._manager

    async def _serve(self) -> None:
        from mcp.server.transport_security import TransportSecuritySettings

        from ..mcp_server import served
        from ..mcp_server.tools import build_server

        assert self._started is not None
        try:
            server, self._tools = build_server(served(self.root))
            if self._settings is not None:
                from .mcp_workspace import NotebookBridge, register_workspace_tools

                register_workspace_tools(server, NotebookBridge(self._settings, self.root))
            # Jupyter checks the Host and Origin of every request itself (allow_remote_access, allow_origin).
            server.streamable_http_app(json_response=True, stateless_http=True, transport_security=(
                TransportSecuritySettings(enable_dns_rebinding_protection=False)))
            manager = server.session_manager
        except Exception:
            self._started.set()
            raise
        async with manager.run():
            self._manager = manager
            self._started.set()
            await asyncio.Event().wait()  # until the server stops (the task is cancelled)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._tools is not None:
            self._tools.close()


class McpHandler(APIHandler):
    """``POST dsh/mcp`` (and the transport's ``GET``/``DELETE``): one MCP exchange, through the SDK's transport."""

    auth_resource = "dsh"

    @web.authenticated
    @reads
    async def post(self) -> None:
        await self._exchange()

    @web.authenticated
    @reads
    async def get(self) -> None:
        await self._exchange()

    @web.authenticated
    @reads
    async def delete(self) -> None:
        await self._exchange()

    async def _exchange(self) -> None:
        try:
            import mcp  # noqa: F401 - only to answer with the install line
        except ImportError:
            self.set_status(501)
            self.finish(dumps({"message": INSTALL_HINT}))
            return
        endpoint: McpEndpoint = self.settings[SETTINGS_KEY]
        manager = await endpoint.manager()
        request = self.request
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "scheme": request.protocol, "path": "/mcp", "raw_path": b"/mcp", "root_path": "",
            "query_string": request.query.encode("latin-1"),
            "headers": [(name.lower().encode("latin-1"), value.encode("latin-1"))
                        for name, value in request.headers.get_all()],
            "client": (request.remote_ip, 0), "server": (request.host_name, 0),
        }
        body, sent, finished = request.body, False, asyncio.Event()

        async def receive() -> MutableMapping[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.set_status(message["status"])
                self.clear_header("Content-Type")
                for name, value in message.get("headers", []):
                    self.add_header(name.decode("latin-1"), value.decode("latin-1"))
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    self.write(chunk)
                    await self.flush()
                if not message.get("more_body", False):
                    finished.set()

        try:
            await manager.handle_request(scope, receive, send)
        finally:
            finished.set()
        if not self._finished:
            self.finish()


def add_endpoint(web_app: Any, root: str, base_url: str) -> McpEndpoint:
    """Register ``dsh/mcp`` under ``base_url``, serving ``root``'s sessions."""
    from jupyter_server.utils import url_path_join

    endpoint = McpEndpoint(root, web_app.settings)
    web_app.settings[SETTINGS_KEY] = endpoint
    web_app.add_handlers(".*$", [(url_path_join(base_url, ROUTE), McpHandler)])
    return endpoint
