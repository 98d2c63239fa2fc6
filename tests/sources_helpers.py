"""The read-only sources' tests: the real-format transcripts of other tools kept in ``tests/fixtures/peers``."""

from __future__ import annotations

import shutil
from pathlib import Path

from dsh_jupyter.references.projection import project_surface
from dsh_jupyter.sources import ForeignSessions

#: Claude Code's (``claude/``) and Codex's (``codex/``) folders as the tools write them.
PEERS = Path(__file__).parent / "fixtures" / "peers"


def copied_peer(tool: str, tmp_path: Path) -> Path:
    """A copy of ``tool``'s fixture folder in ``tmp_path`` (tests may add, change and remove files in it)."""
    target = tmp_path / tool
    shutil.copytree(PEERS / tool, target)
    return target


def conversation(found: ForeignSessions, session_id: str) -> list[tuple[str, bool, str]]:
    """The projected conversation of a session: (role, whether a checkpoint, text) per message."""
    return [(m.role, m.checkpoint, m.text) for m in project_surface(found.read_surface(session_id)).messages]
