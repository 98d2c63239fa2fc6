"""The notebook as the agent sees it: cells, their outputs, and the edits and runs it may ask for.

Two views implement :class:`NotebookDocument`:

- the **live** document of JupyterLab and Notebook 7 (unsaved edits included), which the dsh-jupyter
  front-end extension serves over a kernel comm (:mod:`.live_document`);
- the **room** document (:mod:`.server_document`): with no page of ours connected, the Jupyter server edits
  the notebook's shared Y document when a real-time collaboration room has it open (every collaborator sees
  the change), else
- the **file** on disk, through a contents manager with a checkpoint first and a modification-time check
  (:mod:`.saved_file`; the server's, or in VS Code the kernel's own over the saved ``.ipynb``);
- the **kernel** record (:mod:`.kernel_record`): the cells this kernel executed, gathered from IPython's execution
  events and display publisher. It answers everywhere (VS Code, nbclient, papermill, terminal IPython),
  but it only knows what ran, and it can take at most new cells (through ``set_next_input``).

The tools (:mod:`.notebook_tools`) only speak to this protocol and say which view answered. Cells are
addressed by id, never by position: a cell the user moved is still found, a deleted one is a
:class:`CellNotFound` error, so an edit never lands on the wrong cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ..images import ToolImage
from ..secrets import MASK, restore_masked_lines

CellType = Literal["code", "markdown", "raw"]
#: The cell types a notebook holds (nbformat 4).
CELL_TYPES: tuple[CellType, ...] = ("code", "markdown", "raw")
View = Literal["live", "room", "file", "kernel"]
OutputKind = Literal["stream", "result", "display", "error"]
EditAction = Literal["insert", "replace", "delete"]
Position = Literal["before", "after"]


#: An image output (mime type, decoded bytes, size when known): the same type tools hand back.
ImageData = ToolImage


@dataclass(frozen=True)
class CellOutput:
    """One output of a cell, reduced to what the agent can read.

    ``text`` is the output as text: stream text, a result's or display's ``text/plain``, or for an error
    its ``ename: evalue`` line. Errors also carry ``ename``, ``evalue`` and the traceback (ANSI colours
    removed). ``images`` are the output's image payloads (``image/png``, ``image/jpeg``), decoded.
    """

    kind: OutputKind
    text: str = ""
    name: str | None = None  # "stdout" / "stderr" for streams
    ename: str | None = None
    evalue: str | None = None
    traceback: tuple[str, ...] = ()
    images: tuple[ImageData, ...] = ()
    execution_count: int | None = None  # results only


@dataclass(frozen=True)
class Cell:
    """One cell: its stable id, type, source, execution count, outputs and metadata (``tags`` among them)."""

    id: str
    cell_type: CellType
    source: str
    execution_count: int | None = None
    outputs: tuple[CellOutput, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def tags(self) -> tuple[str, ...]:
        tags = self.metadata.get("tags")
        return tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()

    @property
    def error(self) -> CellOutput | None:
        """The cell's error output, if its last run failed."""
        return next((output for output in self.outputs if output.kind == "error"), None)


@dataclass(frozen=True)
class NotebookSnapshot:
    """The cells in notebook order (live view) or in execution order (kernel view)."""

    view: View
    cells: tuple[Cell, ...]
    path: str | None = None  # the notebook's path relative to the server root, when the live view knows it
    selected: str | None = None  # the id of the cell the person has selected (live view)


@dataclass(frozen=True)
class Edit:
    """One change the agent asks for.

    ``insert`` puts a new cell ``position`` (``before`` / ``after``) the cell ``cell_id`` (``None``: at the
    end); ``replace`` sets the source (and optionally the type) of ``cell_id``; ``delete`` removes it.

    ``metadata`` (insert, replace) sets those keys of the cell's metadata (a ``None`` value removes the key);
    ``tags`` (insert, replace) sets the cell's ``tags`` list (``()`` removes them). ``keep_source``: a replace
    that changes only metadata or tags (the tool fills ``source`` and ``cell_type`` from the cell).
    """

    action: EditAction
    cell_id: str | None
    source: str = ""
    cell_type: CellType = "code"
    position: Position = "after"
    metadata: Mapping[str, Any] | None = None
    tags: tuple[str, ...] | None = None
    keep_source: bool = False

    @property
    def touches_metadata(self) -> bool:
        return self.metadata is not None or self.tags is not None


@dataclass(frozen=True)
class AppliedEdit:
    """An edit as applied: the cell it touched, what it held before and after (``None``: no cell)."""

    action: EditAction
    cell_id: str
    before: Cell | None
    after: Cell | None
    index: int | None = None  # the cell's position after the edit (before it, for a delete), when known
    note: str = ""  # e.g. "the new cell appears below this one when the cell finishes"


@dataclass(frozen=True)
class RunResult:
    """A cell's run: the cell as it now is (source, execution count, outputs)."""

    cell: Cell
    view: View


class NotebookError(Exception):
    """An edit or run that cannot happen; the message is for the user and the model alike."""


