"""A kernel's MCP servers: the configuration re-read at each prompt, lazy starts, the agent's tool list kept
in step, and everything stopped with the kernel.

:meth:`McpClients.prepare` runs before each prompt, on the agent's loop: it re-reads the configuration (a
changed server is restarted, a removed one stopped), starts the servers not started yet (all at once, each
within ``DshMagics.mcp_connect_timeout``), and registers each ready server's tools in the agent's
:class:`~dsh_jupyter.tools.base.ToolRegistry` (the tools of a server that failed leave it). It returns the
lines the turn shows: a configuration problem, a server that could not start. The servers themselves run on
the MCP loop, a daemon thread of their own, so neither the kernel nor the agent's loop waits on them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..tools.base import ToolRegistry, ToolRegistryError
from .config import UNEXPANDED, ServerSet, load_servers, read_file
from .connection import McpServerError, ServerConnection
from .tools import McpTool
from .trust import ProjectTrust

log = logging.getLogger(__name__)
_T = TypeVar("_T")
#: How often a prompt waiting for servers to start looks at the turn's Stop.
STOP_POLL_SECONDS = 0.1


class LoopRunner(Protocol):
    """A thread with an event loop (``dsh_jupyter.notebook.runtime.AgentThread``)."""

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class McpSettings:
    """What the client reads from the user's settings (``DshMagics.mcp_*``)."""

    user_file: Path | None = None
    project_file: Path | None = None
    #: The record of trusted project files (``$DSH_HOME/mcp-trusted.json``); None trusts none.
    trust_file: Path | None = None
    servers: Mapping[str, Any] = field(default_factory=dict)
    connect_timeout: float = 30.0
    call_timeout: float = 120.0
    allowlist: tuple[str, ...] | None = None
    cwd: str = "."


@dataclass(frozen=True)
class ServerStatus:
    """One row of ``%dsh mcp``."""

    name: str
    transport: str
    target: str
    origin: str
    state: str
    error: str | None
    tools: tuple[tuple[str, str], ...]  # (exposed name, effect)


