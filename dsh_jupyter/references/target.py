"""Who is asking: the session a prepared reference context is for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..session import SessionHeader
    from ..store.base import SessionStore


@dataclass(frozen=True)
class ReferenceTarget:
    """The target session of a reference operation.

    ``session_id`` is excluded from candidates and may not be referenced (``None``: no session is asking
    yet, as in a fresh notebook, the browser or the command line); ``cwd`` drives candidate
    ranking; ``session_dir`` is where truncated sources' full transcripts are saved (``None`` when the
    backend has no per-session folder, e.g. SQLite); ``context_window`` is the model's context window in
    tokens, used for the automatic per-source budget (``None`` when the model's metadata has none).
    """

    session_id: str | None
    cwd: str | None
    session_dir: Path | None = None
    context_window: int | None = None

    @classmethod
    def from_header(
        cls, header: SessionHeader, store: SessionStore | None = None, *, context_window: int | None = None
    ) -> ReferenceTarget:
        """Build the target of a session from its header and (optionally) the store that keeps it."""
        session_dir = store.session_dir(header) if store is not None else None
        return cls(header.id, header.cwd, Path(session_dir) if session_dir is not None else None, context_window)
