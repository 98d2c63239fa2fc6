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


def install_answering_target(shell: Any, target: str,
                             answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[], None]:
    """Register ``target`` on ``shell``'s kernel: a comm opened to it gets one message, ``answer(data)`` of
    the opening message's data, and is closed. Returns a function that removes the target again (nothing
    is registered outside a kernel)."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None or not hasattr(manager, "register_target"):
        return lambda: None

    def opened(comm: Any, message: Any) -> None:
        content = message.get("content") if isinstance(message, dict) else None
        data = content.get("data") if isinstance(content, dict) else None
        comm.send(answer(data if isinstance(data, dict) else {}))
        comm.close()

    manager.register_target(target, opened)

    def remove() -> None:
        targets = getattr(manager, "targets", None)
        if isinstance(targets, dict) and targets.get(target) is opened:
            del targets[target]

    return remove


def install_current_session_comm(shell: Any, host: Callable[[], _HasAgent]) -> Callable[[], None]:
    """Register :data:`CURRENT_SESSION_TARGET`; returns a function that removes it."""

    def answer(_data: dict[str, Any]) -> dict[str, Any]:
        agent = host().agent
        return {"sessionId": agent.id if agent is not None else None}

    return install_answering_target(shell, CURRENT_SESSION_TARGET, answer)
