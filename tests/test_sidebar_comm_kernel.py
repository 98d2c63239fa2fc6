"""The sidebar's comm on a real kernel with subshells: a request is answered whichever thread sent last.

ipykernel routes a frontend's comm message to the subshell the comm last sent from. A broadcast made on a
subshell that is deleted afterwards would then send the sidebar's next request to a subshell that no longer
exists, and the browser would wait for an answer forever (seen as an ``@`` popup that never opened after an
approval). The sidebar pins its comm to the main shell; this test makes that broadcast and then asks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import kernel_environment

from dsh_jupyter.demo import private_kernel
from dsh_jupyter.notebook.sidebar_comm import SIDEBAR_TARGET

ANSWER_WITHIN = 20.0


@pytest.fixture
def kernel_client(tmp_path: Path) -> Iterator[Any]:
    """A client of a fresh ``python3`` kernel in ``tmp_path`` (the ``kernel`` tier, as ``kernel_runner``), on Unix
    sockets (:func:`dsh_jupyter.demo.private_kernel`)."""
    with private_kernel("python3") as manager:
        manager.start_kernel(cwd=str(tmp_path), env=kernel_environment())
        kernel_client = manager.client()
        kernel_client.start_channels()
        try:
            kernel_client.wait_for_ready(timeout=60)
            yield kernel_client
        finally:
            kernel_client.stop_channels()  # private_kernel shuts the kernel down on exit


def control(client: Any, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    message = client.session.msg(msg_type, content)
    client.control_channel.send(message)
    deadline = time.monotonic() + ANSWER_WITHIN
    while True:
        reply = client.control_channel.get_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == message["header"]["msg_id"]:
            return dict(reply["content"])


def execute(client: Any, code: str, subshell_id: str | None = None) -> dict[str, Any]:
    message = client.session.msg("execute_request", {"code": code, "silent": False, "store_history": False,
                                                     "user_expressions": {}, "allow_stdin": False})
    if subshell_id is not None:
        message["header"]["subshell_id"] = subshell_id
    client.shell_channel.send(message)
    deadline = time.monotonic() + ANSWER_WITHIN
    while True:
        reply = client.shell_channel.get_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == message["header"]["msg_id"]:
            content = dict(reply["content"])
            assert content["status"] == "ok", content
            return content


def comm_answer(client: Any, comm_id: str, request: int) -> dict[str, Any] | None:
    """The sidebar's answer to ``request`` on iopub, or ``None`` when none came in time."""
    deadline = time.monotonic() + ANSWER_WITHIN
    while time.monotonic() < deadline:
        try:
            message = client.iopub_channel.get_msg(timeout=0.5)
        except Exception:  # queue.Empty: nothing yet
            continue
        content = message["content"]
        if message["header"]["msg_type"] == "comm_msg" and content.get("comm_id") == comm_id:
            data = content.get("data", {})
            if data.get("request") == request:
                return dict(data)
    return None


def test_a_request_after_a_broadcast_from_a_deleted_subshell_is_answered(kernel_client: Any) -> None:
    client = kernel_client
    execute(client, "%load_ext dsh_jupyter\ndata_frame_like = [1, 2, 3]")
    comm_id = uuid.uuid4().hex
    client.shell_channel.send(client.session.msg("comm_open", {
        "comm_id": comm_id, "target_name": SIDEBAR_TARGET, "data": {"kind": "bind", "request": 0}}))
    bound = comm_answer(client, comm_id, 0)
    assert bound is not None and bound["kind"] == "state"

    created = control(client, "create_subshell_request", {})
    assert created.get("status") == "ok", f"this ipykernel has no subshells: {created}"
    subshell = created["subshell_id"]
    execute(client, f"get_ipython().kernel.comm_manager.targets[{SIDEBAR_TARGET!r}].__self__.broadcast()",
            subshell_id=subshell)
    assert control(client, "delete_subshell_request", {"subshell_id": subshell}).get("status") == "ok"

    client.shell_channel.send(client.session.msg("comm_msg", {
        "comm_id": comm_id, "data": {"kind": "variables", "query": "data", "request": 1}}))
    answer = comm_answer(client, comm_id, 1)
    assert answer is not None, "the sidebar's request after the broadcast was never answered"
    assert answer["kind"] == "variables"
    assert any(row.get("name") == "data_frame_like" for row in answer["variables"]), answer
