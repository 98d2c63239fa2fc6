"""The notebook when no page of ours is connected: the Jupyter server's applier, or the saved file in VS Code.

- **Under a Jupyter server** (JupyterLab, Notebook 7, any front end of it: the server's kernels find the way
  back in :data:`~dsh_jupyter.server.shared_notebook.URL_VARIABLE` / ``KEY_VARIABLE``, and their notebook in
  their kernel id): :class:`ServerDocument` asks ``POST dsh/api/notebook``, which edits the notebook's
  collaboration room when one has it open (the ``room`` view, seen by every collaborator) or else the file
  (the ``file`` view, with a checkpoint and a check that no save raced the edit).
- **In VS Code** (``__vsc_ipynb_file__`` names the notebook): :class:`VSCodeFile` edits the saved ``.ipynb``
  the same way, through a contents manager of its own, and refuses plainly while VS Code holds changes the
  file does not have (a cell that ran after the last save is not in the file: VS Code would keep its copy).

Both return ``None`` from :func:`outside_document` when they do not apply, and the kernel's record answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .applier import cell_of
from .cell_runner import Runner, run_document_cell
from .document import (
    AppliedEdit,
    Cell,
    CellNotFound,
    Edit,
    NotebookError,
    NotebookSnapshot,
    RunResult,
    View,
    edit_to_json,
)

URL_VARIABLE = "JUPYTER_DSH_SERVER_URL"  # dsh_jupyter.server.shared_notebook (a test checks they agree)
KEY_VARIABLE = "JUPYTER_DSH_SERVER_KEY"
KEY_HEADER = "X-Dsh-Kernel-Key"
#: Seconds a request to the server may take.
REQUEST_TIMEOUT = 30.0



def _cell_or_none(raw: Any) -> Cell | None:
    return cell_of(raw, "") if isinstance(raw, Mapping) else None


class ServerDocument:
    """The notebook ``path`` as the Jupyter server holds it: its room, else its file."""

    def __init__(self, url: str, key: str, kernel_id: str, runner: Runner | None = None) -> None:
        self.url = url.rstrip("/") + "/dsh/api/notebook"
        self.key = key
        self.kernel_id = kernel_id
        self.path: str | None = None  # the server says (the session's path now)
        self.runner = runner
        self._view: View = "file"

    @property
    def view(self) -> View:
        return self._view

    def _post(self, body: dict[str, Any], cell_id: str | None = None) -> dict[str, Any]:
        data = json.dumps({"kernel_id": self.kernel_id, **body}).encode()
        headers = {"Content-Type": "application/json", KEY_HEADER: self.key}
        request = urllib.request.Request(self.url, data, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                reply = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                error = json.loads(exc.read() or b"{}").get("error") or {}
            except ValueError:
                error = {}
            message = str(error.get("message") or f"the Jupyter server answered {exc.code}")
            if error.get("code") == "not-found" and cell_id is not None:
                raise CellNotFound(message) from None
            raise NotebookError(message) from None
        except (OSError, ValueError) as exc:
            raise NotebookError(f"the Jupyter server could not be reached to edit the notebook ({exc})") from None
        if not isinstance(reply, dict):
            raise NotebookError("the Jupyter server's answer makes no sense")
        if isinstance(reply.get("path"), str):
            self.path = reply["path"]
        view = reply.get("view")
        if view in ("room", "file"):
            self._view = view
        return reply

    def read(self) -> NotebookSnapshot:
        reply = self._post({"op": "read"})
        raw = reply.get("cells")
        cells = [cell_of(c, f"cell-{i}") for i, c in enumerate(raw) if isinstance(c, Mapping)] \
            if isinstance(raw, list) else []
        return NotebookSnapshot(self._view, tuple(cells), self.path)

    def apply(self, edit: Edit) -> AppliedEdit:

        reply = self._post({"op": "apply", "edit": edit_to_json(edit)}, edit.cell_id)
        cell_id, index, note = reply.get("cell_id"), reply.get("index"), reply.get("note")
        if not isinstance(cell_id, str):
            raise NotebookError("the Jupyter server did not say which cell it changed")
        return AppliedEdit(edit.action, cell_id, _cell_or_none(reply.get("before")),
                           _cell_or_none(reply.get("after")), index if isinstance(index, int) else None,
                           note=note if isinstance(note, str) else "")

    def put_outputs(self, cell_id: str, outputs: list[dict[str, Any]], count: int | None) -> None:
        self._post({"op": "outputs", "cell_id": cell_id, "outputs": outputs, "execution_count": count}, cell_id)

    def run(self, cell_id: str, timeout: float) -> RunResult:
        return run_document_cell(self, cell_id, timeout, self.runner, self.put_outputs)


class VSCodeFile:
    """The saved ``.ipynb`` VS Code has open, edited through a contents manager over its folder."""

    def __init__(self, file: Path, ran: Callable[[], Sequence[tuple[str, float]]],
                 runner: Runner | None = None) -> None:
        from .saved_file import SavedNotebook

        self.file = file
        self.ran = ran
        self.runner = runner
        self._saved = SavedNotebook(_contents(file.parent), file.name)

    @property
    def view(self) -> View:
        return "file"

    def read(self) -> NotebookSnapshot:
        snapshot = asyncio.run(self._saved.read())
        return NotebookSnapshot("file", snapshot.cells, str(self.file))

    def check_saved(self, cells: Sequence[Cell]) -> None:
        """Refuse while VS Code holds cells the file does not have (they ran after its last save)."""
        try:
            saved_at = self.file.stat().st_mtime
        except OSError as exc:
            raise NotebookError(f"cannot read {self.file}: {exc}") from None
        sources = {cell.source.strip() for cell in cells}
        unsaved = [source for source, at in self.ran() if at > saved_at and source.strip() not in sources]
        if unsaved:
            raise NotebookError(
                f"VS Code has changes to {self.file.name} that are not saved (a cell that ran since the last save "
                "is not in the file), so the agent cannot replace or delete cells: VS Code would keep its own "
                "copy. Save the notebook in VS Code (Ctrl+S) and ask again; the agent edits the saved file")

    def apply(self, edit: Edit) -> AppliedEdit:
        self.check_saved(self.read().cells)
        return asyncio.run(self._saved.apply(edit))

    def put_outputs(self, cell_id: str, outputs: list[dict[str, Any]], count: int | None) -> None:
        asyncio.run(self._saved.outputs(cell_id, outputs, count))

    def run(self, cell_id: str, timeout: float) -> RunResult:
        return run_document_cell(self, cell_id, timeout, self.runner, self.put_outputs)


def _contents(folder: Path) -> Any:
    from jupyter_server.services.contents.filemanager import FileContentsManager

    return FileContentsManager(root_dir=str(folder))


def kernel_id_of(shell: Any) -> str | None:
    """This kernel's id, as its server knows it (the connection file is ``kernel-<id>.json``)."""
    kernel = getattr(shell, "kernel", None)
    app = getattr(kernel, "parent", None)
    file = getattr(app, "connection_file", None)
    name = Path(file).stem if isinstance(file, str) and file else ""
    return name.removeprefix("kernel-") if name.startswith("kernel-") else None


def outside_document(shell: Any, runner: Runner | None,
                     ran: Callable[[], Sequence[tuple[str, float]]]) -> ServerDocument | VSCodeFile | None:
    """The document for a kernel no page of ours serves: the server's applier, VS Code's saved file, or ``None``."""
    url, key, kernel_id = os.environ.get(URL_VARIABLE), os.environ.get(KEY_VARIABLE), kernel_id_of(shell)
    if url and key and kernel_id:
        return ServerDocument(url, key, kernel_id, runner)
    namespace = getattr(shell, "user_ns", None)
    file = namespace.get("__vsc_ipynb_file__") if isinstance(namespace, dict) else None
    if isinstance(file, str) and file.endswith(".ipynb") and Path(file).is_file():
        return VSCodeFile(Path(file), ran, runner)
    return None
