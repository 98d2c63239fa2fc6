"""A notebook document for tests: an in-memory live view the user can also change (move, add, delete cells).

It implements :class:`dsh_jupyter.workspace.document.NotebookDocument` the way the live view must: cells are
addressed by id only, a missing id raises :class:`CellNotFound`, new cells get fresh ids.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from dsh_jupyter.workspace.document import (
    AppliedEdit,
    Cell,
    CellNotFound,
    CellOutput,
    CellType,
    Edit,
    NotebookSnapshot,
    RunResult,
    View,
)


class FakeDocument:
    """Cells in notebook order; ``applied`` lists every edit the tools made; ``runs`` every run."""

    def __init__(self, cells: list[Cell] | None = None, view: View = "live") -> None:
        self.cells: list[Cell] = list(cells or [])
        self._view: View = view
        self._ids = itertools.count(1)
        self.applied: list[Edit] = []
        self.runs: list[str] = []

    @property
    def view(self) -> View:
        return self._view

    def read(self) -> NotebookSnapshot:
        return NotebookSnapshot(self._view, tuple(self.cells), path="work.ipynb")

    def _index(self, cell_id: str) -> int:
        for i, cell in enumerate(self.cells):
            if cell.id == cell_id:
                return i
        raise CellNotFound(f"no cell {cell_id!r} in the live notebook")

    def apply(self, edit: Edit) -> AppliedEdit:
        self.applied.append(edit)
        if edit.action == "insert":
            new = Cell(f"new-{next(self._ids)}", edit.cell_type, edit.source)
            if edit.cell_id is None:
                at = len(self.cells)
            else:
                at = self._index(edit.cell_id) + (1 if edit.position == "after" else 0)
            self.cells.insert(at, new)
            return AppliedEdit("insert", new.id, None, new, at)
        at = self._index(edit.cell_id or "")
        old = self.cells[at]
        if edit.action == "replace":
            self.cells[at] = replace(old, source=edit.source, cell_type=edit.cell_type, outputs=())
            return AppliedEdit("replace", old.id, old, self.cells[at], at)
        del self.cells[at]
        return AppliedEdit("delete", old.id, old, None, at)

    def run(self, cell_id: str, timeout: float) -> RunResult:
        at = self._index(cell_id)
        self.runs.append(cell_id)
        cell = self.cells[at]
        ran = replace(cell, execution_count=len(self.runs),
                      outputs=(CellOutput("stream", f"ran {cell.source}\n", name="stdout"),))
        self.cells[at] = ran
        return RunResult(ran, self._view)

    # -- what the user does between the agent's read and its edit
    def user_insert(self, at: int, source: str, cell_type: CellType = "code") -> Cell:
        cell = Cell(f"user-{next(self._ids)}", cell_type, source)
        self.cells.insert(at, cell)
        return cell

    def user_move(self, cell_id: str, to: int) -> None:
        cell = self.cells.pop(self._index(cell_id))
        self.cells.insert(to, cell)

    def user_delete(self, cell_id: str) -> None:
        del self.cells[self._index(cell_id)]

    def user_type(self, cell_id: str, source: str) -> None:
        at = self._index(cell_id)
        self.cells[at] = replace(self.cells[at], source=source)

    def sources(self) -> list[str]:
        return [cell.source for cell in self.cells]


def sample_cells() -> list[Cell]:
    return [
        Cell("a", "markdown", "# Title"),
        Cell("b", "code", "x = 1\nprint(x)", 1, (CellOutput("stream", "1\n", name="stdout"),)),
        Cell("c", "code", "1/0", 2, (CellOutput("error", "ZeroDivisionError: division by zero",
                                                ename="ZeroDivisionError", evalue="division by zero",
                                                traceback=("Traceback", "----> 1 1/0",
                                                           "ZeroDivisionError: division by zero")),)),
        Cell("d", "code", "y = x + 1\ny", 3, (CellOutput("result", "2", execution_count=3),)),
    ]
