"""Whether a file is still the bytes last seen: :class:`FileIdentity`, what ``stat`` says of it.

The catalog's fold cache (:mod:`dsh_jupyter.catalog.folds`) keeps a log's fold while its identity holds, and
the reference service (:mod:`dsh_jupyter.references.reuse`) names a saved spill file again while it is exactly
as written; both use this one rule, so it lives below them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class FileIdentity:
    """What ``fstat`` says about a file; any difference means "not the same bytes as last time"."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, result: os.stat_result) -> FileIdentity:
        return cls(int(result.st_dev), int(result.st_ino), int(result.st_size), int(result.st_mtime_ns),
                   int(result.st_ctime_ns))

    def same_file(self, other: FileIdentity) -> bool:
        return self.dev == other.dev and self.ino == other.ino
