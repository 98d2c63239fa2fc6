"""The server-side notebook applier: one rule for edits (nbformat cells, a collaboration room's Y document, the
saved file), ``POST dsh/api/notebook`` through a real jupyter-server, and the agent's own tools reaching the file
with no page open (a checkpoint first; a save that raced the edit refused, nothing lost).

Plain functions driving ``jp_fetch`` on pytest-jupyter's loop (see ``server_helpers``); the kernel side's
blocking HTTP client runs on a worker thread while that loop serves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest
from server_helpers import SERVER_CONFIG, Api, server_api

from dsh_jupyter.workspace.applier import ListCells, apply_edit, snapshot_of, source_text
from dsh_jupyter.workspace.document import CellNotFound, Edit, NotebookError, merged_metadata
from dsh_jupyter.workspace.edits import RecordedEdit, edit_record, reverting_edit
from dsh_jupyter.workspace.kernel_record import KernelRecord
from dsh_jupyter.workspace.notebook_tools import NotebookEditTool, NotebookReadTool, Workspace
from dsh_jupyter.workspace.saved_file import SavedNotebook, SaveRaced
from dsh_jupyter.workspace.server_document import ServerDocument, VSCodeFile

jp_server_config = pytest.fixture(lambda: SERVER_CONFIG)
api = server_api()


def _cells() -> list[dict[str, Any]]:
    return [
        {"id": "load", "cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": [], "execution_count": 1},
        {"id": "notes", "cell_type": "markdown", "source": "# Notes", "metadata": {"collapsed": False}},
        {"id": "plot", "cell_type": "code", "source": "print(x)", "metadata": {"tags": ["keep"]},
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}], "execution_count": 2},
    ]


# -- the one rule ---------------------------------------------------------------------------------------
def test_edits_address_cells_by_id_and_change_source_type_tags_and_metadata() -> None:
    store = ListCells(_cells())
    inserted = apply_edit(store, Edit("insert", "load", "y = 2", position="before", tags=("parameters",)), "file")
    assert [c.id for c in snapshot_of(store, "file", None).cells][1:] == ["load", "notes", "plot"]
    assert inserted.index == 0 and inserted.after is not None and inserted.after.tags == ("parameters",)

    tagged = apply_edit(store, Edit("replace", "plot", keep_source=True, tags=("parameters", "parameters"),
                                    metadata={"scrolled": True}), "file")
    assert tagged.after is not None and tagged.after.source == "print(x)" and tagged.after.tags == ("parameters",)
    assert tagged.after.metadata["scrolled"] is True
    assert store.cells()[3]["outputs"], "a metadata change keeps the cell's outputs"

    retyped = apply_edit(store, Edit("replace", "notes", "print('now code')", "code"), "file")
    assert retyped.after is not None and retyped.after.cell_type == "code" and retyped.after.id == "notes"
    assert retyped.after.metadata == {"collapsed": False}

    deleted = apply_edit(store, Edit("delete", "load"), "file")
    assert deleted.before is not None and deleted.before.source == "x = 1" and deleted.index == 1
    with pytest.raises(CellNotFound, match=r"'load'.*nothing was changed"):
        apply_edit(store, Edit("replace", "load", "z"), "file")
    assert len(store.cells()) == 3


def test_metadata_merge_sets_and_removes_keys_and_undo_restores_the_metadata() -> None:
    assert merged_metadata({"a": 1, "tags": ["x"]}, Edit("replace", "c", metadata={"a": None, "b": 2}, tags=())) \
        == {"b": 2}
    store = ListCells(_cells())
    applied = apply_edit(store, Edit("replace", "plot", keep_source=True, tags=("parameters",)), "file")
    recorded = RecordedEdit(7, edit_record(applied, "file"))

    class Doc:
        view = "file"

        def read(self) -> Any:
            return snapshot_of(store, "file", None)

    back = reverting_edit(recorded, Doc())  # type: ignore[arg-type]
    apply_edit(store, back, "file")
    assert store.cells()[2]["metadata"] == {"tags": ["keep"]}


# -- the saved file: a checkpoint, and a save that raced the edit --------------------------------------
def _write(path: Path, cells: list[dict[str, Any]], minor: int = 5) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.nbformat_minor = minor
    notebook.cells = [nbformat.from_dict(c) for c in cells]
    if minor < 5:
        for cell in notebook.cells:
            cell.pop("id", None)
    path.write_text(json.dumps(notebook), encoding="utf-8")


def _contents(root: Path, before_save: Callable[[], None] | None = None) -> Any:
    from jupyter_server.services.contents.filemanager import FileContentsManager

    class Racing(FileContentsManager):  # another save lands while the agent's edit is applied
        def create_checkpoint(self, path: str) -> Any:
            checkpoint = super().create_checkpoint(path)
            if before_save is not None:
                before_save()
            return checkpoint

    return Racing(root_dir=str(root))


def test_a_save_that_raced_the_edit_is_refused_and_both_versions_survive(tmp_path: Path) -> None:
    file = tmp_path / "a.ipynb"
    _write(file, _cells())

    def someone_saves() -> None:
        raw = json.loads(file.read_text(encoding="utf-8"))
        raw["cells"][0]["source"] = "x = 'theirs'"
        file.write_text(json.dumps(raw), encoding="utf-8")

    contents = _contents(tmp_path, someone_saves)
    with pytest.raises(SaveRaced, match=r"saved by someone else.*not written.*Read the notebook again"):
        asyncio.run(SavedNotebook(contents, "a.ipynb").apply(Edit("replace", "load", "x = 'agent'")))
    assert source_text(json.loads(file.read_text(encoding="utf-8"))["cells"][0]["source"]) == "x = 'theirs'"
    checkpoints = contents.list_checkpoints("a.ipynb")
    assert checkpoints, "the checkpoint of the file before the edit is there"


def test_an_old_notebook_gets_the_ids_the_agent_read_and_a_missing_file_says_so(tmp_path: Path) -> None:
    _write(tmp_path / "old.ipynb", _cells(), minor=4)
    saved = SavedNotebook(_contents(tmp_path), "old.ipynb")
    ids = [c.id for c in asyncio.run(saved.read()).cells]
    assert ids == ["cell-0", "cell-1", "cell-2"]
    asyncio.run(saved.apply(Edit("delete", "cell-1")))
    raw = json.loads((tmp_path / "old.ipynb").read_text(encoding="utf-8"))
    assert raw["nbformat_minor"] == 5 and [c["id"] for c in raw["cells"]] == ["cell-0", "cell-2"]
    with pytest.raises(NotebookError, match=r"cannot read the notebook file gone\.ipynb"):
        asyncio.run(SavedNotebook(_contents(tmp_path), "gone.ipynb").read())


# -- POST dsh/api/notebook ----------------------------------------------------------------------------
def _post(api: Api, body: dict[str, Any]) -> Any:
    from tornado.httpclient import HTTPClientError

    try:
        response = api.run(api._fetch("dsh", "api", "notebook", method="POST", body=json.dumps(body)))
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body)


def test_the_endpoint_edits_the_file_with_a_checkpoint_and_says_what_is_wrong(api: Api, jp_root_dir: Path) -> None:
    _write(jp_root_dir / "nb.ipynb", _cells())
    code, read = _post(api, {"op": "read", "path": "nb.ipynb"})
    assert code == 200 and read["view"] == "file" and [c["id"] for c in read["cells"]] == ["load", "notes", "plot"]
    code, done = _post(api, {"op": "apply", "path": "nb.ipynb",
                             "edit": {"action": "replace", "cell_id": "load", "source": "x = 42"}})
    assert code == 200 and done["view"] == "file" and done["before"]["source"] == "x = 1"
    assert "checkpoint" in done["note"]
    saved = json.loads((jp_root_dir / "nb.ipynb").read_text(encoding="utf-8"))
    assert source_text(saved["cells"][0]["source"]) == "x = 42"
    checkpoints = api.get("api", "contents", "nb.ipynb", "checkpoints")
    assert checkpoints, "a checkpoint was made before the save"

    assert _post(api, {"op": "apply", "path": "nb.ipynb", "edit": {"action": "delete", "cell_id": "nope"}})[0] == 404
    assert _post(api, {"op": "rename", "path": "nb.ipynb"})[0] == 400
    code, body = _post(api, {"op": "read", "path": "../outside.ipynb"})
    assert code == 400 and "under the server root" in body["message"]
    code, body = _post(api, {"op": "read", "kernel_id": "no-such-kernel"})
    assert code == 404 and "no notebook session" in body["message"]
    assert api.raw_status("dsh/api/notebook", method="POST", body="{}") == 403


def test_with_no_page_open_the_agents_tools_edit_the_file_on_disk(api: Api, jp_root_dir: Path,
                                                                  jp_serverapp: Any) -> None:
    """The Must show: replace and delete reach the .ipynb through the server (its kernel's key and id), with a
    checkpoint; then a save that raced the edit is reported and nothing is lost."""
    import os

    from dsh_jupyter.server.shared_notebook import KEY_VARIABLE, URL_VARIABLE

    _write(jp_root_dir / "work.ipynb", _cells())
    kernel_id = "0c1d2e3f-kernel-of-work"
    sessions = jp_serverapp.session_manager

    async def listed() -> list[dict[str, Any]]:  # the session the server would list for the notebook's kernel
        return [{"id": "s1", "path": "work.ipynb", "type": "notebook", "kernel": {"id": kernel_id}}]

    sessions.list_sessions = listed
    shell = SimpleNamespace(user_ns={}, kernel=SimpleNamespace(parent=SimpleNamespace(
        connection_file=f"/run/kernel-{kernel_id}.json")))
    host = SimpleNamespace(kernel_record=SimpleNamespace(shell=shell, executions=list), live_source=None,
                           main_thread_calls=None)
    assert os.environ[URL_VARIABLE] and os.environ[KEY_VARIABLE]  # what the server's kernels inherit
    workspace = Workspace(host)  # type: ignore[arg-type]

    def off_the_loop(call: Callable[[], Any]) -> Any:
        return api.run(asyncio.to_thread(call))

    document = off_the_loop(workspace.document)
    assert isinstance(document, ServerDocument) and document.view == "file"
    read = off_the_loop(lambda: asyncio.run(NotebookReadTool(workspace).run({}, None)))  # type: ignore[arg-type]
    assert read.text.startswith("Notebook: the saved file") and "id plot" in read.text
    editor = NotebookEditTool(workspace)
    replaced = off_the_loop(lambda: editor.apply(editor.parse({"action": "replace", "cell_id": "load",
                                                               "source": "x = 'agent'"})))
    deleted = off_the_loop(lambda: editor.apply(editor.parse({"action": "delete", "cell_id": "notes"})))
    assert not replaced.is_error and not deleted.is_error, (replaced.text, deleted.text)
    assert "checkpoint" in replaced.text and replaced.meta["notebookEdit"]["view"] == "file"
    saved = json.loads((jp_root_dir / "work.ipynb").read_text(encoding="utf-8"))
    assert [(c["id"], source_text(c["source"])) for c in saved["cells"]] == [("load", "x = 'agent'"),
                                                                             ("plot", "print(x)")]
    assert api.get("api", "contents", "work.ipynb", "checkpoints")

    contents = jp_serverapp.contents_manager
    original = contents.create_checkpoint

    async def racing(path: str) -> Any:  # a person's save lands between the agent's read and its write
        checkpoint = await original(path)
        (jp_root_dir / "work.ipynb").write_text(json.dumps({**saved, "cells": saved["cells"][:1]}), encoding="utf-8")
        return checkpoint

    contents.create_checkpoint = racing
    try:
        raced = off_the_loop(lambda: editor.apply(editor.parse({"action": "delete", "cell_id": "plot"})))
    finally:
        del contents.create_checkpoint
    assert raced.is_error and "saved by someone else" in raced.text and "not written" in raced.text
    kept = json.loads((jp_root_dir / "work.ipynb").read_text(encoding="utf-8"))
    assert [c["id"] for c in kept["cells"]] == ["load"], "the person's save is what the file holds"
    del sessions.list_sessions


# -- VS Code: the saved file, or a plain refusal -------------------------------------------------------
def test_in_vscode_replace_and_delete_edit_the_saved_file_and_refuse_plainly_while_it_is_unsaved(
        tmp_path: Path) -> None:
    import os
    import time

    file = tmp_path / "analysis.ipynb"
    _write(file, _cells())
    saved_at = file.stat().st_mtime
    ran: list[tuple[str, float]] = [("x = 1", saved_at - 5)]  # ran before the save: in the file
    record = SimpleNamespace(shell=SimpleNamespace(user_ns={"__vsc_ipynb_file__": str(file)}),
                             executions=lambda: list(ran))
    host = SimpleNamespace(kernel_record=record, live_source=None, main_thread_calls=None)
    workspace = Workspace(host)  # type: ignore[arg-type]
    for name in ("JUPYTER_DSH_SERVER_URL", "JUPYTER_DSH_SERVER_KEY"):
        os.environ.pop(name, None)

    editor = NotebookEditTool(workspace)
    assert workspace.document().view == "file"
    done = editor.apply(editor.parse({"action": "replace", "cell_id": "plot", "tags": ["parameters"]}))
    assert not done.is_error, done.text
    gone = editor.apply(editor.parse({"action": "delete", "cell_id": "notes"}))
    assert not gone.is_error, gone.text
    cells = json.loads(file.read_text(encoding="utf-8"))["cells"]
    assert [c["id"] for c in cells] == ["load", "plot"] and cells[1]["metadata"]["tags"] == ["parameters"]

    ran.append(("x = 'typed in VS Code, not saved'", time.time() + 5))  # VS Code holds a change the file lacks
    assert workspace.document() is record, "with unsaved changes the kernel's record answers"
    with pytest.raises(NotebookError, match=r"VS Code has changes to analysis\.ipynb that are not saved.*Ctrl\+S"):
        VSCodeFile(file, record.executions).apply(Edit("delete", "plot"))
    with pytest.raises(NotebookError, match=r"in VS Code once the notebook is saved"):
        KernelRecord(SimpleNamespace()).apply(Edit("delete", "plot"))
    assert [c["id"] for c in json.loads(file.read_text(encoding="utf-8"))["cells"]] == ["load", "plot"]


def test_the_kernel_and_the_server_agree_on_the_way_back() -> None:
    from dsh_jupyter.server import shared_notebook
    from dsh_jupyter.workspace import server_document

    assert (server_document.URL_VARIABLE, server_document.KEY_VARIABLE, server_document.KEY_HEADER) == (
        shared_notebook.URL_VARIABLE, shared_notebook.KEY_VARIABLE, shared_notebook.KEY_HEADER)


def test_the_mcp_read_of_a_notebook_no_kernel_runs_comes_from_the_saved_file(api: Api, jp_root_dir: Path,
                                                                              jp_serverapp: Any) -> None:
    from dsh_jupyter.server.mcp_workspace import NotebookBridge, NotebookCallError

    _write(jp_root_dir / "closed.ipynb", _cells())
    bridge = NotebookBridge(jp_serverapp.web_app.settings, str(jp_root_dir))
    ok, text = api.run(bridge.call("closed.ipynb", "notebook_read", {"cell_ids": ["plot"]}))
    assert ok and text.startswith("Notebook: the saved file of closed.ipynb") and "print(x)" in text, text
    ok, text = api.run(bridge.call("missing.ipynb", "notebook_read", {}))
    assert not ok and "cannot read the notebook file missing.ipynb" in text
    with pytest.raises(NotebookCallError, match=r"no kernel runs closed\.ipynb"):  # edits still need the person
        api.run(bridge.call("closed.ipynb", "notebook_edit", {"action": "delete", "cell_id": "plot"}))
