"""The notebook tools: ``notebook_read``, ``notebook_edit`` and ``notebook_run``, over whichever view answers.

Which document the tools use is :class:`Workspace`'s choice: the **live** document when the live source says
one is connected (JupyterLab / Notebook 7 with the extension), else the **kernel** record of executed cells
(:class:`~.kernel_record.KernelRecord`). The host holds both:

- ``host.kernel_record``: the kernel's record (installed at ``%load_ext``);
- ``host.live_source``: a :class:`LiveSource` or ``None``. The live document module sets it; its
  ``document()`` returns the connected live :class:`~.document.NotebookDocument`, or ``None`` while no
  frontend is connected (then the kernel record answers);
- ``host.execute_cell(source, cell_id, timeout)``: runs a source as that cell (on the kernel's main thread
  while a foreground cell waits, else under the kernel execution lock) and returns an
  :class:`~.cell_runner.ExecutedCell` with the recorded cell and its nbformat outputs; the live document's ``run``
  uses it and puts the outputs into the browser's cell.

The tools call the document's ``read``, ``apply`` and ``run`` on a worker thread (never the kernel's main
thread, which is busy waiting for the turn in a foreground cell).

Cells are addressed by id only. Every tool re-reads the document at call time, so a cell the user moved is
still found and a deleted one is a clear error, never an edit of another cell. Applied edits are recorded in
the tool result's ``meta.notebookEdit`` (:mod:`.edits`), which ``%dsh undo`` reads back from the log.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..clip import capped
from ..images import ToolImage
from ..secrets import MASK
from ..tools.base import Tool, ToolExecution, ToolOutput
from .cell_runner import DEFAULT_RUN_TIMEOUT, MainThreadRunner
from .document import (
    CELL_TYPES,
    Cell,
    CellNotFound,
    CellOutput,
    Edit,
    NotebookDocument,
    NotebookError,
    NotebookSnapshot,
    is_dsh_cell,
    missing_cell,
    with_secrets_restored,
)
from .edits import EDIT_META_KEY, edit_record
from .kernel_record import KernelRecord

MAX_READ_CHARS = 30_000
MAX_SOURCE_CHARS = 4_000
MAX_OUTPUT_CHARS = 3_000
MAX_IMAGES = 8
MAX_RUN_TIMEOUT = 600.0

LIVE_HEADER = "Notebook: the live notebook (unsaved edits included)"
ROOM_HEADER = "Notebook: the shared document (collaboration room)"
FILE_HEADER = "Notebook: the saved file"
#: What each view adds after the cell count.
VIEW_NOTES = {
    "room": " Every collaborator sees it, unsaved edits included, and edits land in it.",
    "file": " No page has it open; an edit is saved with a checkpoint of the file first.",
}
KERNEL_HEADER = "Notebook: the kernel's record of executed cells — only cells that ran, in the order they ran"

_ACTIONS = ("insert", "replace", "delete")
_POSITIONS = ("before", "after")


class LiveSource(Protocol):
    """What the live document module offers the tools (set as ``host.live_source``)."""

    def document(self) -> NotebookDocument | None:
        """The connected live document, or ``None`` while no frontend with the extension is connected."""
        ...


class WorkspaceHost(Protocol):
    """The host slots the workspace reads (the notebook host has them)."""

    @property
    def kernel_record(self) -> KernelRecord | None: ...

    @property
    def live_source(self) -> LiveSource | None: ...

    @property
    def main_thread_calls(self) -> MainThreadRunner | None: ...


class Workspace:
    """Chooses the document the tools speak to: the live one when connected, else the kernel record."""

    def __init__(self, host: WorkspaceHost) -> None:
        self.host = host

    def document(self) -> NotebookDocument:
        live = self.host.live_source
        if live is not None:
            document = live.document()
            if document is not None:
                return document
        record = self.host.kernel_record
        outside = self.outside(record)
        if outside is not None:
            return outside
        if record is None:
            raise NotebookError("this kernel keeps no record of its cells (the dsh_jupyter extension is not "
                                "loaded here); run %load_ext dsh_jupyter")
        return record

    def outside(self, record: KernelRecord | None) -> NotebookDocument | None:
        """With no page of ours connected: the Jupyter server's room or file of this kernel's notebook, or VS
        Code's saved file when it holds every cell that ran since it was saved; ``None``: the kernel record."""
        from .server_document import VSCodeFile, outside_document

        shell = record.shell if record is not None else None
        runner = getattr(self.host, "execute_cell", None)
        document = outside_document(shell, runner, record.executions if record is not None else list)
        if document is None:
            return None
        try:
            snapshot = document.read()
            if isinstance(document, VSCodeFile):
                document.check_saved(snapshot.cells)
        except NotebookError:  # not a notebook's kernel (a console), the server gone, unsaved changes in VS Code
            return None
        return document

    @property
    def foreground(self) -> bool:
        """Whether the running turn's own ``%%dsh`` cell is waiting for it: ``set_next_input`` puts a new cell under
        the cell that is running, so a ``%dsh wait`` serving a ``--bg`` turn's calls does not count."""
        calls = self.host.main_thread_calls
        return calls is not None and calls.turn_cell

    def source_of(self, cell_id: str) -> str | None:
        """The current source of ``cell_id`` (for the approval question's diff), or ``None``."""
        try:
            snapshot = self.document().read()
        except Exception:
            return None
        cell = find_cell(snapshot, cell_id)
        return cell.source if cell is not None else None


