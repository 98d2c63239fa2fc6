"""The notebook tools for an agent outside the kernel (Claude Code, Codex through the server's ``dsh/mcp``).

The Jupyter server opens a comm to :data:`OUTSIDE_TARGET` on the notebook's kernel with ``{"tool": one of
:data:`TOOLS`, "arguments": {...}}``; the kernel answers once with ``{"ok": bool, "text": str}`` and closes
the comm. The tools are the agent's own (:mod:`dsh_jupyter.workspace.notebook_tools`) over the same live
notebook, and an edit is the same proposal in the page
(:meth:`~dsh_jupyter.workspace.live_document.LiveDocument.propose`): it lands only when the person accepts it
there, is refused when they reject it, when nobody answers within ``approval_timeout``, or when no notebook
page with the extension is connected (there is nobody to ask). A run is asked the same way, on the cell itself
(:meth:`~dsh_jupyter.workspace.live_document.LiveDocument.propose_run`), and runs only after Accept. Nothing
is approved here.

The work runs on a thread of its own (the proposal's reply reaches the kernel on the approval subshell while
the main thread stays free). Outside a kernel nothing is registered.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agent.approvals import ApprovalDecision, ApprovalRequest
    from ..workspace.live_document import LiveDocument
    from ..workspace.notebook_tools import Workspace
    from .host import NotebookHost

OUTSIDE_TARGET = "dsh.outside-agent"
TOOLS = ("notebook_read", "notebook_edit", "notebook_run")
NO_PAGE = ("no notebook page with the dsh-jupyter extension is connected to this kernel, so nobody can accept "
           "an edit; open the notebook in JupyterLab or Notebook 7 (after %load_ext dsh_jupyter)")

log = logging.getLogger(__name__)


async def call(host: NotebookHost, tool: str, arguments: Mapping[str, Any]) -> tuple[bool, str]:
    """Run one outside call; ``(ok, text)``."""
    from ..tools.base import ToolExecution
    from ..workspace.notebook_tools import NotebookReadTool, Workspace

    workspace = Workspace(host)
    if tool == "notebook_read":
        output = await NotebookReadTool(workspace).run(dict(arguments), ToolExecution.create("outside", host.cwd))
        return not output.is_error, output.text
    if tool == "notebook_edit":
        return await _edit(host, workspace, arguments)
    if tool == "notebook_run":
        return await _run(host, workspace, arguments)
    return False, f"unknown notebook tool {tool!r}; use one of {', '.join(TOOLS)}"


def _question(tool: str, arguments: Mapping[str, Any], described: tuple[str, str] | None) -> ApprovalRequest:
    from ..agent.approvals import ApprovalRequest

    shown, language = described if described is not None else ("", "text")
    return ApprovalRequest(tool, f"outside-{uuid.uuid4().hex[:8]}", dict(arguments), shown, language,
                           reason="asked by an agent outside the notebook (MCP)")


async def _page(host: NotebookHost) -> LiveDocument | None:
    from ..workspace.live_document import LiveConnections

    live = host.live_source
    return await asyncio.to_thread(live.document) if isinstance(live, LiveConnections) else None


def _refused(tool: str, decision: ApprovalDecision | None) -> tuple[bool, str]:
    why = decision.reason if decision is not None and decision.reason else "the person did not accept it"
    return False, f"{tool} was not applied: {why}" if tool == "notebook_edit" else f"{tool} did not run: {why}"


async def _edit(host: NotebookHost, workspace: Workspace, arguments: Mapping[str, Any]) -> tuple[bool, str]:
    from ..workspace.notebook_tools import NotebookEditTool, _BadArguments

    editor = NotebookEditTool(workspace)
    try:
        edit = editor.parse(dict(arguments))
    except _BadArguments as exc:
        return False, f"notebook_edit: {exc}"
    document = await _page(host)
    if document is None:
        return False, f"notebook_edit: {NO_PAGE}"
    request = _question("notebook_edit", arguments, editor.describe(arguments))
    decision = await document.propose(request, edit, host.settings.approval_timeout)
    if decision is None or not decision.allowed:
        return _refused("notebook_edit", decision)
    output = await asyncio.to_thread(editor.apply, edit)
    return not output.is_error, output.text


async def _run(host: NotebookHost, workspace: Workspace, arguments: Mapping[str, Any]) -> tuple[bool, str]:
    from ..workspace.document import CellNotFound, NotebookError
    from ..workspace.notebook_tools import NotebookRunTool, _BadArguments

    runner = NotebookRunTool(workspace)
    try:
        cell_id, timeout = runner.parse(arguments)
    except _BadArguments as exc:
        return False, f"notebook_run: {exc}"
    document = await _page(host)
    if document is None:
        return False, f"notebook_run: {NO_PAGE.replace('accept an edit', 'allow a run')}"
    try:
        cell = await asyncio.to_thread(document.cell, cell_id)
    except (CellNotFound, NotebookError) as exc:
        return False, f"notebook_run: {exc}"
    request = _question("notebook_run", arguments, runner.describe(arguments))
    decision = await document.propose_run(request, cell_id, cell.source, host.settings.approval_timeout)
    if decision is None or not decision.allowed:
        return _refused("notebook_run", decision)
    output = await asyncio.to_thread(runner.execute, cell_id, timeout)
    return not output.is_error, output.text


def install_outside_tools(shell: Any, host: Callable[[], NotebookHost]) -> Callable[[], None]:
    """Register :data:`OUTSIDE_TARGET` on ``shell``'s kernel; returns the remover."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None or not hasattr(manager, "register_target"):
        return lambda: None

    def opened(comm: Any, message: Mapping[str, Any]) -> None:
        data = (message.get("content") or {}).get("data") or {}
        tool, arguments = data.get("tool"), data.get("arguments")
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            comm.send({"ok": False, "text": "a notebook tool call needs a tool name and an arguments object"})
            comm.close()
            return

        def answer() -> None:
            try:
                ok, text = asyncio.run(call(host(), tool, arguments))
            except Exception as exc:  # the caller gets one line, the kernel log the rest
                log.exception("outside notebook call %s failed", tool)
                ok, text = False, f"{tool} failed in the kernel: {exc}"
            comm.send({"ok": ok, "text": text})
            comm.close()

        threading.Thread(target=answer, name="dsh-outside-tool", daemon=True).start()

    manager.register_target(OUTSIDE_TARGET, opened)

    def remove() -> None:
        targets = getattr(manager, "targets", None)
        if isinstance(targets, dict) and targets.get(OUTSIDE_TARGET) == opened:
            del targets[OUTSIDE_TARGET]

    return remove
