"""The server-side notebook applier: the agent's reads and edits of a notebook no page of ours serves.

The kernel's notebook tools ask the live page first (:mod:`dsh_jupyter.workspace.live_document`);
when none is connected they ask this server (``POST dsh/api/notebook``), which uses

- the notebook's **room** when jupyter-collaboration has it open: the edit goes into the shared Y document, so
  every collaborator sees it at once and the room's own autosave writes it to disk;
- else the **file**, through the server's contents manager, with a checkpoint first and a check that no save
  raced the edit (:class:`~dsh_jupyter.workspace.saved_file.SavedNotebook`).

Both apply edits with the one rule of :mod:`dsh_jupyter.workspace.applier`; cells are addressed by the
notebook's own ids.

The kernel authenticates with a key this server makes at start and hands its kernels in the environment
(:data:`KEY_VARIABLE`, with the server's URL in :data:`URL_VARIABLE`); a person's browser or script uses
jupyter-server's usual authentication.

Requests, JSON ``{"path": "<notebook relative to the root>", "op": ...}``:

- ``read``: ``{"view": "room" | "file", "path", "cells": [nbformat cells]}``;
- ``apply`` with ``"edit"``: ``{"view", "cell_id", "index", "before", "after"}`` (cells as nbformat dicts,
  ``null`` for none) and ``"note"``;
- ``outputs`` with ``"cell_id"``, ``"outputs"``, ``"execution_count"``: ``{"view"}``.

Errors: 400 (bad request), 404 ``not-found`` (no such cell or notebook), 409 ``save-raced``.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from ..workspace.applier import apply_edit, set_outputs, snapshot_of
from ..workspace.document import AppliedEdit, Cell, CellNotFound, Edit, NotebookError, NotebookSnapshot

#: The environment variables the server's kernels get (``%dsh env`` does not show them: no ``DSH_`` prefix).
URL_VARIABLE = "JUPYTER_DSH_SERVER_URL"
KEY_VARIABLE = "JUPYTER_DSH_SERVER_KEY"
#: The header a kernel sends its key in.
KEY_HEADER = "X-Dsh-Kernel-Key"
#: The jupyter-server extension that serves collaboration rooms.
YDOC_EXTENSION = "jupyter_server_ydoc"


def kernel_url(serverapp: Any, base_url: str) -> str:
    """Where a kernel on this machine reaches the server (a wildcard address is reached on the loopback)."""
    ip = str(getattr(serverapp, "ip", "") or "")
    host = "127.0.0.1" if ip in ("", "0.0.0.0", "*") else "[::1]" if ip == "::" else f"[{ip}]" if ":" in ip else ip
    scheme = "https" if getattr(serverapp, "certfile", None) else "http"
    return f"{scheme}://{host}:{serverapp.port}{base_url}"


def hand_kernels_the_way_here(url: str) -> str:
    """Put this server's URL and a new key into the environment kernels inherit; returns the key."""
    key = os.environ.get(KEY_VARIABLE) if os.environ.get(URL_VARIABLE) == url else None
    key = key or secrets.token_urlsafe(32)
    os.environ[URL_VARIABLE] = url
    os.environ[KEY_VARIABLE] = key
    return key


def key_matches(given: str | None, key: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given), key)


class YCells:
    """A :class:`~dsh_jupyter.workspace.applier.CellStore` over a room's ``YNotebook``."""

    def __init__(self, ynotebook: Any) -> None:
        self.notebook = ynotebook

    def cells(self) -> Sequence[Mapping[str, Any]]:
        notebook = self.notebook
        return [notebook.get_cell(i) for i in range(notebook.cell_number)]

    def insert(self, index: int, cell: dict[str, Any]) -> None:
        notebook = self.notebook
        notebook.ycells.insert(index, notebook.create_ycell(cell))

    def set_source(self, index: int, source: str) -> None:
        self.notebook.set_cell(index, source=source)

    def set_cell(self, index: int, cell: dict[str, Any]) -> None:
        self.notebook.set_cell(index, cell)

    def delete(self, index: int) -> None:
        del self.notebook.ycells[index]

    def set_outputs(self, index: int, outputs: list[dict[str, Any]], execution_count: int | None) -> None:
        notebook = self.notebook
        cell = dict(notebook.get_cell(index))
        cell.update(outputs=outputs, execution_count=execution_count)
        notebook.set_cell(index, cell)


