"""The MCP client: the user's MCP servers (Claude-style ``mcpServers``) as tools of the agent.

- :mod:`.config`: the ``mcpServers`` files and setting, merged, checked and worded for their author;
- :mod:`.connection`: one server's connection on the MCP loop (start, list, call, stop, failures in one line);
- :mod:`.tools`: a server's tool as ``mcp__<server>__<tool>``, reading or acting (approvals like ``bash``);
- :mod:`.results`: an MCP result bounded like every tool result (text cut with a note, images as images);
- :mod:`.clients`: a kernel's servers, started lazily before a prompt and stopped with the kernel (the
  ``%dsh mcp`` table that shows them is the IPython host's, ``notebook/mcp_table.py``).

The ``mcp`` SDK (the optional ``mcp`` extra) is imported only when a server starts.
"""
