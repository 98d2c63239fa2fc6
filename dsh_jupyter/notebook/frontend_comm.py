"""What the browser front end may ask the kernel for the ``@`` popup: its current session (left out of the
list) and its variables (offered first).

The JupyterLab extension opens a comm to :data:`CURRENT_SESSION_TARGET` (answered once with ``{"sessionId":
id or None}``) or to :data:`VARIABLES_TARGET` (answered once with ``{"variables": [...]}``), and the kernel
closes it after answering. Nothing here imports ipykernel: the comm manager comes from
the running kernel, and outside a kernel (terminal IPython) nothing is registered.

The answers are :class:`~typing.TypedDict` shapes whose fields match the labextension's
(``IVariableCandidate`` in ``labextension/src/variables.ts``; ``tests/test_server_wire.py`` compares them).
The opening message's data stays ``dict[str, Any]``: it is whatever the page sent, checked field by field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

if TYPE_CHECKING:
    from ..workspace.variables import VariableCandidate

CURRENT_SESSION_TARGET = "dsh.current-session"

log = logging.getLogger(__name__)


class CurrentSessionAnswer(TypedDict):
    """The answer on :data:`CURRENT_SESSION_TARGET` (``None``: no session yet)."""

    sessionId: str | None


class VariablesAnswer(TypedDict):
    """The answer on :data:`VARIABLES_TARGET`."""

    variables: list[VariableCandidate]


CommAnswer = CurrentSessionAnswer | VariablesAnswer


class _HasAgent(Protocol):
    @property
    def agent(self) -> Any: ...


def install_answering_target(shell: Any, target: str,
                             answer: Callable[[dict[str, Any]], CommAnswer]) -> Callable[[], None]:
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

    def answer(_data: dict[str, Any]) -> CurrentSessionAnswer:
        agent = host().agent
        return {"sessionId": agent.id if agent is not None else None}

    return install_answering_target(shell, CURRENT_SESSION_TARGET, answer)


# -- the browser's question: which variables can @ offer? -------------------------------------------------

#: The comm target the JupyterLab extension opens (labextension/src/variables.ts).
VARIABLES_TARGET = "dsh.variables"


class VariableLister(Protocol):
    def variable_candidates(self, query: str = "", limit: int = 50) -> list[VariableCandidate]: ...


def install_variables_comm(shell: Any, host: Callable[[], VariableLister]) -> Callable[[], None]:
    """Register the comm target on ``shell``'s kernel: a comm opened with ``{query, limit}`` is answered once
    with ``{"variables": [...]}`` (data frames first) and closed. Returns a function that removes it."""
    return install_answering_target(shell, VARIABLES_TARGET, lambda data: answer_variables(host(), data))


def answer_variables(lister: VariableLister, data: dict[str, Any]) -> VariablesAnswer:
    """The answer to a ``{query, limit}`` request: ``{"variables": [...]}`` (data frames first; odd values get
    the defaults, a failing listing answers with none). The chat sidebar asks the same over its own comm."""
    asked = data.get("query")
    query = asked if isinstance(asked, str) else ""
    limit = data.get("limit")
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit <= 200 else 50
    try:
        rows = lister.variable_candidates(query, limit)
    except Exception:
        log.warning("dsh: listing variables for the @ popup failed", exc_info=True)
        rows = []
    return {"variables": rows}
