"""The record of the agent's notebook edits in the session log, and ``%dsh undo``.

Every applied edit lands in its ``tool/result`` event's ``meta.notebookEdit``::

    {"action": "insert" | "replace" | "delete", "cellId": ..., "index": N | null, "view": "live" | "kernel",
     "before": {"cellType", "source"} | null, "after": {"cellType", "source"} | null,
     "anchor": {"after": id} | {"before": id}}        # deletes only: where the cell stood

An undo appends one ``notebook/undo`` event (marked ``ignorable``: readers that do not know it skip it) with
``{"undoneSeq": <the edit's tool/result seq>, "forced": bool, "notebookEdit": <the reverting edit>}``. The
edit to undo is the latest recorded one whose seq no undo names, so a second ``%dsh undo`` reverts the edit
before. The log alone decides, so undo works the same after the kernel restarts and the session is resumed.

Secrets: a tool result leaves its tool with every secret value masked (:data:`~dsh_jupyter.secrets.MASK`,
``tools/base.py``), its ``notebookEdit`` record too, so the session (and its log) knows an edited source only up
to its secrets. A cell whose source, masked the same way, is the recorded one counts as unchanged, and a source
the record holds masked is never written back (that would put ``[masked]`` in the cell instead of the value):
such an undo is refused, even with ``--force``, and says what to do instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..secrets import MASK, mask_text
from .document import AppliedEdit, Cell, Edit, NotebookDocument, NotebookError, NotebookSnapshot, metadata_change

EDIT_META_KEY = "notebookEdit"
UNDO_EVENT = "notebook/undo"


def cell_json(cell: Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    data: dict[str, Any] = {"cellType": cell.cell_type, "source": cell.source}
    if cell.metadata:
        data["metadata"] = dict(cell.metadata)
    return data


def edit_record(applied: AppliedEdit, view: str, *, anchor: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``meta.notebookEdit`` of an applied edit."""
    record: dict[str, Any] = {"action": applied.action, "cellId": applied.cell_id, "index": applied.index,
                              "view": view, "before": cell_json(applied.before), "after": cell_json(applied.after)}
    if anchor is not None:
        record["anchor"] = dict(anchor)
    return record


@dataclass(frozen=True)
class RecordedEdit:
    """An edit as the log holds it: the seq of its ``tool/result`` event and its ``notebookEdit`` record."""

    seq: int
    record: Mapping[str, Any]

    @property
    def action(self) -> str:
        return str(self.record.get("action"))

    @property
    def cell_id(self) -> str:
        return str(self.record.get("cellId"))

    def side(self, name: str) -> Mapping[str, Any] | None:
        value = self.record.get(name)
        return value if isinstance(value, Mapping) else None


def recorded_edits(events: Iterable[Any]) -> list[RecordedEdit]:
    """The agent's applied edits not undone yet, oldest first (``events``: a session log's events)."""
    edits: list[RecordedEdit] = []
    undone: set[int] = set()
    for event in events:
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == "tool/result":
            meta = data.get("meta")
            record = meta.get(EDIT_META_KEY) if isinstance(meta, Mapping) else None
            if isinstance(record, Mapping) and record.get("action") in ("insert", "replace", "delete"):
                edits.append(RecordedEdit(event.seq, record))
        elif event.type == UNDO_EVENT and isinstance(data.get("undoneSeq"), int):
            undone.add(data["undoneSeq"])
    return [edit for edit in edits if edit.seq not in undone]


class UndoRefused(NotebookError):
    """The last edit cannot be reverted now; the message says why and what to do."""


def _find(snapshot: NotebookSnapshot, cell_id: str) -> Cell | None:
    return next((cell for cell in snapshot.cells if cell.id == cell_id), None)


