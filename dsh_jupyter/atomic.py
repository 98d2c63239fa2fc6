"""Replacing a small file whole: written beside it, flushed to disk, then renamed over it.

A reader sees the old file or the new one, never half of either, and a crash leaves at most a stray
``.NAME.*.tmp`` beside it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds exactly ``data`` once this returns (a new file gets ``mkstemp``'s private mode)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