class CellNotFound(NotebookError):
    """The addressed cell is not in the notebook (any more): deleted, or an id the agent made up."""


class EditsUnsupported(NotebookError):
    """This frontend cannot take this edit (the message says what it can do instead)."""


class NotebookDocument(Protocol):
    """A view of the notebook the tools can read, edit and run."""

    @property
    def view(self) -> View: ...

    def read(self) -> NotebookSnapshot:
        """The cells now (unsaved edits included in the live view)."""
        ...

    def apply(self, edit: Edit) -> AppliedEdit:
        """Apply ``edit`` at once (approval was settled before); raises :class:`NotebookError`."""
        ...

    def run(self, cell_id: str, timeout: float) -> RunResult:
        """Run one cell and return it with its new outputs; raises :class:`NotebookError`."""
        ...


#: How each view is named to the user and the model.
VIEW_NAMES: dict[View, str] = {
    "live": "the live notebook",
    "room": "the notebook's shared document (its collaboration room)",
    "file": "the saved notebook file",
    "kernel": "the kernel's record of executed cells",
}


def merged_metadata(current: Mapping[str, Any], edit: Edit) -> dict[str, Any]:
    """The cell metadata ``current`` after ``edit``'s ``metadata`` and ``tags`` (one rule for every view)."""
    merged = dict(current)
    for key, value in (edit.metadata or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    if edit.tags is not None:
        if edit.tags:
            merged["tags"] = list(dict.fromkeys(edit.tags))
        else:
            merged.pop("tags", None)
    return merged


def metadata_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The ``metadata`` of an edit that turns ``after`` back into ``before`` (``None``: remove the key)."""
    change: dict[str, Any] = {key: None for key in after if key not in before}
    change.update({key: value for key, value in before.items() if after.get(key) != value})
    return change


def with_secrets_restored(edit: Edit, snapshot: NotebookSnapshot) -> tuple[Edit, list[int]]:
    """``edit`` as it lands: the agent saw the notebook's secret values as ``[masked]``, so each line of its source
    holding one gets its value back from the notebook's line that masks to it (the edited cell's lines first);
    and the numbers of the lines no line masks to (an edit with any must not be applied: it would write
    ``[masked]`` into the cell)."""
    if edit.action == "delete" or edit.keep_source or MASK not in edit.source:
        return edit, []
    cells = sorted(snapshot.cells, key=lambda cell: cell.id != edit.cell_id)  # the edited cell first
    source, missing = restore_masked_lines(edit.source, [cell.source for cell in cells])
    return replace(edit, source=source), missing


def missing_cell(cell_id: str, view: View) -> str:
    """What the agent is told about an id that is not (or no longer) in the notebook."""
    where = VIEW_NAMES[view]
    return (f"there is no cell with id {cell_id!r} in {where} (it was deleted, or the id is not one "
            "notebook_read gave); nothing was changed — read the notebook again for the current ids")


def is_dsh_cell(source: str) -> bool:
    """Whether ``source`` is a ``%%dsh`` prompt cell."""
    return source.lstrip().startswith("%%dsh")


# --------------------------------------------------------------------------- an edit on the wire


def edit_to_json(edit: Edit) -> dict[str, Any]:
    """An :class:`Edit` as the page, the server and the kernel send it to each other (:func:`edit_from_arguments`
    reads it back)."""
    data: dict[str, Any] = {"action": edit.action, "cell_id": edit.cell_id, "source": edit.source,
                            "cell_type": edit.cell_type, "position": edit.position}
    if edit.metadata is not None:
        data["metadata"] = dict(edit.metadata)
    if edit.tags is not None:
        data["tags"] = list(edit.tags)
    if edit.keep_source:
        data["keep_source"] = True
    return data


def edit_from_arguments(arguments: Any) -> Edit | None:
    """A ``notebook_edit`` call's arguments (or an edit as :func:`edit_to_json` wrote it) as an :class:`Edit`;
    ``None`` when they make no sense. A replace without a source but with tags or metadata keeps the source."""
    if not isinstance(arguments, Mapping):
        return None
    action = arguments.get("action")
    cell_id = arguments.get("cell_id")
    cell_type = arguments.get("cell_type", "code")
    position = arguments.get("position", "after")
    metadata, tags = arguments.get("metadata"), arguments.get("tags")
    if metadata is not None and not isinstance(metadata, Mapping):
        return None
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        return None
    keep = arguments.get("keep_source", action == "replace" and arguments.get("source") is None
                         and (metadata is not None or tags is not None))
    source = arguments.get("source", "") if not keep else arguments.get("source") or ""
    if action not in ("insert", "replace", "delete") or not isinstance(source, str) or not isinstance(keep, bool):
        return None
    if cell_id is not None and not isinstance(cell_id, str):
        return None
    if action != "insert" and not cell_id:
        return None
    return Edit(action, cell_id, source, cell_type if cell_type in CELL_TYPES else "code",
                position if position in ("before", "after") else "after",
                metadata=dict(metadata) if metadata is not None else None,
                tags=tuple(tags) if tags is not None else None, keep_source=keep)