def find_cell(snapshot: NotebookSnapshot, cell_id: str) -> Cell | None:
    return next((cell for cell in snapshot.cells if cell.id == cell_id), None)


# -- formatting ---------------------------------------------------------------------------------------
def header(snapshot: NotebookSnapshot) -> str:
    line = {"live": LIVE_HEADER, "room": ROOM_HEADER, "file": FILE_HEADER}.get(snapshot.view, KERNEL_HEADER)
    if snapshot.path:
        line += f" of {snapshot.path}"
    line = f"{line}; {len(snapshot.cells)} cell{'s' if len(snapshot.cells) != 1 else ''}."
    line += VIEW_NOTES.get(snapshot.view, "")
    if snapshot.selected:
        line += f" The person has cell {snapshot.selected} selected (\"this cell\" in their prompt)."
    return line


def format_output(output: CellOutput) -> str:
    images = "".join(f"\n[{image.mime} image, {len(image.data)} bytes"
                     + (f", {image.width}x{image.height}" if image.width and image.height else "") + "]"
                     for image in output.images)
    if output.kind == "stream":
        label = f"[{output.name or 'stdout'}]"
        return f"{label}\n{output.text.rstrip()}" + images
    if output.kind == "error":
        trace = "\n".join(output.traceback)
        return f"[error] {output.ename or 'Error'}: {output.evalue or ''}" + (f"\n{trace}" if trace else "")
    label = f"[result {output.execution_count}]" if output.kind == "result" and output.execution_count \
        else f"[{output.kind}]"
    text = output.text.rstrip()
    return (f"{label} {text}" if "\n" not in text else f"{label}\n{text}") + images


def format_cell(cell: Cell, index: int, *, include_outputs: bool = True) -> str:
    count = f" · [{cell.execution_count}]" if cell.execution_count is not None else ""
    lines = [f"--- #{index} · id {cell.id} · {cell.cell_type}{count}"]
    lines.append(capped(cell.source, MAX_SOURCE_CHARS, "characters of source") if cell.source else "(empty)")
    if include_outputs and cell.outputs:
        shown = "\n".join(format_output(output) for output in cell.outputs)
        lines.append("outputs:")
        lines.append(capped(shown, MAX_OUTPUT_CHARS, "characters of output"))
    elif include_outputs and is_dsh_cell(cell.source):
        lines.append("outputs: (a %%dsh prompt: its answer is not repeated here)")
    elif include_outputs and cell.cell_type == "code":
        lines.append("outputs: (none)")
    return "\n".join(lines)


def cell_images(cells: Sequence[Cell]) -> tuple[ToolImage, ...]:
    images = [image for cell in cells for output in cell.outputs for image in output.images]
    return tuple(images[-MAX_IMAGES:])


# -- argument checks ----------------------------------------------------------------------------------
class _BadArguments(ValueError):
    pass