class McpClients:
    """Every configured server of one kernel, by name."""

    def __init__(self, runner: LoopRunner, settings: McpSettings) -> None:
        self.runner = runner
        self.settings = settings
        self.connections: dict[str, ServerConnection] = {}
        self.problems: list[str] = []
        self._shown: set[str] = set()
        self._started = False

    # -- configuration -------------------------------------------------------------------------------------
    def configure(self, settings: McpSettings) -> None:
        """New settings; they apply from the next prompt (or ``%dsh mcp``)."""
        self.settings = settings

    def refresh(self) -> ServerSet:
        """Re-read the configuration and bring the connections in line with it (changed ones restart)."""
        s = self.settings
        found = load_servers(s.user_file, s.project_file, s.servers, trust=self._trust())
        self.problems = found.problems
        for name in list(self.connections):
            old = self.connections[name]
            config = found.servers.get(name)
            if config != old.config or old.cwd != s.cwd or old.allowlist != s.allowlist:
                del self.connections[name]
                self._stop_later(old)
        for name, config in found.servers.items():
            if name not in self.connections:
                self.connections[name] = ServerConnection(config, cwd=s.cwd, allowlist=s.allowlist)
        return found

    def _trust(self) -> ProjectTrust | None:
        return ProjectTrust(self.settings.trust_file) if self.settings.trust_file is not None else None

    def trust_project(self) -> list[str]:
        """``%dsh mcp --trust``: trust the project file as it is now; the lines saying what was trusted."""
        path, trust = self.settings.project_file, self._trust()
        if path is None or trust is None:
            return ["no project MCP file is read (DshMagics.mcp_project_file is empty): nothing to trust"]
        found = read_file(path, UNEXPANDED)  # the file as the person read it: nothing of the environment
        if not found.fingerprint:
            return [f"there is no readable project MCP file at {path}: nothing to trust"]
        if not found.servers:
            return [f"{path} defines no usable MCP server: nothing to trust", *found.problems]
        trust.trust(path, found.fingerprint)
        lines = [f"Trusted {path} as it is now; a change to the file asks again. Its servers:"]
        lines += [f"  {name}: {config.target()}" for name, config in found.servers.items()]
        return lines

    def _stop_later(self, connection: ServerConnection) -> None:
        if connection.state in ("ready", "starting"):
            self.runner.submit(connection.stop()).add_done_callback(lambda _: connection.close_files())
        else:
            connection.close_files()

    # -- before a prompt -------------------------------------------------------------------------------------
    async def prepare(self, registry: ToolRegistry, *, force: bool = False,
                      stopped: Callable[[], bool] = lambda: False) -> list[str]:
        """Start what is due and put the ready servers' tools in ``registry``; the lines to show the user.
        ``stopped`` is the turn's Stop: starts still under way are then cancelled."""
        self.refresh()
        lines = [p for p in self.problems if p not in self._shown]
        self._shown = set(self.problems)
        due = [c for c in self.connections.values() if c.due(force=force)]
        if due:
            self._started = True
            future = self.runner.submit(self._start_all(due))
            waiting = asyncio.wrap_future(future)
            while not waiting.done():
                await asyncio.wait({waiting}, timeout=STOP_POLL_SECONDS)
                if stopped() and not waiting.done():
                    future.cancel()
                    break
            if waiting.done() and not waiting.cancelled():
                lines += waiting.result()
        self.sync_tools(registry)
        return lines

    async def _start_all(self, due: Sequence[ServerConnection]) -> list[str]:
        timeout = self.settings.connect_timeout
        outcomes = await asyncio.gather(*(c.start(timeout) for c in due), return_exceptions=True)
        lines = []
        for connection, outcome in zip(due, outcomes, strict=True):
            if isinstance(outcome, McpServerError):
                lines.append(str(outcome))
            elif isinstance(outcome, BaseException):
                lines.append(f"MCP server {connection.name!r} failed: {type(outcome).__name__}: {outcome}")
        return lines

    def connect(self, *, timeout: float | None = None) -> list[str]:
        """``%dsh mcp --connect``: (re)start every server that is not running now, from the calling thread."""
        self.refresh()
        due = [c for c in self.connections.values() if c.due(force=True)]
        if not due:
            return []
        self._started = True
        wait = (timeout or self.settings.connect_timeout) + 15
        return self.runner.submit(self._start_all(due)).result(wait)

    def sync_tools(self, registry: ToolRegistry) -> None:
        """``registry`` holds exactly the tools of the ready servers (tools of others are taken out)."""
        wanted: dict[str, McpTool] = {}
        for connection in self.connections.values():
            if connection.state != "ready":
                continue
            for tool in connection.tools:
                adapter = McpTool(connection, tool, self.runner.submit, self._timeouts)
                wanted.setdefault(adapter.name, adapter)
        for name in registry.names():
            current = registry.get(name)
            if isinstance(current, McpTool) and not (name in wanted and wanted[name].same_as(current)):
                registry.unregister(name)
        for name, adapter in wanted.items():
            if name in registry:
                continue
            try:
                registry.register(adapter)
            except ToolRegistryError as exc:  # a schema the registry refuses: the other tools still join
                log.warning("MCP tool %s left out: %s", name, exc)

    def _timeouts(self) -> tuple[float, float]:
        return self.settings.call_timeout, self.settings.connect_timeout

    # -- reporting -------------------------------------------------------------------------------------------
    def status(self) -> list[ServerStatus]:
        """Every configured server with its state and tools (the configuration re-read first)."""
        self.refresh()
        rows = []
        for connection in self.connections.values():
            tools = tuple((adapter.name, adapter.effect) for adapter in (
                McpTool(connection, tool, self.runner.submit, self._timeouts) for tool in connection.tools))
            config = connection.config
            rows.append(ServerStatus(connection.name, config.transport, config.target(), config.origin,
                                     connection.state, connection.error, tools))
        return rows

    # -- the end ---------------------------------------------------------------------------------------------
    def close(self, timeout: float = 10.0) -> None:
        """Stop every server (a stdio server's process ends) and the MCP loop."""
        connections = list(self.connections.values())
        self.connections.clear()
        if self._started:
            self._started = False
            async def stop_all() -> None:
                await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

            try:
                self.runner.submit(stop_all()).result(timeout)
            except Exception:
                log.debug("could not stop every MCP server", exc_info=True)
            self.runner.stop()
        for connection in connections:
            connection.close_files()

