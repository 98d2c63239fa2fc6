"""The applier with jupyter-collaboration: when a room has the notebook open, edits go into its shared Y document
(what every collaborator sees) and reads come from it, not from the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from server_helpers import SERVER_CONFIG, Api, server_api

from dsh_jupyter.workspace.applier import source_text

pytest.importorskip("jupyter_server_ydoc", reason="needs the collab extra (jupyter-collaboration)")

api = server_api()


@pytest.fixture
def jp_server_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The extension and jupyter-collaboration's server side, its room store in the test's folder."""
    monkeypatch.chdir(tmp_path)  # the room store's database goes to the working folder
    extensions = {**SERVER_CONFIG["ServerApp"]["jpserver_extensions"], "jupyter_server_fileid": True,
                  "jupyter_server_ydoc": True}
    return {"ServerApp": {"jpserver_extensions": extensions},
            "BaseFileIdManager": {"db_path": str(tmp_path / "file_id_manager.db")}}


def _post(api: Api, body: dict[str, Any]) -> Any:
    response = api.run(api._fetch("dsh", "api", "notebook", method="POST", body=json.dumps(body)))
    return json.loads(response.body)


def test_an_open_room_takes_the_edit_and_the_file_waits_for_the_rooms_save(api: Api, jp_root_dir: Path,
                                                                            jp_serverapp: Any) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 1", id="first"),
                                               nbformat.v4.new_markdown_cell("text", id="words")])
    (jp_root_dir / "shared.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    assert _post(api, {"op": "read", "path": "shared.ipynb"})["view"] == "file", "no room yet: the file"

    ydoc_app = next(iter(jp_serverapp.extension_manager.extension_apps["jupyter_server_ydoc"]))
    room = api.run(ydoc_app.get_document(path="shared.ipynb", content_type="notebook", file_format="json",
                                         copy=False, create=True))
    assert room is not None
    done = _post(api, {"op": "apply", "path": "shared.ipynb", "edit": {
        "action": "insert", "cell_id": "first", "source": "b = 2", "cell_type": "code", "position": "after",
        "tags": ["parameters"]}})
    assert done["view"] == "room" and done["index"] == 1
    assert [room.get_cell(i)["source"] for i in range(room.cell_number)] == ["a = 1", "b = 2", "text"]
    assert room.get_cell(1)["metadata"]["tags"] == ["parameters"]
    _post(api, {"op": "apply", "path": "shared.ipynb", "edit": {"action": "replace", "cell_id": "first",
                                                                "source": "a = 10"}})
    read = _post(api, {"op": "read", "path": "shared.ipynb"})
    assert read["view"] == "room" and [source_text(c["source"]) for c in read["cells"]] == ["a = 10", "b = 2", "text"]
    _post(api, {"op": "apply", "path": "shared.ipynb", "edit": {"action": "delete", "cell_id": "words"}})
    assert room.cell_number == 2