def _string(arguments: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = arguments.get(name)
    if value is None:
        if required:
            raise _BadArguments(f"{name!r} is required")
        return None
    if not isinstance(value, str):
        raise _BadArguments(f"{name!r} must be a string, got {type(value).__name__}")
    return value


def _choice(arguments: dict[str, Any], name: str, choices: tuple[str, ...], default: str | None) -> str | None:
    value = _string(arguments, name, required=default is None)
    if value is None:
        return default
    if value not in choices:
        raise _BadArguments(f"{name!r} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _int(arguments: dict[str, Any], name: str, default: int | None, *, minimum: int = 0) -> int | None:
    value = arguments.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise _BadArguments(f"{name!r} must be a whole number, got {value!r}")
    if value < minimum:
        raise _BadArguments(f"{name!r} must be at least {minimum}, got {value!r}")
    return int(value)


def _bool(arguments: dict[str, Any], name: str, default: bool) -> bool:
    value = arguments.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _BadArguments(f"{name!r} must be true or false, got {value!r}")
    return value


def _tags(arguments: dict[str, Any]) -> tuple[str, ...] | None:
    value = arguments.get("tags")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise _BadArguments(f"'tags' must be a list of non-empty strings, got {value!r}")
    return tuple(t.strip() for t in value)


def _metadata(arguments: dict[str, Any]) -> dict[str, Any] | None:
    value = arguments.get("metadata")
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise _BadArguments(f"'metadata' must be an object of metadata keys, got {value!r}")
    if "tags" in value:
        raise _BadArguments("set tags with 'tags', not inside 'metadata'")
    return dict(value)


def _error(tool: str, message: str) -> ToolOutput:
    return ToolOutput(f"Error: {tool}: {message}.", is_error=True, meta={"error": "notebook"})


# -- the tools ----------------------------------------------------------------------------------------
class NotebookReadTool(Tool):
    name = "notebook_read"
    effect = "read"
    description = (
        "Read the user's notebook: cells in order, each with its id, type, source, execution count and outputs "
        "(streams, results, errors with traceback; images noted by size). Choose cells with cell_ids, or "
        "start/count, or errors_only. The first line says which view answered: the live notebook, or the "
        "kernel's record of the cells that ran. Address cells by id in notebook_edit and notebook_run."
    )

    def __init__(self, workspace: Workspace, *, max_chars: int = MAX_READ_CHARS) -> None:
        self.workspace = workspace
        self.max_chars = max_chars
        self.parameters = {
            "type": "object",
            "properties": {
                "cell_ids": {"type": "array", "items": {"type": "string"},
                             "description": "Only these cells (ids from an earlier read)."},
                "start": {"type": "integer", "description": "First cell to show (0-based position). Default 0."},
                "count": {"type": "integer", "description": "Most cells to show from start."},
                "errors_only": {"type": "boolean", "description": "Only cells whose last run failed."},
                "include_outputs": {"type": "boolean", "description": "Show outputs (default true)."},
            },
        }

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        try:
            ids = arguments.get("cell_ids")
            if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
                raise _BadArguments("'cell_ids' must be a list of cell id strings")
            start = _int(arguments, "start", 0) or 0
            count = _int(arguments, "count", None, minimum=1)
            errors_only = _bool(arguments, "errors_only", False)
            include_outputs = _bool(arguments, "include_outputs", True)
        except _BadArguments as exc:
            return _error(self.name, str(exc))
        try:
            snapshot = await asyncio.to_thread(lambda: self.workspace.document().read())
        except NotebookError as exc:
            return _error(self.name, str(exc))
        return self.render(snapshot, ids, start, count, errors_only, include_outputs)

    def render(self, snapshot: NotebookSnapshot, ids: list[str] | None, start: int, count: int | None,
               errors_only: bool, include_outputs: bool) -> ToolOutput:
        indexed = list(enumerate(snapshot.cells))
        missing: list[str] = []
        if ids is not None:
            by_id = {cell.id: (i, cell) for i, cell in indexed}
            missing = [i for i in ids if i not in by_id]
            indexed = [by_id[i] for i in dict.fromkeys(ids) if i in by_id]
        if errors_only:
            indexed = [(i, cell) for i, cell in indexed if cell.error is not None]
        chosen = indexed[start:start + count if count is not None else None] if ids is None else indexed
        parts = [header(snapshot)]
        if snapshot.view == "kernel":
            parts.append("(The kernel sees only cells that ran; markdown cells and unrun edits are not here.)")
        if missing:
            parts.append("No cell with these ids (deleted, or not ids notebook_read gave): "
                         + ", ".join(repr(i) for i in missing[:20]) + ".")
        if errors_only and not indexed:
            parts.append("No cell's last run failed.")
        used = sum(len(p) + 1 for p in parts)
        shown: list[Cell] = []
        left = 0
        for n, (index, cell) in enumerate(chosen):
            text = format_cell(cell, index, include_outputs=include_outputs)
            if shown and used + len(text) > self.max_chars:
                left = len(chosen) - n
                parts.append(f"… {left} more cell{'s' if left != 1 else ''} not shown (the answer is "
                             f"bounded); ask with start={index} (or cell_ids, or include_outputs=false)")
                break
            parts.append(capped(text, self.max_chars, "characters of this cell"))
            used += len(text) + 1
            shown.append(cell)
        if not chosen and not missing and not errors_only:
            parts.append("(no cells)" if not snapshot.cells else f"No cells from start={start}.")
        images = cell_images(shown) if include_outputs else ()
        meta = {"notebookRead": {"view": snapshot.view, "cells": len(shown), "left": left}}
        return ToolOutput("\n".join(parts), meta=meta, images=images)


def describe_notebook_call(tool: str, arguments: Mapping[str, Any],
                           source_of: Callable[[str], str | None]) -> tuple[str, str] | None:
    """What an approval question shows for a notebook_edit or notebook_run call: the new source of an insert,
    a unified diff of a replacement, the cell a delete removes, the source a run runs (``source_of(cell_id)``:
    the cell's current source, ``None`` when unknown); ``None`` for arguments that make no sense."""

    def _cell_source(cell_id: object) -> str | None:
        return source_of(cell_id) if isinstance(cell_id, str) else None

    cell_id = arguments.get("cell_id")
    source = arguments.get("source")
    if tool == "notebook_run" and isinstance(cell_id, str):
        current = _cell_source(cell_id)
        return (f"# run cell {cell_id}\n{current}" if current is not None else f"# run cell {cell_id}"), "python"
    if tool != "notebook_edit":
        return None
    action = arguments.get("action")
    kind = arguments.get("cell_type") if isinstance(arguments.get("cell_type"), str) else "code"
    language = "python" if kind == "code" else "markdown" if kind == "markdown" else "text"
    if action == "insert" and isinstance(source, str):
        where = f"{arguments.get('position') or 'after'} cell {cell_id}" if isinstance(cell_id, str) else "at the end"
        return f"# insert a new {kind} cell {where}\n{source}", language
    if action == "replace" and isinstance(cell_id, str) and source is None:
        changes = [f"tags {arguments.get('tags')!r}" if arguments.get("tags") is not None else "",
                   f"metadata {arguments.get('metadata')!r}" if arguments.get("metadata") is not None else ""]
        return f"# set the {' and '.join(c for c in changes if c)} of cell {cell_id}", "text"
    if action == "replace" and isinstance(cell_id, str) and isinstance(source, str):
        current = _cell_source(cell_id)
        if current is None:
            return f"# replace the source of cell {cell_id} with\n{source}", language
        diff = difflib.unified_diff(current.splitlines(keepends=True), source.splitlines(keepends=True),
                                    f"cell {cell_id} (now)", f"cell {cell_id} (proposed)")
        text = "".join(line if line.endswith("\n") else line + "\n" for line in diff).rstrip("\n")
        return text or f"# replace cell {cell_id} with the same source (no change)", "diff"
    if action == "delete" and isinstance(cell_id, str):
        current = _cell_source(cell_id)
        return f"# delete cell {cell_id}" + (f"\n{current}" if current is not None else ""), language
    return None


class NotebookEditTool(Tool):
    name = "notebook_edit"
    effect = "act"
    description = (
        "Change the user's notebook: insert a new cell (before or after a cell id; no cell_id: at the end), "
        "replace a cell's source, tags or metadata (e.g. tags [\"parameters\"] for papermill; source may then be "
        "left out), or delete a cell. Cells are addressed by the ids notebook_read gives; an id that is no longer "
        "there is an error. Returns the new cell's id. Every edit can be undone (%dsh undo). [masked] stands for a "
        "secret value you are not shown: keep each line holding it as notebook_read shows it and it keeps its value."
    )

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.parameters = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(_ACTIONS), "description": "insert, replace or delete."},
                "cell_id": {"type": "string",
                            "description": "The cell to replace or delete, or to insert next to."},
                "position": {"type": "string", "enum": list(_POSITIONS),
                             "description": "insert: before or after cell_id (default after)."},
                "source": {"type": "string", "description": "insert/replace: the cell's new source."},
                "cell_type": {"type": "string", "enum": list(CELL_TYPES),
                              "description": "code (default), markdown or raw."},
                "tags": {"type": "array", "items": {"type": "string"},
                         "description": "insert/replace: the cell's tags, replacing its tags ([] removes them)."},
                "metadata": {"type": "object", "description": "insert/replace: cell metadata keys to set (a null "
                             "value removes the key)."},
            },
            "required": ["action"],
        }

    def parse(self, arguments: dict[str, Any]) -> Edit:
        action = _choice(arguments, "action", _ACTIONS, None)
        cell_id = _string(arguments, "cell_id", required=action != "insert")
        if cell_id is not None and not cell_id.strip():
            raise _BadArguments("'cell_id' is empty; give an id from notebook_read")
        position = _choice(arguments, "position", _POSITIONS, "after")
        tags, metadata = _tags(arguments), _metadata(arguments)
        if action == "delete" and (tags is not None or metadata is not None):
            raise _BadArguments("a delete takes no tags or metadata")
        keep_source = action == "replace" and arguments.get("source") is None and (
            tags is not None or metadata is not None)
        source = _string(arguments, "source", required=action != "delete" and not keep_source)
        cell_type = _choice(arguments, "cell_type", CELL_TYPES, "code")
        if keep_source and arguments.get("cell_type") is not None:
            raise _BadArguments("changing 'cell_type' needs the cell's 'source' too")
        if action == "insert" and not (source or "").strip():
            raise _BadArguments("'source' is empty; an inserted cell needs its content")
        return Edit(action, cell_id, source or "", cell_type, position,  # type: ignore[arg-type]
                    metadata=metadata, tags=tags, keep_source=keep_source)

    def describe(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        return describe_notebook_call(self.name, arguments, self.workspace.source_of)

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        try:
            edit = self.parse(arguments)
        except _BadArguments as exc:
            return _error(self.name, str(exc))
        return await asyncio.to_thread(self.apply, edit, background=execution.background)

    def apply(self, edit: Edit, *, background: bool = False) -> ToolOutput:
        """Apply ``edit``; a ``background`` (``--bg``) turn never inserts through ``set_next_input``, even while
        another cell (``%dsh wait``) happens to be running: the new cell would land under that cell."""
        try:
            document = self.workspace.document()
            if (document.view == "kernel" and edit.action == "insert"
                    and (background or not self.workspace.foreground)):
                return _error(self.name, "this frontend only takes new cells through IPython's set_next_input, "
                              "which needs a %%dsh cell that is running; a background (--bg) turn has none. "
                              "Show the code in your answer instead, or ask in a %%dsh cell without --bg")
            snapshot = document.read()
            before: Cell | None = None
            index: int | None = None
            if edit.cell_id is not None:
                before = find_cell(snapshot, edit.cell_id)
                if before is None:
                    return _error(self.name, missing_cell(edit.cell_id, document.view))
                index = snapshot.cells.index(before)
                if edit.keep_source:  # a tags or metadata change keeps the cell's source and type
                    edit = replace(edit, source=before.source, cell_type=before.cell_type)
            edit, missing = with_secrets_restored(edit, snapshot)
            if missing:
                return _error(self.name, _masked_lines_message(missing))
            applied = document.apply(edit)
        except CellNotFound as exc:
            return _error(self.name, str(exc) or missing_cell(edit.cell_id or "", "live"))
        except NotebookError as exc:
            return _error(self.name, str(exc))
        anchor = _anchor(snapshot, index) if edit.action == "delete" and index is not None else None
        record = edit_record(applied, document.view, anchor=anchor)
        if document.view == "kernel":
            lines = [f"Sent a new code cell to the frontend through IPython's set_next_input (provisional id "
                     f"{applied.cell_id}).", f"Note: {applied.note}." if applied.note else "",
                     "The kernel cannot remove it again; the user can delete it."]
            return ToolOutput("\n".join(line for line in lines if line), meta={EDIT_META_KEY: record})
        verb = {"insert": "Inserted", "replace": "Replaced", "delete": "Deleted"}[applied.action]
        where = ""
        if applied.action == "insert" and edit.cell_id is not None:
            where = f" {edit.position} cell {edit.cell_id}"
        elif applied.action == "insert":
            where = " at the end"
        cell_type = applied.after.cell_type if applied.after is not None else edit.cell_type
        lines = [f"{verb} {'a new ' + cell_type + ' cell' if applied.action == 'insert' else 'cell'} "
                 f"{applied.cell_id}{where}" + (f" (now #{applied.index})" if applied.index is not None else "")
                 + "."]
        if applied.action == "insert":
            lines.append(f"New cell id: {applied.cell_id}")
        if applied.note:
            lines.append(f"Note: {applied.note}.")
        lines.append("The user can revert it with %dsh undo.")
        return ToolOutput("\n".join(lines), meta={EDIT_META_KEY: record})


def _masked_lines_message(lines: list[int]) -> str:
    """The error for a source whose ``[masked]`` no line of the notebook masks to (``lines``: their numbers)."""
    which = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
    return (f"line {which} of 'source' holds {MASK}, which stands for a secret value you were not shown, and no "
            f"line of the notebook reads like that: it would write {MASK} into the cell instead of the value. "
            "Keep every line holding it exactly as notebook_read shows it (it then keeps its value), or leave the "
            "value out and ask the user to fill it in")


def _anchor(snapshot: NotebookSnapshot, index: int) -> dict[str, str]:
    """Where a deleted cell stood: the id of the cell before it, else the one after it."""
    cells = snapshot.cells
    if index > 0:
        return {"after": cells[index - 1].id}
    if index + 1 < len(cells):
        return {"before": cells[index + 1].id}
    return {}


class NotebookRunTool(Tool):
    name = "notebook_run"
    effect = "act"
    description = (
        "Run one cell of the user's notebook by id (as the user would: it counts as an execution and changes "
        "the kernel's variables) and return its outputs."
    )

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.parameters = {
            "type": "object",
            "properties": {
                "cell_id": {"type": "string", "description": "The cell to run (an id from notebook_read)."},
                "timeout": {"type": "number", "description": f"Seconds before the run is interrupted "
                            f"(default {DEFAULT_RUN_TIMEOUT:g}, at most {MAX_RUN_TIMEOUT:g})."},
            },
            "required": ["cell_id"],
        }

    def describe(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        return describe_notebook_call(self.name, arguments, self.workspace.source_of)

    def parse(self, arguments: Mapping[str, Any]) -> tuple[str, float]:
        """The cell id and the timeout (capped) of a call; raises ``_BadArguments`` naming what is wrong."""
        cell_id = _string(dict(arguments), "cell_id", required=True) or ""
        if not cell_id.strip():
            raise _BadArguments("'cell_id' is empty; give an id from notebook_read")
        timeout = arguments.get("timeout", DEFAULT_RUN_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise _BadArguments(f"'timeout' must be a positive number of seconds, got {timeout!r}")
        return cell_id, min(float(timeout), MAX_RUN_TIMEOUT)

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        try:
            cell_id, timeout = self.parse(arguments)
        except _BadArguments as exc:
            return _error(self.name, str(exc))
        return await asyncio.to_thread(self.execute, cell_id, timeout)

    def execute(self, cell_id: str, timeout: float) -> ToolOutput:
        try:
            document = self.workspace.document()
            result = document.run(cell_id, timeout)
        except CellNotFound as exc:
            return _error(self.name, str(exc) or missing_cell(cell_id, "live"))
        except NotebookError as exc:
            return _error(self.name, str(exc))
        except KeyboardInterrupt:
            return ToolOutput(f"The run of cell {cell_id} was interrupted.", is_error=True,
                              meta={"interrupted": True})
        cell = result.cell
        error = cell.error
        interrupted = error is not None and error.ename == "KeyboardInterrupt"
        status = "interrupted" if interrupted else "error" if error is not None else "ok"
        if status == "ok":
            first = f"Ran cell {cell.id}."
        elif status == "error" and error is not None and "event loop is already running" in (error.evalue or ""):
            first = (f"Ran cell {cell.id}; it failed because it uses top-level await, which the agent cannot run "
                     "inside a running cell; ask the user to run it.")
        elif status == "error" and error is not None:
            first = f"Ran cell {cell.id}; it raised {error.ename}."
        else:
            first = f"The run of cell {cell.id} was interrupted (timeout or Stop)."
        if result.view == "kernel":
            first += (" It ran the source the kernel recorded; its new outputs are in this result, not in the "
                      "notebook's cell (this frontend shows only the kernel's record).")
        text = first + "\n" + format_cell(cell, _position(document, cell.id))
        return ToolOutput(text, meta={"notebookRun": {"cellId": cell.id, "view": result.view, "status": status}},
                          images=cell_images([cell]))


def _position(document: NotebookDocument, cell_id: str) -> int:
    try:
        cells = document.read().cells
    except NotebookError:
        return 0
    return next((i for i, cell in enumerate(cells) if cell.id == cell_id), 0)


def notebook_tools(workspace: Workspace) -> list[Tool]:
    """The three tools over ``workspace``, in the order the model sees them."""
    return [NotebookReadTool(workspace), NotebookEditTool(workspace), NotebookRunTool(workspace)]

