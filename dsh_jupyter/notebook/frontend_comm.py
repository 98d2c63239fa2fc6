"""What the browser front end may ask the kernel: its current session (to leave it out of the ``@`` popup).

The JupyterLab extension opens a comm to :data:`CURRENT_SESSION_TARGET`; the kernel answers once with
``{"sessionId": id or None}`` and closes it. Nothing here imports ipykernel: the comm manager comes from
the running kernel, and outside a kernel (terminal IPython) nothing is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

CURRENT_SESSION_TARGET = "dsh.current-session"


class _HasAgent(Protocol):
    @property
    def agent(self) -> Any: ...


def install_current_session_comm(shell: Any, host: Callable[[], _HasAgent]) -> Callable[[], None]:
    """Register the comm target on ``shell``'s kernel; returns a function that removes it."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None or not hasattr(manager, "register_target"):
        return lambda: None

    def opened(comm: Any, _message: Any) -> None:
        agent = host().agent
        comm.send({"sessionId": agent.id if agent is not None else None})
        comm.close()

    manager.register_target(CURRENT_SESSION_TARGET, opened)

    def remove() -> None:
        targets = getattr(manager, "targets", None)
        if isinstance(targets, dict) and targets.get(CURRENT_SESSION_TARGET) is opened:
            del targets[CURRENT_SESSION_TARGET]

    return remove
