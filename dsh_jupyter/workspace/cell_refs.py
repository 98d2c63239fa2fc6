"""The notebook's cells as a source of reference snapshots: ``@cell`` and ``@cell:<id>`` in a prompt.

This is the host's syntax; the reference core only knows canonical ``@[label](dsh-cell:id)`` mentions
(:mod:`dsh_jupyter.references.cells`). When a prompt is sent, :meth:`NotebookCells.adapt` rewrites

- ``@cell:<id>`` into a mention of that cell (any view: the live page, the collaboration room, the saved file,
  the kernel's record, where a cell that ran as ``[3]`` is ``exec-3`` when the frontend sends no ids);
- ``@cell`` into a mention of the cell the person means. From the sidebar, a chat panel or a prompt box it is
  the cell selected in the page when they press Send. From a ``%%dsh`` cell (or a ``%dsh`` line) it is the cell
  just above the prompt cell: running a cell makes it the selection (and Shift+Enter then moves the selection
  on), so the selection itself never names the cell meant there; the one above is the cell just worked on.

Only a page of ours (JupyterLab, Notebook 7) reports a selection; elsewhere (VS Code, nbclient, papermill) a
bare ``@cell`` is refused with one line that says to name the cell by id, and nothing is sent. Inline code and
fenced code blocks are left alone (a ``@cell`` decorator in pasted code is not a mention).

The notebook is read once per prompt (the first time a mention needs it), so every mention of one prompt sees
the same cells; a cell's snapshot is its id, type, execution count, source and outputs (what ``notebook_read``
shows of it), bounded like a variable's summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..clip import fitted
from ..references.cells import CELL_ID, CellSnapshot
from ..references.errors import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SessionReferenceError,
)
from ..references.mentions import format_cell_mention
from .document import VIEW_NAMES, Cell, NotebookError, NotebookSnapshot

#: Characters of one cell's frozen snapshot (within the per-source byte budget, which may be smaller).
MAX_CELL_REFERENCE_CHARS = 8_000

#: Code (a fenced block from a line that opens with ``` to one that closes it, or inline: left alone), or
#: ``@cell`` / ``@cell:<id>`` where a mention may start (as the browser's popup decides: at the start or
#: after whitespace, an opening bracket or a quote).
_HOST_MENTION = re.compile(
    r"((?m:^ {0,3}```[\s\S]*?(?:^ {0,3}```|\Z))|`[^`\n]*`)"
    r"|(?<![^\s(\[{\"'])@cell(?::(" + CELL_ID.pattern + r"))?(?![\w-])"
)


def has_cell_mention(text: str) -> bool:
    """Whether ``text`` holds ``@cell`` or ``@cell:<id>`` outside code."""
    return any(match.group(1) is None for match in _HOST_MENTION.finditer(text))


def no_selection_message(snapshot: NotebookSnapshot) -> str:
    """The one line a bare ``@cell`` gets where no page reports a selection."""
    example = "@cell:exec-3 for the cell that ran as [3]" if snapshot.view == "kernel" else \
        "@cell:<id> with an id notebook_read shows"
    return (f"no cell is selected here: @cell means the cell selected in JupyterLab or Notebook 7, and this "
            f"notebook is read from {VIEW_NAMES[snapshot.view]}; name the cell by its id instead ({example})")


def outputs_brief(cell: Cell) -> str:
    """``code cell [3] · 2 outputs`` (``· NameError`` when it failed): what people see of a mentioned cell."""
    parts = [f"{cell.cell_type} cell" + (f" [{cell.execution_count}]" if cell.execution_count is not None else "")]
    if cell.outputs:
        parts.append(f"{len(cell.outputs)} output{'s' if len(cell.outputs) != 1 else ''}")
    error = cell.error
    if error is not None:
        parts.append(error.ename or "error")
    return " · ".join(parts)


def cell_text(cell: Cell, index: int, limit: int) -> str:
    """The model's text of one cell: ``notebook_read``'s form of it (source and outputs each capped), at most
    ``limit`` characters."""
    from .notebook_tools import format_cell

    return fitted(format_cell(cell, index), limit)


class NotebookCells:
    """``@cell`` for one prompt: ``read`` gives the notebook (once), ``prompt_cell`` is the id of the cell the
    prompt was typed in (``None``: the sidebar, a chat panel or a prompt box)."""

    def __init__(self, read: Callable[[], NotebookSnapshot], prompt_cell: str | None = None) -> None:
        self._read = read
        self.prompt_cell = prompt_cell
        self._snapshot: NotebookSnapshot | None = None

    def notebook(self) -> NotebookSnapshot:
        if self._snapshot is None:
            try:
                self._snapshot = self._read()
            except NotebookError as exc:
                raise SessionReferenceError(SESSION_REFERENCE_READ_FAILED,
                                            f"could not read the notebook for @cell: {exc}", exc,
                                            details={"cell": None}) from exc
        return self._snapshot

    def meant(self) -> str:
        """The id of the cell a bare ``@cell`` names (see the module's rule); raises ``SessionReferenceError``."""
        snapshot = self.notebook()
        if snapshot.selected is None:
            raise SessionReferenceError(SESSION_REFERENCE_INVALID_REFERENCE, no_selection_message(snapshot),
                                        details={"cell": None, "label": "cell"})
        ids = [cell.id for cell in snapshot.cells]
        if self.prompt_cell is not None and self.prompt_cell in ids:
            index = ids.index(self.prompt_cell)
            if index == 0:
                raise SessionReferenceError(
                    SESSION_REFERENCE_INVALID_REFERENCE,
                    "@cell in a prompt cell means the cell just above it, and this prompt is the notebook's first "
                    "cell; move the prompt below the cell you mean, or name a cell with @cell:<id>",
                    details={"cell": None, "label": "cell"})
            return ids[index - 1]
        return snapshot.selected

    def adapt(self, text: str) -> str:
        """``text`` with each ``@cell`` / ``@cell:<id>`` outside code written as a ``dsh-cell:`` mention."""
        if not has_cell_mention(text):
            return text

        def replace(match: re.Match[str]) -> str:
            if match.group(1) is not None:
                return match.group(0)
            named = match.group(2)
            if named is not None:
                return format_cell_mention(named, f"cell:{named}")
            return format_cell_mention(self.meant(), "cell")

        return _HOST_MENTION.sub(replace, text)

    def snapshot(self, cell_id: str, max_chars: int) -> CellSnapshot | None:
        cells = self.notebook().cells
        index = next((i for i, cell in enumerate(cells) if cell.id == cell_id), None)
        if index is None:
            return None
        cell = cells[index]
        text = cell_text(cell, index + 1, min(max_chars, MAX_CELL_REFERENCE_CHARS))
        return CellSnapshot(cell.id, cell.cell_type, outputs_brief(cell), text)