def cell_json(cell: Cell | None) -> dict[str, Any] | None:
    """A cell as the reply carries it (what the kernel's ``cell_of`` reads back)."""
    if cell is None:
        return None
    return {"id": cell.id, "cell_type": cell.cell_type, "source": cell.source, "metadata": dict(cell.metadata),
            "execution_count": cell.execution_count}


def snapshot_json(snapshot: NotebookSnapshot, raw: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    return {"view": snapshot.view, "path": snapshot.path,
            "cells": [dict(c) for c in raw] if raw is not None else [cell_json(c) for c in snapshot.cells]}


def applied_json(applied: AppliedEdit, view: str) -> dict[str, Any]:
    return {"view": view, "cell_id": applied.cell_id, "index": applied.index, "before": cell_json(applied.before),
            "after": cell_json(applied.after), "note": applied.note}


class NotebookApplier:
    """Reads and edits notebooks of this server: the room when one has the file open, else the file."""

    def __init__(self, serverapp: Any) -> None:
        self.serverapp = serverapp

    def _ydoc_app(self) -> Any:
        manager = getattr(self.serverapp, "extension_manager", None)
        apps = getattr(manager, "extension_apps", {}) if manager is not None else {}
        found = apps.get(YDOC_EXTENSION) if isinstance(apps, Mapping) else None
        return next(iter(found), None) if found else None

    async def room(self, path: str) -> Any:
        """The room's ``YNotebook`` of ``path`` (the shared one, not a copy), or ``None`` when no room has it."""
        app = self._ydoc_app()
        if app is None:
            return None
        try:
            return await app.get_document(path=path, content_type="notebook", file_format="json", copy=False)
        except Exception:  # no file id for a path that does not exist, a room still starting
            self.serverapp.log.debug("dsh-jupyter: no room for %s", path, exc_info=True)
            return None

    def saved(self, path: str) -> Any:
        from ..workspace.saved_file import SavedNotebook

        return SavedNotebook(self.serverapp.contents_manager, path)

    async def read(self, path: str) -> dict[str, Any]:
        document = await self.room(path)
        if document is not None:
            store = YCells(document)
            return snapshot_json(snapshot_of(store, "room", path), store.cells())
        return snapshot_json(await self.saved(path).read())

    async def snapshot(self, path: str) -> NotebookSnapshot:
        """The cells of ``path`` as the agent reads them (its room, else its file)."""
        document = await self.room(path)
        if document is not None:
            return snapshot_of(YCells(document), "room", path)
        snapshot: NotebookSnapshot = await self.saved(path).read()
        return snapshot

    async def apply(self, path: str, edit: Edit) -> dict[str, Any]:
        document = await self.room(path)
        if document is not None:
            return applied_json(apply_edit(YCells(document), edit, "room"), "room")
        return applied_json(await self.saved(path).apply(edit), "file")

    async def outputs(self, path: str, cell_id: str, outputs: list[dict[str, Any]],
                      execution_count: int | None) -> dict[str, Any]:
        document = await self.room(path)
        if document is not None:
            set_outputs(YCells(document), cell_id, outputs, execution_count, "room")
            return {"view": "room"}
        await self.saved(path).outputs(cell_id, outputs, execution_count)
        return {"view": "file"}


def error_code(exc: NotebookError) -> tuple[int, str]:
    from ..workspace.saved_file import SaveRaced

    if isinstance(exc, CellNotFound):
        return 404, "not-found"
    if isinstance(exc, SaveRaced):
        return 409, "save-raced"
    return 400, "refused"
