"""Cell references: ``@[cell](dsh-cell:load-sales)`` mentions of one notebook cell, by its id.

The core knows nothing about notebooks or selections. A host that has cells adapts its own syntax (``@cell``:
the cell selected in the page; ``@cell:<id>``) into these canonical mentions and hands
:meth:`SessionReferenceResolver.prepare` a :class:`CellSnapshots` source, exactly as it does for variables
(:mod:`.variables`): one bounded text per mentioned cell, frozen into the same untrusted context message under
the same per-source budget. An id the source does not have is an error that names it, and nothing is written.

The URI is ``dsh-cell:`` followed by the cell's id, which must be an nbformat cell id (1 to 64 of ``A-Z a-z 0-9
- _``), so it never needs escaping and always ends at the mention's closing parenthesis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from .._json import dumps
from .errors import SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError
from .host_values import distinct_mentions

#: The URI scheme of a cell reference, colon included.
CELL_REFERENCE_SCHEME = "dsh-cell:"
#: Most distinct cells one message may mention.
MAX_CELL_REFERENCES = 4
#: An nbformat 4.5 cell id.
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class CellReferenceInput:
    """One mentioned cell: its id and the label the user saw (``cell`` for ``@cell``)."""

    cell_id: str
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"cell": self.cell_id}
        if self.label is not None:
            record["label"] = self.label
        return record


@dataclass(frozen=True)
class CellSnapshot:
    """What a host says about one cell: ``cell_type`` (``code``), ``brief`` (``code cell [3] · 2 outputs``, for
    people) and ``text`` (id, type, source and a summary of its outputs, already within the budget it was given)."""

    cell_id: str
    cell_type: str
    brief: str
    text: str


class CellSnapshots(Protocol):
    """A host's notebook cells, as bounded snapshots."""

    def snapshot(self, cell_id: str, max_chars: int) -> CellSnapshot | None:
        """The text of cell ``cell_id`` in at most ``max_chars`` characters, or ``None`` when there is no such cell."""
        ...


class HostCells(CellSnapshots, Protocol):
    """A host's cells together with its own syntax for them: :meth:`adapt` rewrites what the person typed
    (``@cell``) into canonical ``dsh-cell:`` mentions before the core parses the prompt."""

    def adapt(self, text: str) -> str:
        """``text`` with the host's cell syntax written as mentions; raises ``SessionReferenceError`` (nothing sent)."""
        ...


def is_cell_id(text: str) -> bool:
    return isinstance(text, str) and CELL_ID.fullmatch(text) is not None


def encode_cell_uri(cell_id: str) -> str:
    """``dsh-cell:id``; the id must be an nbformat cell id."""
    if not is_cell_id(cell_id):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"{dumps(cell_id) if isinstance(cell_id, str) else repr(cell_id)} is not a cell id; a cell id is 1 to 64 "
            "letters, digits, '-' or '_' (notebook_read shows them)",
        )
    return CELL_REFERENCE_SCHEME + cell_id


def decode_cell_uri(uri: str) -> str:
    """The cell id of a ``dsh-cell:`` URI; anything else raises ``SESSION_REFERENCE_INVALID_REFERENCE``."""
    cell_id = uri[len(CELL_REFERENCE_SCHEME):] if uri.startswith(CELL_REFERENCE_SCHEME) else ""
    if not is_cell_id(cell_id):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"{dumps(uri)} does not name a cell; write a cell mention as @cell:<id> (ids are letters, digits, "
            "'-' and '_')",
            details={"uri": uri, "cell": cell_id},
        )
    return cell_id


def missing_cell_error(reference: CellReferenceInput) -> SessionReferenceError:
    """The error of a mention whose cell is not in the notebook (any more)."""
    return SessionReferenceError(
        SESSION_REFERENCE_INVALID_REFERENCE,
        f"there is no cell {reference.cell_id} in the notebook (it was deleted, or the id is mistyped); "
        f"mention a cell that exists (@cell is the selected one), or remove @{reference.label or reference.cell_id}",
        details={"cell": reference.cell_id, "label": reference.label},
    )


def normalise_cells(references: list[CellReferenceInput]) -> list[CellReferenceInput]:
    """De-duplicated (first label wins) and capped at :data:`MAX_CELL_REFERENCES`."""
    return distinct_mentions(references, lambda r: r.cell_id, MAX_CELL_REFERENCES, "cell")
