"""``dsh-jupyter mcp``: serve one folder's sessions to Claude Code, Codex and other MCP clients.

- :mod:`.folder`: the served folder (what may be searched, read and located, and the refusals);
- :mod:`.tools`: the MCP tools over it, on the official ``mcp`` SDK (the optional extra ``mcp``).

Nothing here is imported by ``%load_ext dsh_jupyter``; the SDK loads only when a server is built.
"""

from __future__ import annotations

from .folder import FolderError, Located, ServedFolder, served

__all__ = ["FolderError", "Located", "ServedFolder", "served"]
