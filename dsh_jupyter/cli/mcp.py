"""``dsh-jupyter mcp``: serve one folder's sessions over MCP on stdin/stdout (Claude Code's and Codex's ``mcp``
configuration starts it). See :mod:`dsh_jupyter.mcp_server`.

Deferred imports: the MCP SDK and the session services load when the server starts, not for ``--help``.
"""

from __future__ import annotations

import argparse

from .errors import EXIT_OK, EXIT_USAGE, CliError

INSTALL_HINT = "the MCP server needs the mcp package: pip install 'dsh-jupyter[mcp]'"


def run_mcp(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin."""
    try:
        import mcp  # noqa: F401 - only to give the install hint before anything starts
    except ImportError:
        raise CliError(INSTALL_HINT, EXIT_USAGE) from None
    import anyio

    from ..mcp_server import FolderError, served
    from ..mcp_server.tools import build_server

    try:
        folder = served(args.root, max_reference_bytes=args.max_reference_bytes, foreign=not args.no_foreign)
    except FolderError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    server, tools = build_server(folder)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        tools.close()
    return EXIT_OK
