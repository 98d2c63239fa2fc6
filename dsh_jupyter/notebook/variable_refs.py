"""The notebook's variables as a source of reference snapshots (``@[df](dsh-variable:df)`` mentions).

The reference core asks a :class:`~dsh_jupyter.references.variables.VariableSnapshots` for each mentioned name
when a prompt is sent; this one reads the kernel's namespace and summarises with :mod:`.variables`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..references.variables import VariableSnapshot
from .variables import NamespaceShell, summarise

if TYPE_CHECKING:
    from ..references.variables import VariableSnapshots

log = logging.getLogger(__name__)

#: Characters of one variable's frozen summary (within the per-source byte budget, which may be smaller).
MAX_REFERENCE_CHARS = 6_000


class NamespaceVariables:
    """Snapshots of a shell's variables, taken when a prompt that mentions them is sent."""

    def __init__(self, shell: NamespaceShell) -> None:
        self.shell = shell

    def snapshot(self, name: str, max_chars: int) -> VariableSnapshot | None:
        namespace = self.shell.user_ns
        if name not in namespace:
            return None
        summary = summarise(name, namespace[name], min(max_chars, MAX_REFERENCE_CHARS))
        return VariableSnapshot(name, summary.type_name, summary.brief, summary.text)


def variable_source(shell: NamespaceShell | None) -> VariableSnapshots | None:
    """The source for ``shell`` (``None`` outside a kernel: mentions of variables are then refused)."""
    return NamespaceVariables(shell) if shell is not None and hasattr(shell, "user_ns") else None


# -- the browser's question: which variables can @ offer? -------------------------------------------------

#: The comm target the JupyterLab extension opens (labextension/src/variables.ts).
VARIABLES_TARGET = "dsh.variables"


class VariableLister(Protocol):
    def variable_candidates(self, query: str = "", limit: int = 50) -> list[dict[str, str]]: ...


def install_variables_comm(shell: Any, host: Callable[[], VariableLister]) -> Callable[[], None]:
    """Register the comm target on ``shell``'s kernel: a comm opened with ``{query, limit}`` is answered once
    with ``{"variables": [...]}`` (data frames first) and closed. Returns a function that removes it."""
    from .frontend_comm import install_answering_target

    def answer(data: dict[str, Any]) -> dict[str, Any]:
        asked = data.get("query")
        query = asked if isinstance(asked, str) else ""
        limit = data.get("limit")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit <= 200 else 50
        try:
            rows = host().variable_candidates(query, limit)
        except Exception:
            log.warning("dsh: listing variables for the @ popup failed", exc_info=True)
            rows = []
        return {"variables": rows}

    return install_answering_target(shell, VARIABLES_TARGET, answer)
