"""The agent's edits to a saved ``.ipynb``, through a Jupyter contents manager: a checkpoint first, and a save
that raced the edit refused and reported.

Used by the Jupyter server when the notebook is not open in any collaboration room (with the server's own
contents manager) and by the kernel in VS Code, where the file is all there is (a ``FileContentsManager`` over
the notebook's folder). Every edit:

1. reads the notebook and notes its modification time and size;
2. applies the edit (:mod:`.applier`, the same rule as every other view);
3. makes a checkpoint of the file as it was (the contents manager's "Revert to checkpoint" brings it back);
4. checks the file was not saved by anyone else meanwhile (modification time and size as noted), else
   refuses with :class:`SaveRaced`: the file keeps what the other save wrote, nothing of the edit is written;
5. saves.

A notebook written as nbformat 4.4 or older is saved as 4.5 (cells get the ids the agent already saw).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from .applier import ListCells, apply_edit, set_outputs, snapshot_of
from .document import AppliedEdit, Edit, NotebookError, NotebookSnapshot

#: What a checkpoint the agent made is called in the answer.
CHECKPOINT_NOTE = "a checkpoint of the file as it was was made first (File > Revert Notebook to Checkpoint)"


class SaveRaced(NotebookError):
    """The file was saved by someone else while the edit was applied; the edit was not written."""


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _stamp(model: Mapping[str, Any]) -> tuple[str, object]:
    return str(model.get("last_modified")), model.get("size")


class SavedNotebook:
    """One notebook file of a contents manager (sync or async), as the ``file`` view."""

    def __init__(self, contents: Any, path: str) -> None:
        self.contents = contents
        self.path = path

    async def _load(self) -> tuple[dict[str, Any], tuple[str, object]]:
        try:
            model = await _maybe(self.contents.get(self.path, content=True, type="notebook"))
        except Exception as exc:  # a tornado HTTPError (404, 400) or an OS error
            message = getattr(exc, "log_message", None) or str(exc)
            raise NotebookError(f"cannot read the notebook file {self.path}: {message}") from None
        content = model.get("content")
        if not isinstance(content, Mapping) or not isinstance(content.get("cells"), list):
            raise NotebookError(f"{self.path} is not a notebook the agent can read")
        notebook = _plain(content)
        _with_ids(notebook)
        stat = await _maybe(self.contents.get(self.path, content=False, type="notebook"))
        return notebook, _stamp(stat)

    async def read(self) -> NotebookSnapshot:
        notebook, _ = await self._load()
        return snapshot_of(ListCells(notebook["cells"]), "file", self.path)

    async def apply(self, edit: Edit) -> AppliedEdit:
        notebook, stamp = await self._load()
        applied = apply_edit(ListCells(notebook["cells"]), edit, "file")
        await self._save(notebook, stamp)
        return AppliedEdit(applied.action, applied.cell_id, applied.before, applied.after, applied.index,
                           note=CHECKPOINT_NOTE)

    async def outputs(self, cell_id: str, outputs: list[dict[str, Any]], execution_count: int | None) -> None:
        notebook, stamp = await self._load()
        set_outputs(ListCells(notebook["cells"]), cell_id, outputs, execution_count, "file")
        await self._save(notebook, stamp)

    async def _save(self, notebook: dict[str, Any], stamp: tuple[str, object]) -> None:
        await _maybe(self.contents.create_checkpoint(self.path))
        now = await _maybe(self.contents.get(self.path, content=False, type="notebook"))
        if _stamp(now) != stamp:
            raise SaveRaced(f"{self.path} was saved by someone else (at {now.get('last_modified')}) while the "
                            "agent's edit was being applied; the edit was not written and the file keeps that "
                            "save. Read the notebook again and repeat the edit on what it holds now")
        from nbformat import from_dict

        await _maybe(self.contents.save({"type": "notebook", "format": "json", "content": from_dict(notebook)},
                                        self.path))


def _plain(value: Any) -> Any:
    """A NotebookNode as plain dicts and lists (the applier's cells are edited in place)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _with_ids(notebook: dict[str, Any]) -> None:
    """Make ``notebook`` nbformat 4.5 with an id on every cell (``cell-N`` by position, as read)."""
    if notebook.get("nbformat") == 4 and int(notebook.get("nbformat_minor") or 0) < 5:
        notebook["nbformat_minor"] = 5
    for index, cell in enumerate(notebook.get("cells") or []):
        if isinstance(cell, dict) and not cell.get("id"):
            cell["id"] = f"cell-{index}"