def reverting_edit(edit: RecordedEdit, document: NotebookDocument, *, force: bool = False) -> Edit:
    """The edit that reverts ``edit`` in ``document`` now, or :class:`UndoRefused` saying why not."""
    action, cell_id = edit.action, edit.cell_id
    if edit.record.get("view") == "kernel" and action == "insert":
        raise UndoRefused("the agent's last edit added a cell through IPython's set_next_input, and the kernel "
                          "cannot remove cells; delete that cell yourself if you do not want it")
    if document.view == "kernel":
        raise UndoRefused(f"the agent's last edit ({action} of cell {cell_id}) was made in the notebook, and "
                          "this frontend only shows the kernel's record, which cannot change cells; reopen the "
                          "notebook in JupyterLab or Notebook 7 with the dsh-jupyter extension and run %dsh undo "
                          "there")
    snapshot = document.read()
    if action in ("insert", "replace"):
        cell = _find(snapshot, cell_id)
        if cell is None:
            raise UndoRefused(f"the cell the agent's last edit {'added' if action == 'insert' else 'changed'} "
                              f"({cell_id}) is no longer in the notebook; there is nothing to revert")
        after = edit.side("after") or {}
        if not _same_source(cell.source, after.get("source")) and not force:
            raise UndoRefused(f"cell {cell_id} was changed since the agent's {action}; %dsh undo --force reverts "
                              "it anyway (your changes to that cell are lost)")
        if action == "insert":
            return Edit("delete", cell_id)
        before = edit.side("before") or {}
        return Edit("replace", cell_id, _source_to_restore(before, cell_id, action),
                    _cell_type(before.get("cellType")), metadata=_metadata_back(before, cell))
    before = edit.side("before") or {}
    if _find(snapshot, cell_id) is not None:
        raise UndoRefused(f"cell {cell_id}, which the agent deleted, is in the notebook again; nothing to revert")
    anchor = edit.record.get("anchor")
    anchor = anchor if isinstance(anchor, Mapping) else {}
    source, cell_type = _source_to_restore(before, cell_id, action), _cell_type(before.get("cellType"))
    meta = _metadata_back(before, None)
    after_id, before_id = anchor.get("after"), anchor.get("before")
    if isinstance(after_id, str) and _find(snapshot, after_id) is not None:
        return Edit("insert", after_id, source, cell_type, "after", metadata=meta)
    if isinstance(before_id, str) and _find(snapshot, before_id) is not None:
        return Edit("insert", before_id, source, cell_type, "before", metadata=meta)
    if not anchor and snapshot.cells:  # it was the only cell: put it first
        return Edit("insert", snapshot.cells[0].id, source, cell_type, "before", metadata=meta)
    if anchor and not force:
        raise UndoRefused(f"the cells around cell {cell_id}, which the agent deleted, are gone too, so its place "
                          "is unknown; %dsh undo --force puts it back at the end")
    return Edit("insert", None, source, cell_type, "after", metadata=meta)


def _same_source(source: str, recorded: Any) -> bool:
    """Whether the cell's ``source`` is the ``recorded`` one: equal, or equal once its secret values are masked as
    the record's were (a cell holding the very secret the record shows as ``[masked]``)."""
    if not isinstance(recorded, str):
        return False
    return source == recorded or (MASK in recorded and mask_text(source) == recorded)


def _source_to_restore(before: Mapping[str, Any], cell_id: str, action: str) -> str:
    """The source an undo writes back; refused when the record holds it masked (it would write ``[masked]``)."""
    source = str(before.get("source", ""))
    if MASK in source:
        raise UndoRefused(f"cell {cell_id}'s source before the agent's {action} held a secret value, which the "
                          f"session keeps only as {MASK}, so undo cannot put the value back; restore that cell by "
                          "hand (Edit > Undo in the notebook may still have it)")
    return source


def _metadata_back(before: Mapping[str, Any], now: Cell | None) -> dict[str, Any] | None:
    """The metadata change that gives a cell its recorded ``before`` metadata again (``None``: none needed)."""
    recorded = before.get("metadata")
    recorded = dict(recorded) if isinstance(recorded, Mapping) else {}
    change = metadata_change(recorded, dict(now.metadata) if now is not None else {})
    return change or None


def _cell_type(value: Any) -> Any:
    return value if value in ("code", "markdown", "raw") else "code"


def undo_record(edit: RecordedEdit, applied: AppliedEdit, view: str, *, forced: bool) -> dict[str, Any]:
    """The data of the ``notebook/undo`` event."""
    return {"undoneSeq": edit.seq, "forced": forced, EDIT_META_KEY: edit_record(applied, view)}


def describe_undo(edit: RecordedEdit, applied: AppliedEdit) -> str:
    """One line for the user: what the undo did."""
    if edit.action == "insert":
        return f"undid the agent's insert: deleted cell {edit.cell_id}"
    if edit.action == "replace":
        return f"undid the agent's replace: cell {edit.cell_id} has its earlier source again"
    return f"undid the agent's delete: the cell is back (new id {applied.cell_id})"
