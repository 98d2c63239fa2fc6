"""The main job's runner (dsh_jupyter/demo.py): the kernel it starts for a notebook."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import nbformat
import pytest
from kernel_helpers import KernelRunner, stream_text
from process_helpers import gone

PROBE = """\
import json, os
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
print(json.dumps({"transport": app.transport, "ip": app.ip, "cwd": os.getcwd(), "pid": os.getpid()}))
"""


@pytest.mark.skipif(os.name != "posix", reason="Unix sockets are a POSIX transport")
def test_a_demo_kernel_listens_on_unix_sockets_in_a_folder_removed_after_the_run(
        kernel_runner: KernelRunner, tmp_path: Path) -> None:
    """No TCP port to lose to another process between its choice and the kernel's bind (the kernel would die at
    start), nothing listening on the network; the kernel runs in the notebook's working folder and is stopped,
    and its sockets' folder gone, once the run ends."""
    source = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)]), source)
    work = tmp_path / "work"
    nb = kernel_runner.run_demo(source, work)
    seen = json.loads(stream_text(nb.cells[0].outputs))
    assert seen["transport"] == "ipc"
    assert Path(seen["ip"]).is_absolute() and Path(seen["ip"]).name == "kernel"
    assert len(seen["ip"]) < 90  # a socket's path holds at most 107 bytes, and the kernel adds "-N"
    assert not Path(seen["ip"]).parent.exists()
    assert seen["cwd"] == os.path.realpath(work)
    assert asyncio.run(gone(int(seen["pid"]), 10.0)), "the kernel is stopped once the run ends"
    assert (work / "probe.ipynb").is_file()
