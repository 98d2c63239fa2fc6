"""Headless runs (nbclient, and what is built on it) that tell the kernel each cell's own id.

JupyterLab and Notebook 7 send a cell's nbformat id with each ``execute_request`` (``metadata.cellId``), and the
kernel's record (:mod:`.kernel_record`) keeps cells under it, so the agent's tools address them by the ids the file
holds. nbclient sends none, so the record falls back to ``exec-N``. :func:`send_cell_ids` makes a
``NotebookClient`` send them::

    from nbclient import NotebookClient
    from dsh_jupyter.workspace.cell_ids import send_cell_ids

    send_cell_ids(NotebookClient(nb, kernel_name="python3")).execute()

It chains the client's own ``on_cell_execute`` hook; the demo runner (:func:`dsh_jupyter.demo.run_notebook`)
uses it. Cells without an id (nbformat 4.4 and older) are sent without one, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The attribute of a kernel client's session holding the id of the cell about to be sent.
_PENDING = "_dsh_next_cell_id"


def _tag_session(session: Any) -> None:
    """Wrap ``session.msg`` (once) so the next ``execute_request`` carries the pending cell id."""
    if getattr(session, _PENDING, False) is not False:
        return
    original: Callable[..., Any] = session.msg
    setattr(session, _PENDING, None)

    def msg(msg_type: str, content: Any = None, parent: Any = None, header: Any = None,
            metadata: Any = None) -> Any:
        cell_id = getattr(session, _PENDING, None)
        if msg_type == "execute_request" and isinstance(cell_id, str) and cell_id:
            setattr(session, _PENDING, None)
            metadata = {**(metadata or {}), "cellId": cell_id}
        return original(msg_type, content, parent=parent, header=header, metadata=metadata)

    session.msg = msg


def send_cell_ids(client: Any) -> Any:
    """Make nbclient ``client`` send each cell's id with its execution; returns ``client``."""
    previous = client.on_cell_execute

    def on_cell_execute(cell: Any, cell_index: int) -> Any:
        kc = getattr(client, "kc", None)
        session = getattr(kc, "session", None)
        if session is not None:
            _tag_session(session)
            cell_id = cell.get("id") if hasattr(cell, "get") else None
            setattr(session, _PENDING, cell_id if isinstance(cell_id, str) else None)
        return previous(cell=cell, cell_index=cell_index) if previous is not None else None

    client.on_cell_execute = on_cell_execute
    return client
