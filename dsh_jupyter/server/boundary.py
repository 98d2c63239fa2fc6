"""Which folders the server serves: its root (``ServerApp.root_dir``) and the administrator's extra roots.

A session store is served only when its symlink-resolved path lies at or below one of those folders, and a
session only when its symlink-resolved log does too: a session folder (or log) under the root that is a
link to somewhere else is refused. The same rule filters what the session catalog returns, since the
catalog knows every store the user ever used, wherever it is.

Everything here takes the paths and the :class:`Boundary` as arguments and does no I/O beyond resolving
links, so any front end (the REST handlers today, a shared services module later) can apply it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import outside_root

#: What an error message says instead of a path that lies outside the server root.
OUTSIDE_LABEL = "a folder outside the server root"


def resolved(path: str | os.PathLike[str]) -> Path:
    """``path`` absolute, with ``~`` expanded and every symlink resolved (it need not exist)."""
    return Path(os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path)))))


def is_within(path: Path, folder: Path) -> bool:
    """Whether the (already resolved) ``path`` is ``folder`` or lies below it."""
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Boundary:
    """The folders a server serves: ``root`` and ``extra`` (all absolute and symlink-resolved)."""

    root: Path
    extra: tuple[Path, ...] = ()

    @classmethod
    def of(cls, root_dir: str | os.PathLike[str], extra_roots: Iterable[str | os.PathLike[str]] = ()) -> Boundary:
        """The boundary of a server rooted at ``root_dir``; relative ``extra_roots`` are taken from the root."""
        root = resolved(root_dir)
        extra: list[Path] = []
        for folder in extra_roots:
            text = os.path.expanduser(os.fspath(folder))
            if not str(text).strip():
                continue
            path = resolved(root / text)
            if path != root and path not in extra:
                extra.append(path)
        return cls(root, tuple(extra))

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.root, *self.extra)

    def allows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path``, with its links resolved, lies at or below a served folder."""
        target = resolved(path)
        return any(is_within(target, folder) for folder in self.roots)

    def shown(self, path: str | os.PathLike[str]) -> str:
        """How a message names ``path``: quoted and relative to the root (``the server root`` for the root
        itself), relative to an extra root it lies in, or :data:`OUTSIDE_LABEL`; never an absolute path."""
        target = resolved(path)
        if target == self.root:
            return "the server root"
        if is_within(target, self.root):
            return repr(target.relative_to(self.root).as_posix())
        for number, folder in enumerate(self.extra, 1):
            if is_within(target, folder):
                inner = target.relative_to(folder).as_posix()
                return f"extra root {number}" + ("" if inner == "." else f" ({inner!r})")
        return OUTSIDE_LABEL


# -- the checks a request makes ---------------------------------------------------------------------------
def require_store(store_root: str | os.PathLike[str], folder: Path, boundary: Boundary) -> None:
    """Refuse (403) the session store of the notebook folder ``folder`` when it lies outside the boundary."""
    if boundary.allows(store_root):
        return
    via = " (set by DSH_SESSIONS_DIR)" if os.environ.get("DSH_SESSIONS_DIR", "").strip() else ""
    raise outside_root(
        f"the session store of {boundary.shown(folder)}{via} lies outside the folders this server serves; "
        "an administrator can serve it by adding its folder to c.DshServer.extra_roots"
    )


def require_log(log_path: str | os.PathLike[str], session_id: str, boundary: Boundary) -> None:
    """Refuse (403) a session whose folder or log is a link leading outside the boundary."""
    if boundary.allows(log_path):
        return
    raise outside_root(
        f"session {session_id!r} is a link to a place outside the folders this server serves, so it is not "
        "served; copy the session into the store instead of linking it"
    )
