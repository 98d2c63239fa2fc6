"""One MCP server's connection, on the MCP event loop: start, list its tools, call them, stop.

Every coroutine here runs on the loop of :class:`~.clients.McpClients` (a daemon thread, never the
kernel's main thread). The connection lives in one task (:meth:`ServerConnection._serve`) because the
SDK's client must be entered and left in the same task; calls are made from other tasks on the same
loop. A failure of any kind (the program is missing, it hangs, it exits mid-call, it answers something
that is not MCP) becomes a :class:`McpServerError` whose message is one line for the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, TextIO, cast

from ..clip import one_line
from .config import ServerConfig, command_allowed

State = Literal["not started", "disabled", "blocked", "untrusted", "starting", "ready", "failed", "stopped"]

#: Seconds a server that failed waits before the next prompt tries it again (``%dsh mcp --connect``: at once).
RETRY_SECONDS = 60.0
#: Characters of a message (a server's error, its last stderr line) one error line keeps.
MAX_REASON = 240
#: Seconds without a call after which a call first checks (a ping) that the server is still there.
IDLE_CHECK_SECONDS = 5.0
#: The most tools one server may contribute (a paginated listing is followed that far).
MAX_TOOLS = 200


# The SDK logs what a server sent that it could not read; without a handler of the user's, Python would print
# those tracebacks on the kernel's stderr (into a cell). The one-line error says it instead.
logging.getLogger("mcp").addHandler(logging.NullHandler())

#: Connection tasks cancelled while they connect, kept until they have cleaned up (a process to end).
_CLEANING: set[asyncio.Task[None]] = set()


class McpServerError(Exception):
    """A server could not do what was asked; the message is one line naming the server."""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_failure(exc: BaseException, config: ServerConfig, http_status: int | None = None) -> str:
    """Why a server failed, in the user's terms (what was configured, what happened); ``http_status`` is the
    last error status an HTTP server answered (the SDK reports it only as "an error response")."""
    exc = _leaf(exc)
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in ("mcp", "httpx2"):
        return "the MCP SDK is not installed in this kernel's environment: pip install 'dsh-jupyter[mcp]'"
    if isinstance(exc, FileNotFoundError) and config.transport == "stdio":
        return f"its command {config.command!r} was not found; install it or fix \"command\" in {config.origin}"
    if isinstance(exc, PermissionError) and config.transport == "stdio":
        return f"its command {config.command!r} cannot be run ({exc.strerror})"
    if getattr(getattr(exc, "error", None), "message", None) == "Connection closed":
        return "it exited before it answered" if config.transport == "stdio" else \
            "the connection closed before it answered"
    status = getattr(getattr(exc, "response", None), "status_code", None) or http_status
    if isinstance(status, int):
        hint = " (check \"headers\", such as the token)" if status in (401, 403) else ""
        return f"{config.url} answered HTTP {status}{hint}"
    name = type(exc).__name__
    if "Connect" in name or isinstance(exc, ConnectionError):
        return f"could not connect to {config.url or config.target()} ({one_line(str(exc), 120) or name})"
    text = one_line(str(exc), MAX_REASON)
    return f"{name}: {text}" if text else name


def _import_sdk() -> None:
    """Import the SDK and what its first call needs (``jsonschema``, seconds on a busy machine)."""
    import importlib

    for name in ("mcp", "mcp.client.stdio", "mcp.client.streamable_http", "jsonschema", "referencing.exceptions"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


class ServerConnection:
    """One configured server and its state (``not started`` until the first prompt that needs it)."""

    def __init__(self, config: ServerConfig, *, cwd: str, allowlist: Sequence[str] | None) -> None:
        self.config = config
        self.cwd = cwd
        self.allowlist = tuple(allowlist) if allowlist is not None else None
        self.tools: list[Any] = []
        self.state: State = "not started"
        self.error: str | None = None
        self.failed_at = 0.0
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._stderr: TextIO | None = None
        #: The last HTTP error status the server answered (an HTTP server's failure is worded with it).
        self.http_status: int | None = None
        #: The first line of the last message from the server that was not valid MCP.
        self.garbage: str | None = None
        self._used = 0.0
        if config.disabled:
            self.state, self.error = "disabled", "\"disabled\": true in " + config.origin
        elif not config.trusted:
            self.state = "untrusted"
            self.error = (f"{config.origin} is not trusted as it is now; read it, then run `%dsh mcp --trust` "
                          "to start its servers")
        elif config.transport == "stdio" and not command_allowed(config.command, allowlist):
            self.state = "blocked"
            self.error = (f"its command {config.command!r} is not in DshMagics.mcp_stdio_command_allowlist; ask "
                          "whoever set that list (your administrator) to add it")

    @property
    def name(self) -> str:
        return self.config.name

    def _notice_exit(self) -> None:
        """A connection whose task ended on its own (the server went away while idle) is no longer ready."""
        if self.state == "ready" and (self._task is None or self._task.done() or self._client is None):
            self.state, self.tools = "stopped", []

    def due(self, *, force: bool = False) -> bool:
        """Whether a prompt should (re)start this server now."""
        self._notice_exit()
        if self.state in ("disabled", "blocked", "untrusted", "ready", "starting"):
            return False
        return force or self.state != "failed" or time.monotonic() - self.failed_at >= RETRY_SECONDS

    # -- starting --------------------------------------------------------------------------------------
    async def start(self, timeout: float) -> None:
        """Connect and list the tools within ``timeout`` seconds; :class:`McpServerError` when that fails."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        await asyncio.to_thread(_import_sdk)  # off the loop, and not counted against the server's timeout
        async with self._lock:
            if self.state == "ready":
                return
            if self.state in ("disabled", "blocked", "untrusted"):
                raise McpServerError(f"MCP server {self.name!r} is {self.state}: {self.error}")
            await self._start(timeout)

    async def _start(self, timeout: float) -> None:
        self.state, self.error, self.garbage = "starting", None, None
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.ensure_future(self._serve(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self._end_task()
            self._fail(f"did not start within {timeout:g} s (DshMagics.mcp_connect_timeout){self._stderr_note()}")
            raise McpServerError(self.failure()) from None
        except asyncio.CancelledError:
            await self._end_task()
            self._fail("its start was stopped", retry_now=True)
            raise
        except Exception as exc:
            await self._end_task()
            self._fail(describe_failure(exc, self.config, self.http_status) + self._stderr_note())
            raise McpServerError(self.failure()) from None

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        """The connection's task: enter the client, list the tools, then wait to be stopped."""
        try:
            async with self._connected() as client:
                tools = await self._list_tools(client)
                self._client, self.tools, self.state = client, tools, "ready"
                self._used = time.monotonic()
                if not ready.done():
                    ready.set_result(None)
                assert self._stop is not None
                await self._stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            elif self.state == "ready":
                self._fail("it stopped unexpectedly" + self._stderr_note(), retry_now=True)
        finally:
            self._client = None

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Any]:
        from mcp import Client, StdioServerParameters

        async with contextlib.AsyncExitStack() as stack:
            if self.config.transport == "stdio":
                params = StdioServerParameters(command=self.config.command, args=list(self.config.args),
                                               env=dict(self.config.env) or None, cwd=self.config.cwd or self.cwd)
                from mcp.client.stdio import stdio_client

                transport: Any = stdio_client(params, errlog=self._new_stderr())
            else:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                self.http_status = None

                async def note_status(response: httpx2.Response) -> None:
                    if response.status_code >= 400:
                        self.http_status = response.status_code

                http = await stack.enter_async_context(httpx2.AsyncClient(
                    headers=dict(self.config.headers), timeout=httpx2.Timeout(30.0, read=300.0),
                    event_hooks={"response": [note_status]}))
                transport = streamable_http_client(self.config.url, http_client=http)
            client = await stack.enter_async_context(Client(cast(Any, transport), message_handler=self._on_message))
            yield client

    async def _on_message(self, message: Any) -> None:
        """The SDK hands over what it could not read as MCP as an exception: kept for the error line."""
        if isinstance(message, Exception):
            errors = getattr(message, "errors", None)
            try:
                sent = errors()[0].get("input") if callable(errors) else None
            except Exception:
                sent = None
            self.garbage = one_line(repr(sent) if sent is not None else str(message) or type(message).__name__, 120)

    async def _list_tools(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        while len(tools) < MAX_TOOLS:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools[:MAX_TOOLS]

    # -- calling -----------------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], *, timeout: float, connect_timeout: float) -> Any:
        """Call ``tool``; the ``CallToolResult``, or :class:`McpServerError` (one line) when that fails."""
        self._notice_exit()
        if self.state == "ready" and time.monotonic() - self._used > IDLE_CHECK_SECONDS and not await self._answers():
            await self.stop()  # it went away while idle: start it again rather than fail the call
            self.state = "stopped"
        if self.state != "ready":
            await self.start(connect_timeout)
        client = self._client
        if client is None:
            raise McpServerError(self.failure())
        self._used = time.monotonic()
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments), timeout)
        except TimeoutError:
            raise McpServerError(f"MCP server {self.name!r} did not answer {tool} within {timeout:g} s "
                                 "(DshMagics.mcp_call_timeout); the call was cancelled") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            from mcp.shared.exceptions import MCPError

            leaf = _leaf(exc)
            if isinstance(leaf, MCPError) and leaf.message != "Connection closed":
                raise McpServerError(f"MCP server {self.name!r} refused the {tool} call: "
                                     f"{one_line(leaf.message, MAX_REASON)}") from None
            if isinstance(leaf, MCPError) or self._process_gone():
                await self.stop()
                self._fail(f"it stopped during the {tool} call{self._stderr_note()}", retry_now=True)
                raise McpServerError(self.failure()) from None
            raise McpServerError(f"MCP server {self.name!r} answered {tool} with something that is not a valid "
                                 f"MCP result ({describe_failure(exc, self.config)})") from None

    async def _answers(self) -> bool:
        """Whether the server still answers a ping (asked before a call after a quiet spell)."""
        try:
            await asyncio.wait_for(self._client.send_ping(), IDLE_CHECK_SECONDS)
        except asyncio.CancelledError:
            raise
        except Exception:
            return False
        return True

    # -- stopping and reporting --------------------------------------------------------------------------
    async def stop(self) -> None:
        """Close the connection (a stdio server's process ends with it)."""
        if self._stop is not None:
            self._stop.set()
        await self._end_task()
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    async def _end_task(self) -> None:
        """End the connection's task: a ready one is asked to close (and waited for, briefly); one still
        connecting is cancelled and left to clean up on its own, so a prompt never waits on a stuck start."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if self.state != "ready":
            task.cancel()
            _CLEANING.add(task)
            task.add_done_callback(_CLEANING.discard)
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 5)
        except (TimeoutError, Exception):
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 5)

    def _new_stderr(self) -> TextIO:
        """A fresh file for the server's stderr (appended to by the process, read for error lines)."""
        self.close_files()
        self._stderr = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open)
        return self._stderr

    def close_files(self) -> None:
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                self._stderr.close()
            self._stderr = None

    def _process_gone(self) -> bool:
        return self.state != "ready" or self._client is None

    def _fail(self, reason: str, *, retry_now: bool = False) -> None:
        """Mark the server failed; one that ran and then stopped is started again at its next use, one that
        could not start waits :data:`RETRY_SECONDS` (a server that hangs must not slow every prompt)."""
        self.state, self.error = "failed", reason
        self.failed_at = float("-inf") if retry_now else time.monotonic()
        self.tools = []

    def failure(self) -> str:
        """The one line a turn shows for this server's failure."""
        return f"MCP server {self.name!r} ({self.config.target()}) failed: {self.error or 'not connected'}"

    def _stderr_note(self) -> str:
        """``; it said: <last line of its stderr>`` for a stdio server that wrote something, and what it sent
        that was not MCP."""
        garbage = f"; it sent something that is not MCP: {self.garbage}" if self.garbage else ""
        return self._stderr_tail() + garbage

    def _stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            lines = [line.strip() for line in self._stderr.read()[-8192:].splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f"; it said: {one_line(lines[-1], MAX_REASON)}" if lines else ""
