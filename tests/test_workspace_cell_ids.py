"""A headless nbclient run of a notebook whose cells have ids: the kernel hears each cell's own id
(:func:`~dsh_jupyter.workspace.cell_ids.send_cell_ids`, which the demo runner uses), and the agent's
notebook tools read and run those cells by those ids."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
from kernel_helpers import KernelRunner, stream_text

from dsh_jupyter.workspace.cell_ids import send_cell_ids

CHECK = """
from dsh_jupyter.workspace.notebook_tools import NotebookReadTool, NotebookRunTool
from dsh_jupyter.tools.base import ToolExecution
_ws = get_ipython().magics_manager.registry["DshMagics"].host.workspace
_read = await NotebookReadTool(_ws).run({"cell_ids": ["load-data"]}, ToolExecution.create("t", "."))
print("READ", _read.text)
_ran = await NotebookRunTool(_ws).run({"cell_id": "load-data"}, ToolExecution.create("t", "."))
print("RAN", _ran.is_error, _ran.text)
print("IDS", [c.id for c in _ws.document().read().cells])
"""


def test_an_nbclient_run_gives_the_tools_the_files_cell_ids(kernel_runner: KernelRunner, tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext dsh_jupyter", id="setup"),
        nbformat.v4.new_code_cell("data = [1, 2, 3]\nprint('total', sum(data))", id="load-data"),
        nbformat.v4.new_code_cell(CHECK, id="check"),
    ])
    source = tmp_path / "ids.ipynb"
    nbformat.write(notebook, source)
    ran = kernel_runner.run_demo(source, tmp_path / "out")
    text = stream_text(ran.cells[2].outputs)
    assert "READ Notebook: the kernel's record" in text and "id load-data" in text, text
    assert "RAN False Ran cell load-data." in text and "total 6" in text, text
    assert "IDS ['check', 'load-data']" in text, text  # execution order: load-data ran again last


def test_a_papermill_run_with_our_engine_gives_the_tools_the_files_cell_ids(kernel_runner: KernelRunner,
                                                                            tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext dsh_jupyter", id="setup"),
        nbformat.v4.new_code_cell("data = [1, 2]", id="params", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("print('total', sum(data))", id="load-data"),
        nbformat.v4.new_code_cell(CHECK, id="check"),
    ])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "ids.ipynb"
    nbformat.write(notebook, source)
    ran = kernel_runner.run_papermill(source, tmp_path / "out.ipynb", engine="dsh", parameters={"data": [1, 2, 3]})
    text = stream_text(ran.cells[-1].outputs)
    assert "READ Notebook: the kernel's record" in text and "id load-data" in text, text
    assert "RAN False Ran cell load-data." in text and "total 6" in text, text
    ids = text.split("IDS ", 1)[1].splitlines()[0]
    injected = next(cell.id for cell in ran.cells if "injected-parameters" in cell.metadata.get("tags", []))
    # Every cell under its own id (papermill's injected cell under the id papermill gave it), none as exec-N.
    assert "exec-" not in ids and "'setup'" not in ids and f"'{injected}'" in ids, ids
    assert ids.endswith("'check', 'load-data']"), ids


def test_send_cell_ids_tags_only_the_next_execute_request_and_keeps_the_clients_hook() -> None:
    sent: list[tuple[str, Any]] = []
    session = SimpleNamespace()
    session.msg = lambda msg_type, content=None, parent=None, header=None, metadata=None: sent.append(
        (msg_type, metadata))
    seen: list[int] = []
    client = SimpleNamespace(kc=SimpleNamespace(session=session),
                             on_cell_execute=lambda cell, cell_index: seen.append(cell_index))
    send_cell_ids(client)
    client.on_cell_execute(cell={"id": "abc"}, cell_index=4)
    session.msg("kernel_info_request", {})
    session.msg("execute_request", {"code": "1"})
    session.msg("execute_request", {"code": "2"})
    client.on_cell_execute(cell={}, cell_index=5)  # an nbformat 4.4 cell: no id
    session.msg("execute_request", {"code": "3"})
    assert sent == [("kernel_info_request", None), ("execute_request", {"cellId": "abc"}),
                    ("execute_request", None), ("execute_request", None)]
    assert seen == [4, 5]
