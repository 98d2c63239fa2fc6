"""An MCP server's tool as one of the agent's tools: ``mcp__<server>__<tool>``, reading or acting.

A tool "reads" only when its server declares it read-only (``annotations.readOnlyHint``); every other tool
"acts", so the session's approval policy asks before it runs, exactly as it asks before ``bash``. The call
itself runs on the MCP loop; the agent's side waits for it, and Stop (``execution.cancel``) cancels it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from ..tools.base import TOOL_NAME_PATTERN, Effect, Tool, ToolExecution, ToolOutput
from .connection import McpServerError
from .results import mcp_output

if TYPE_CHECKING:
    from .connection import ServerConnection

#: Every MCP tool's name starts so (Claude Code's convention): ``mcp__<server>__<tool>``.
PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: How often a waiting call looks at the turn's Stop.
CANCEL_POLL_SECONDS = 0.1

Submit = Callable[[Coroutine[Any, Any, Any]], "concurrent.futures.Future[Any]"]


def exposed_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>`` within the 64 characters model APIs accept (odd characters become ``_``;
    a name too long keeps its start and gains a short hash, so two long names stay apart)."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"
    if TOOL_NAME_PATTERN.match(name) and (name == f"{PREFIX}{server}__{tool}" or len(name) <= 64):
        return name
    digest = hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return name[: 64 - 9] + "_" + digest


def _parameters(schema: Any) -> dict[str, Any]:
    """The tool's input schema as an object schema (a server that declares none takes no arguments)."""
    if isinstance(schema, Mapping) and schema.get("type") == "object":
        return dict(schema)
    return {"type": "object", "properties": {}}


class McpTool(Tool):
    """One tool of one server. ``timeouts`` gives ``(call, connect)`` seconds at call time (the settings)."""

    def __init__(self, connection: ServerConnection, tool: Any, submit: Submit,
                 timeouts: Callable[[], tuple[float, float]]) -> None:
        self.connection = connection
        self.server = connection.name
        self.tool = str(tool.name)
        self.name = exposed_name(self.server, self.tool)
        annotations = getattr(tool, "annotations", None)
        read_only = getattr(annotations, "read_only_hint", None) is True
        self.effect: Effect = "read" if read_only else "act"
        about = (getattr(tool, "description", None) or getattr(tool, "title", None) or "").strip()
        self.description = f"{about}\n\n(Tool {self.tool!r} of the MCP server {self.server!r}.)".strip()
        self.parameters = _parameters(getattr(tool, "input_schema", None))
        self._submit = submit
        self._timeouts = timeouts

    def same_as(self, other: McpTool) -> bool:
        return (self.connection is other.connection and self.tool == other.tool and self.effect == other.effect
                and self.parameters == other.parameters and self.description == other.description)

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        meta = {"mcp": {"server": self.server, "tool": self.tool}}
        call, connect = self._timeouts()
        future = self._submit(self.connection.call(self.tool, arguments, timeout=call, connect_timeout=connect))
        waiting = asyncio.wrap_future(future)
        try:
            while not waiting.done():
                await asyncio.wait({waiting}, timeout=CANCEL_POLL_SECONDS)
                if execution.cancel.is_set() and not waiting.done():
                    future.cancel()
                    return ToolOutput(f"{self.name} was stopped: the turn was cancelled (the MCP call was "
                                      "cancelled too).", is_error=True, meta={**meta, "cancelled": True})
            if waiting.cancelled():  # the MCP side gave up on it (the kernel's extension is closing)
                return ToolOutput(f"{self.name} was stopped before it finished.", is_error=True,
                                  meta={**meta, "cancelled": True})
            result = waiting.result()
        except McpServerError as exc:
            return ToolOutput(f"Error: {exc}", is_error=True, meta={**meta, "error": "mcp-failed"})
        finally:
            if not future.done():
                future.cancel()
        return mcp_output(result, self.server, self.tool)
