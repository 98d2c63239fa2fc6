"""The workspace tools of ``dsh/mcp``: ``notebook_read``, ``notebook_edit`` and ``notebook_run`` on a notebook open
in the browser.

Only the Jupyter server can offer them: it knows which kernel runs which notebook. A call names the notebook by
its path (relative to the server root, as JupyterLab shows it); the server opens a comm to that kernel's
:data:`~dsh_jupyter.notebook.outside.OUTSIDE_TARGET`, and the kernel runs the agent's own tool over
the live notebook. ``notebook_edit`` becomes a proposal in the page, ``notebook_run`` a question on the cell, and
each waits for the person's Accept or Reject there (see :mod:`dsh_jupyter.notebook.outside`); nothing
an outside agent sends is applied or run without it.
"""

from __future__ import annotations

import inspect
import os
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, cast

from pydantic import WithJsonSchema

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

#: The most a call waits for the kernel (an edit waits for the person, within the kernel's approval_timeout).
CALL_TIMEOUT = 900.0
OUTSIDE_TARGET = "dsh.outside-agent"  # dsh_jupyter.notebook.outside (a test checks they agree)


class NotebookCallError(ValueError):
    """A call that cannot reach a notebook; the message says what to do."""


def _described(schema: Mapping[str, Any], description: str | None = None) -> WithJsonSchema:
    return WithJsonSchema({**schema, **({"description": description} if description else {})})


Path_: TypeAlias = Annotated[Any, _described(
    {"type": "string"}, "the notebook, relative to the Jupyter server's root (as JupyterLab's file browser shows "
                        "it), open in JupyterLab or Notebook 7 with dsh-jupyter loaded")]
CellIds: TypeAlias = Annotated[Any, _described({"type": "array", "items": {"type": "string"}},
                                               "only these cells (ids from an earlier read)")]
Start: TypeAlias = Annotated[Any, _described({"type": "integer"}, "first cell to show (0-based), default 0")]
Count: TypeAlias = Annotated[Any, _described({"type": "integer"}, "most cells to show from start")]
Flag: TypeAlias = Annotated[Any, _described({"type": "boolean"})]
Action: TypeAlias = Annotated[Any, _described({"type": "string", "enum": ["insert", "replace", "delete"]},
                                              "insert, replace or delete")]
CellId: TypeAlias = Annotated[Any, _described({"type": "string"},
                                              "the cell to replace or delete, or to insert next to")]
Position: TypeAlias = Annotated[Any, _described({"type": "string", "enum": ["before", "after"]},
                                                "insert: before or after cell_id (default after)")]
Source: TypeAlias = Annotated[Any, _described({"type": "string"}, "insert/replace: the cell's new source")]
Timeout: TypeAlias = Annotated[Any, _described({"type": "number"}, "seconds before the run is interrupted "
                                               "(default 120, at most 600)")]
CellType: TypeAlias = Annotated[Any, _described({"type": "string", "enum": ["code", "markdown", "raw"]},
                                                "code (default), markdown or raw")]


