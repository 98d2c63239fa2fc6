"""One rule for applying the agent's edits to a notebook held as nbformat cells, whatever holds them.

The Jupyter server applies edits to a collaboration room's Y document (:mod:`dsh_jupyter.server.shared_notebook`)
and to the saved ``.ipynb`` (:mod:`.saved_file`, also the kernel's own path in VS Code); both hand
:func:`apply_edit` a :class:`CellStore` over their cells, so an insert, a replace (source, type, metadata,
tags) and a delete mean the same everywhere, and every view addresses cells by the notebook's own ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .document import (
    CELL_TYPES,
    AppliedEdit,
    Cell,
    CellNotFound,
    Edit,
    NotebookError,
    NotebookSnapshot,
    View,
    merged_metadata,
    missing_cell,
)
from .outputs import output_from_json


class CellStore(Protocol):
    """The cells of one notebook as nbformat dicts (``id``, ``cell_type``, ``source``, ``metadata``, ...)."""

    def cells(self) -> Sequence[Mapping[str, Any]]: ...

    def insert(self, index: int, cell: dict[str, Any]) -> None: ...

    def set_source(self, index: int, source: str) -> None:
        """Change only the source (a shared document keeps the cell and its collaborators' cursors)."""
        ...

    def set_cell(self, index: int, cell: dict[str, Any]) -> None:
        """Replace the whole cell (a change of type or metadata); ``cell`` keeps the old id."""
        ...

    def delete(self, index: int) -> None: ...

    def set_outputs(self, index: int, outputs: list[dict[str, Any]], execution_count: int | None) -> None: ...


def source_text(value: Any) -> str:
    """An nbformat source (a string, or the list of lines a saved file may hold) as one string."""
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else ""


def cell_of(raw: Mapping[str, Any], fallback_id: str) -> Cell:
    """An nbformat cell dict as a :class:`Cell` (a cell of an old file without an id gets ``fallback_id``)."""
    cell_id = raw.get("id")
    kind = raw.get("cell_type")
    count = raw.get("execution_count")
    outputs = raw.get("outputs")
    converted = [output_from_json(o) for o in outputs if isinstance(o, Mapping)] if isinstance(outputs, list) else []
    metadata = raw.get("metadata")
    return Cell(cell_id if isinstance(cell_id, str) and cell_id else fallback_id,
                kind if kind in CELL_TYPES else "raw", source_text(raw.get("source")),
                int(count) if isinstance(count, int | float) and not isinstance(count, bool) else None,
                tuple(o for o in converted if o is not None),
                dict(metadata) if isinstance(metadata, Mapping) else {})


def cells_of(store: CellStore) -> list[Cell]:
    return [cell_of(raw, f"cell-{i}") for i, raw in enumerate(store.cells())]


def snapshot_of(store: CellStore, view: View, path: str | None) -> NotebookSnapshot:
    return NotebookSnapshot(view, tuple(cells_of(store)), path)


def new_cell(cell_type: str, source: str, metadata: Mapping[str, Any], cell_id: str | None = None) -> dict[str, Any]:
    """A new nbformat 4.5 cell (a fresh id unless ``cell_id``)."""
    cell: dict[str, Any] = {"id": cell_id or uuid.uuid4().hex[:12], "cell_type": cell_type, "source": source,
                            "metadata": dict(metadata)}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def index_of(store: CellStore, cell_id: str, view: View) -> int:
    for index, cell in enumerate(cells_of(store)):
        if cell.id == cell_id:
            return index
    raise CellNotFound(missing_cell(cell_id, view))


def apply_edit(store: CellStore, edit: Edit, view: View) -> AppliedEdit:
    """Apply ``edit`` to ``store``; raises :class:`CellNotFound` for an id that is not there (nothing changed)."""
    if edit.action == "insert":
        index = len(store.cells()) if edit.cell_id is None else (
            index_of(store, edit.cell_id, view) + (0 if edit.position == "before" else 1))
        store.insert(index, new_cell(edit.cell_type, edit.source, merged_metadata({}, edit)))
        after = cell_of(store.cells()[index], f"cell-{index}")
        return AppliedEdit("insert", after.id, None, after, index)
    if edit.cell_id is None:
        raise NotebookError(f"a {edit.action} needs the id of the cell")
    index = index_of(store, edit.cell_id, view)
    raw = store.cells()[index]
    before = cell_of(raw, edit.cell_id)
    if edit.action == "delete":
        store.delete(index)
        return AppliedEdit("delete", before.id, before, None, index)
    source = before.source if edit.keep_source else edit.source
    cell_type = before.cell_type if edit.keep_source else edit.cell_type
    if cell_type == before.cell_type and not edit.touches_metadata:
        store.set_source(index, source)
    else:
        replaced = new_cell(cell_type, source, merged_metadata(before.metadata, edit), before.id)
        if cell_type == "code" and before.cell_type == "code":  # a metadata change keeps the outputs
            replaced.update(outputs=list(raw.get("outputs") or []), execution_count=raw.get("execution_count"))
        store.set_cell(index, replaced)
    return AppliedEdit("replace", before.id, before, cell_of(store.cells()[index], before.id), index)


def set_outputs(store: CellStore, cell_id: str, outputs: list[dict[str, Any]], execution_count: int | None,
                view: View) -> None:
    """Put a run's outputs into code cell ``cell_id``."""
    index = index_of(store, cell_id, view)
    if store.cells()[index].get("cell_type") != "code":
        raise NotebookError(f"cell {cell_id!r} is not a code cell; only code cells have outputs")
    store.set_outputs(index, outputs, execution_count)


class ListCells:
    """A :class:`CellStore` over a plain list of nbformat cell dicts (a notebook read from disk)."""

    def __init__(self, cells: list[dict[str, Any]]) -> None:
        self._cells = cells

    def cells(self) -> Sequence[Mapping[str, Any]]:
        return self._cells

    def insert(self, index: int, cell: dict[str, Any]) -> None:
        self._cells.insert(index, cell)

    def set_source(self, index: int, source: str) -> None:
        self._cells[index]["source"] = source

    def set_cell(self, index: int, cell: dict[str, Any]) -> None:
        self._cells[index] = cell

    def delete(self, index: int) -> None:
        del self._cells[index]

    def set_outputs(self, index: int, outputs: list[dict[str, Any]], execution_count: int | None) -> None:
        self._cells[index]["outputs"] = outputs
        self._cells[index]["execution_count"] = execution_count
