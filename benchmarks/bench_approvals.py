"""How fast an approval answer reaches a kernel whose main thread is blocked by a running cell.

    .venv/bin/python benchmarks/bench_approvals.py

A real ipykernel runs a cell that blocks (as a foreground ``%%dsh`` cell does while a question waits) on an
:class:`~dsh_jupyter.ui.approval_widget.ApprovalWidget` routed to the kernel's answer subshell. A
second client plays the frontend and sends the view's ``answer`` comm message; the cell records when the
widget's handler saw it (both sides read the same monotonic clock). Also reported: the one-time cost of
creating the subshell. Goal: an answer is handled within 50 ms (median) while the cell blocks.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._summary import goal  # noqa: E402

ANSWERS = 20

CELL = r"""
import json, threading, time
from dsh_jupyter.notebook.approval import answer_subshell, pin_replies
from dsh_jupyter.ui.approval_widget import ApprovalWidget

started = time.monotonic()
subshell = answer_subshell(get_ipython().kernel)
created = time.monotonic() - started
widget = ApprovalWidget()
pin_replies(widget.comm, subshell)
widget.question = {"callId": "bench"}
widget.state = "asking"
seen = []
for i in range(%(answers)d):
    got = threading.Event()
    widget.listen(lambda: None, lambda answer, got=got: (seen.append(time.monotonic()), got.set()))
    print("READY", json.dumps({"comm": widget.comm.comm_id, "i": i, "subshell": created}), flush=True)
    if not got.wait(10):  # the main thread blocks here, like a foreground %%dsh cell
        break
print("SEEN", json.dumps(seen), flush=True)
"""


def main() -> int:
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        client.execute(CELL % {"answers": ANSWERS})
        sent: list[float] = []
        seen: list[float] = []
        created = 0.0
        buffer = ""
        while not seen:
            message = client.get_iopub_msg(timeout=60)
            if message["msg_type"] == "error":
                raise RuntimeError("\n".join(message["content"]["traceback"]))
            if message["msg_type"] != "stream":
                continue
            buffer += message["content"]["text"]
            while "\n" in buffer:
                line, buffer = buffer.split("\n", 1)
                if line.startswith("READY "):
                    ready = json.loads(line[6:])
                    created = ready["subshell"]
                    answer = client.session.msg("comm_msg", {"comm_id": ready["comm"], "data": {
                        "method": "custom", "content": {"kind": "answer", "choice": "once", "callId": "bench"}}})
                    sent.append(time.monotonic())
                    client.shell_channel.send(answer)
                elif line.startswith("SEEN "):
                    seen = json.loads(line[5:])
        latencies = [(s - t) * 1000 for t, s in zip(sent, seen, strict=False)]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    if len(latencies) < ANSWERS:
        print(f"only {len(latencies)} of {ANSWERS} answers arrived", file=sys.stderr)
        return 1
    median = statistics.median(latencies)
    print(f"answer subshell created in {created * 1000:.1f} ms (once per kernel)")
    ok = goal("bench_approvals", "answer handled while the cell blocks, median", f"{median:.1f} ms", "<= 50 ms",
              f"max {max(latencies):.1f} ms over {len(latencies)}; subshell created in {created * 1000:.1f} ms",
              median <= 50)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
