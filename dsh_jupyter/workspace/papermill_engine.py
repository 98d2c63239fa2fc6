"""A papermill engine whose runs tell the kernel each cell's own id: ``papermill --engine dsh in.ipynb out.ipynb``.

papermill's default engine (``nbclient``) runs a notebook through its ``PapermillNotebookClient``, which sends no
cell ids, so the kernel's record names the cells ``exec-N``. This engine runs the same client with
:func:`~.cell_ids.send_cell_ids`, so the agent's notebook tools address the cells by the ids the file holds
(papermill's injected parameters cell by the id papermill gives it). It is registered as papermill's
``papermill.engine`` entry point ``dsh``; papermill is not a dependency of ours, and only papermill loads this
module.

papermill's engine builds its client by the name its module holds, so a run swaps that name for the client
that sends ids, under a lock: runs in several threads of one process take turns.
"""

from __future__ import annotations

import threading
from typing import Any

from papermill import engines

from .cell_ids import send_cell_ids

_SWAP = threading.Lock()


def _client_sending_ids(base: type) -> type:
    """``base`` (papermill's notebook client) made to send each cell's id."""

    class CellIdClient(base):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            send_cell_ids(self)

    CellIdClient.__name__ = CellIdClient.__qualname__ = f"CellId{base.__name__}"
    return CellIdClient


class DshEngine(engines.NBClientEngine):  # type: ignore[misc]
    """papermill's nbclient engine, whose client tells the kernel each cell's id."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
        with _SWAP:
            base = engines.PapermillNotebookClient
            engines.PapermillNotebookClient = _client_sending_ids(base)
            try:
                return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
            finally:
                engines.PapermillNotebookClient = base