class NotebookBridge:
    """Calls into the kernel of a notebook the server runs."""

    def __init__(self, settings: Mapping[str, Any], root: str) -> None:
        self._settings = settings
        self.root = os.path.realpath(root)

    def relative(self, path: object) -> str:
        if not isinstance(path, str) or not path.strip():
            raise NotebookCallError("path must name a notebook, relative to the server root (e.g. analysis.ipynb)")
        full = os.path.realpath(os.path.join(self.root, os.path.expanduser(path.strip())))  # absolute stays so
        if os.path.commonpath([full, self.root]) != self.root:
            raise NotebookCallError(f"notebook {path!r} is outside the server root {self.root}")
        return os.path.relpath(full, self.root).replace(os.sep, "/")

    async def kernel_of(self, path: str) -> Any:
        sessions = await self._settings["session_manager"].list_sessions()
        running = [s for s in sessions if s.get("path") == path and s.get("kernel")]
        if not running:
            raise NotebookCallError(f"no kernel runs {path}: open it in JupyterLab or Notebook 7, run "
                                    "%load_ext dsh_jupyter in it, and ask again")
        return self._settings["kernel_manager"].get_kernel(running[0]["kernel"]["id"])

    async def call(self, path: object, tool: str, arguments: Mapping[str, Any]) -> tuple[bool, str]:
        where = self.relative(path)
        try:
            manager = await self.kernel_of(where)
        except NotebookCallError:
            if tool != "notebook_read":
                raise
            return await self.read_without_kernel(where, arguments)
        client = manager.client()
        client.start_channels()
        try:
            await _maybe(client.wait_for_ready(timeout=30))  # iopub is connected before the comm opens
            comm_id = uuid.uuid4().hex
            client.shell_channel.send(client.session.msg("comm_open", {
                "comm_id": comm_id, "target_name": OUTSIDE_TARGET,
                "data": {"tool": tool, "arguments": dict(arguments)}}))
            deadline = time.monotonic() + CALL_TIMEOUT
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False, f"{tool}: the kernel of {where} did not answer in {CALL_TIMEOUT:.0f} s"
                try:
                    message = await _maybe(client.get_iopub_msg(timeout=min(left, 5.0)))
                except Exception:  # queue.Empty: nothing yet
                    continue
                content = message.get("content") or {}
                if content.get("comm_id") != comm_id:
                    continue
                if message.get("msg_type") == "comm_msg":
                    data = content.get("data") or {}
                    return bool(data.get("ok")), str(data.get("text", ""))
                if message.get("msg_type") == "comm_close":
                    return False, (f"{tool}: the kernel of {where} does not have dsh-jupyter loaded; run "
                                   "%load_ext dsh_jupyter in the notebook and ask again")
        finally:
            client.stop_channels()


    async def read_without_kernel(self, where: str, arguments: Mapping[str, Any]) -> tuple[bool, str]:
        """``notebook_read`` of a notebook no kernel runs: the server's applier reads its collaboration room, or
        its saved file (:mod:`.shared_notebook`). Edits and runs still need the person in the page."""
        from ..tools.base import ToolExecution
        from ..workspace.notebook_tools import NotebookReadTool, Workspace
        from .notebook_handler import APPLIER_KEY

        applier = self._settings.get(APPLIER_KEY)
        if applier is None:
            raise NotebookCallError(f"no kernel runs {where}, and this server cannot read notebooks itself")
        try:
            snapshot = await applier.snapshot(where)
        except Exception as exc:  # NotebookError: a missing or unreadable file
            return False, f"notebook_read: {exc}"
        workspace = cast("Workspace", _Fixed(snapshot))
        output = await NotebookReadTool(workspace).run(dict(arguments), ToolExecution.create("mcp", self.root))
        return not output.is_error, output.text


class _Fixed:
    """A workspace whose one document is a snapshot already read (the tool reads it on a worker thread)."""

    def __init__(self, snapshot: Any) -> None:
        self.snapshot = snapshot

    def document(self) -> Any:
        return self

    def read(self) -> Any:
        return self.snapshot


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def register_workspace_tools(server: MCPServer, bridge: NotebookBridge) -> None:
    """Add ``notebook_read`` (read-only), ``notebook_edit`` and ``notebook_run`` (both act, and only after the person
    accepts in the page) to ``server``."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    async def run(path: object, tool: str, arguments: dict[str, Any]) -> str:
        try:
            ok, text = await bridge.call(path, tool, {k: v for k, v in arguments.items() if v is not None})
        except NotebookCallError as exc:
            raise ToolError(str(exc)) from None
        if not ok:
            raise ToolError(text)
        return text

    async def notebook_read(path: Path_, cell_ids: CellIds = None, start: Start = None, count: Count = None,
                            errors_only: Flag = None, include_outputs: Flag = None) -> str:
        return await run(path, "notebook_read", {"cell_ids": cell_ids, "start": start, "count": count,
                                                 "errors_only": errors_only, "include_outputs": include_outputs})

    async def notebook_edit(path: Path_, action: Action, cell_id: CellId = None, position: Position = None,
                            source: Source = None, cell_type: CellType = None) -> str:
        return await run(path, "notebook_edit", {"action": action, "cell_id": cell_id, "position": position,
                                                 "source": source, "cell_type": cell_type})

    async def notebook_run(path: Path_, cell_id: CellId, timeout: Timeout = None) -> str:
        return await run(path, "notebook_run", {"cell_id": cell_id, "timeout": timeout})

    server.add_tool(notebook_read, name="notebook_read", title="Read a notebook", description=(
        "The cells of a notebook open in JupyterLab or Notebook 7 (the live notebook, unsaved edits included): "
        "ids, types, sources, execution counts and outputs as text. Address cells by id in notebook_edit."),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False), structured_output=False)
    server.add_tool(notebook_edit, name="notebook_edit", title="Propose a notebook edit", description=(
        "Insert, replace or delete one cell of a notebook open in JupyterLab or Notebook 7. The edit is shown "
        "in the notebook as a proposal and lands only when the person accepts it there; the answer says whether "
        "they did."), annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                                  open_world_hint=False), structured_output=False)
    server.add_tool(notebook_run, name="notebook_run", title="Ask to run a notebook cell", description=(
        "Run one code cell of a notebook open in JupyterLab or Notebook 7, by id, as the person would (it changes "
        "the kernel's variables). The person is asked on the cell itself; it runs only after they accept, and "
        "the answer carries its outputs."), annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                                                        open_world_hint=False),
        structured_output=False)

