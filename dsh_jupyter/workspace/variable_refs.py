"""The notebook's variables as a source of reference snapshots (``@[df](dsh-variable:df)`` mentions).

The reference core asks a :class:`~dsh_jupyter.references.variables.VariableSnapshots` for each mentioned name
when a prompt is sent; this one reads the kernel's namespace and summarises with :mod:`.variables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..references.variables import VariableSnapshot
from .variables import NamespaceShell, summarise

if TYPE_CHECKING:
    from ..references.variables import VariableSnapshots

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
