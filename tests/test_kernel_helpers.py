"""The kernel runner (tests/kernel_helpers.py): the kernel it starts."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from kernel_helpers import KernelRunner, stream_text
from process_helpers import gone

PROBE = """\
import json, os
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
print(json.dumps({"transport": app.transport, "ip": app.ip, "cwd": os.getcwd(), "extra": os.environ.get("DSH_PROBE")}))
"""


def test_the_kernel_listens_on_unix_sockets_and_runs_where_and_with_what_it_was_given(
        kernel_runner: KernelRunner, tmp_path: Path) -> None:
    """Unix sockets, not TCP ports that another process can take between their choice and the kernel's bind (a
    kernel that dies before ``kernel_info``); the kernel is stopped and its sockets' folder gone once the run ends."""
    nb = kernel_runner.run([PROBE, "print(os.getpid())"], tmp_path, env={"DSH_PROBE": "yes"})
    seen = json.loads(stream_text(nb.cells[0].outputs))
    pid = int(stream_text(nb.cells[1].outputs))
    assert asyncio.run(gone(pid, 10.0)), "the kernel is stopped once the run ends"
    assert seen["transport"] == "ipc"
    assert Path(seen["ip"]).is_absolute() and Path(seen["ip"]).name == "kernel"
    assert not Path(seen["ip"]).parent.exists()
    assert seen["cwd"] == os.path.realpath(tmp_path)
    assert seen["extra"] == "yes"
