"""``%dsh mcp``: every configured MCP server, where it was configured, its state and its tools."""

from __future__ import annotations

from collections.abc import Sequence

from ..mcp_client.clients import ServerStatus
from .commands import CommandTable, Row

#: The groups of a server's tools, acting ones first (they are the ones a person is asked about).
GROUPS = (("act", "acts (asks first)"), ("read", "reads"))


def _tools(status: ServerStatus) -> str:
    if not status.tools:
        return "(none)" if status.state == "ready" else "(listed once it starts)"
    groups = []
    for effect, label in GROUPS:
        names = [name for name, tool_effect in status.tools if tool_effect == effect]
        if names:
            groups.append(f"{label}: {', '.join(names)}")
    return "; ".join(groups)


def mcp_table(rows: Sequence[ServerStatus], problems: Sequence[str], sources: Sequence[str]) -> CommandTable:
    """The servers as a table; configuration problems and where configuration is read from as notes."""
    table_rows = []
    for status in rows:
        state = status.state if not status.error else f"{status.state}: {status.error}"
        table_rows.append(Row((status.name, status.transport, status.target, state, status.origin),
                              detail=_tools(status), marked=status.state == "ready"))
    notes = [f"Problem: {problem}" for problem in problems]
    notes.append("Read from (later wins): " + "; ".join(sources) + ".")
    notes.append("Servers start at the first prompt that needs them (or now: %dsh mcp --connect); their tools "
                 "are named mcp__SERVER__TOOL.")
    return CommandTable(("server", "transport", "command or URL", "state", "configured in"), table_rows,
                        css_class="dsh-mcp", empty="No MCP servers are configured.", code=frozenset({0, 2}),
                        detail_column="tools", notes=notes)
