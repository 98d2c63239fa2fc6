"""Session artifacts: bytes a session keeps beside its log (a plot the python tool drew), by name.

Names are content-addressed and checked: ``artifacts/<sha256 hex>.<png|jpg>`` (:func:`artifact_name`), so
the same picture twice is one artifact and a name read back from a log can never point elsewhere
(:func:`check_name` refuses anything else). Where each backend keeps them:

- **JSONL**: files in the session's folder, ``<session folder>/artifacts/<sha256>.png``, written to a
  temporary file, fsynced and renamed into place (:func:`save_file` / :func:`load_file`).
- **SQLite**: a table ``dsh_artifacts (key, name, data)`` in the same database file, created when the
  first artifact is saved (older databases need no upgrade).
- **PostgreSQL**: the table ``dsh.artifacts`` of the session schema, under the same row-level security as
  the events (only the owner writes, whoever may read the session reads its artifacts). A database set up
  before the table existed keeps working: images are described instead of kept until ``dsh-jupyter
  postgres init`` runs again and adds it.

Saving is best effort for the caller: a store that cannot keep an artifact says why and the model gets a
text description instead; the turn goes on.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

from .safe_open import open_log, write_all

#: The folder (JSONL) or name prefix (databases) of every artifact.
ARTIFACTS_FOLDER = "artifacts"

#: Largest artifact any store keeps or reads back (prepared images are far smaller).
MAX_ARTIFACT_BYTES = 8 * 1024 * 1024

_NAME = re.compile(r"^artifacts/[0-9a-f]{64}\.(png|jpg)$")


class ArtifactError(ValueError):
    """An artifact name that is not one this package writes."""


def artifact_name(digest: str, extension: str) -> str:
    """``artifacts/<digest>.<extension>`` for a SHA-256 hex digest and ``png`` or ``jpg``."""
    return check_name(f"{ARTIFACTS_FOLDER}/{digest}.{extension}")


def check_name(name: str) -> str:
    """``name`` when it is a content-addressed artifact name, else :class:`ArtifactError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ArtifactError(f"{name!r} is not a session artifact name (artifacts/<sha256>.png or .jpg)")
    return name


# -- files in a session folder (JSONL) ------------------------------------------------------------------


def save_file(folder: Path, name: str, data: bytes) -> None:
    """Write ``data`` as ``folder/name`` durably; an artifact already there (same name, same bytes) is kept."""
    path = folder / check_name(name)
    for place in (folder, path.parent):
        if place.is_symlink():
            raise ArtifactError(f"{place} is a link; artifacts are never written through links")
    if path.is_file() and not path.is_symlink() and path.stat().st_size == len(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def load_file(folder: Path, name: str) -> bytes | None:
    """The bytes of ``folder/name``, or ``None`` when it is missing, not a regular file or too large."""
    path = folder / check_name(name)
    try:
        with open_log(path) as fh:
            data = fh.read(MAX_ARTIFACT_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_ARTIFACT_BYTES else None


# -- a table in the SQLite database -----------------------------------------------------------------------

SQLITE_TABLE = """
CREATE TABLE IF NOT EXISTS dsh_artifacts (
    key BLOB NOT NULL,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (key, name)
)
"""


def sqlite_save(conn: sqlite3.Connection, key: bytes, name: str, data: bytes) -> None:
    """Store one artifact of the session ``key`` (the table is created on first use)."""
    conn.execute(SQLITE_TABLE)
    conn.execute("INSERT OR IGNORE INTO dsh_artifacts (key, name, data) VALUES (?, ?, ?)",
                 (key, check_name(name), data))


def sqlite_load(conn: sqlite3.Connection, key: bytes, name: str) -> bytes | None:
    try:
        row = conn.execute("SELECT data FROM dsh_artifacts WHERE key = ? AND name = ?",
                           (key, check_name(name))).fetchone()
    except sqlite3.OperationalError:  # no artifact was ever saved in this database
        return None
    return bytes(row[0]) if row is not None else None


def sqlite_delete(conn: sqlite3.Connection, key: bytes) -> None:
    """Remove a session's artifacts (inside the caller's transaction)."""
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("DELETE FROM dsh_artifacts WHERE key = ?", (key,))


# -- a table in the PostgreSQL session schema ------------------------------------------------------------

#: Created by ``ensure_schema`` (:mod:`.postgres_schema`) with the policies below.
POSTGRES_TABLE = """
CREATE TABLE IF NOT EXISTS dsh.artifacts (
    key bytea NOT NULL REFERENCES dsh.sessions (key) ON DELETE CASCADE,
    name text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (key, name)
)
"""

#: Whoever may read a session reads its artifacts; only its owner adds or removes them.
POSTGRES_POLICIES = [
    ("dsh_artifacts_read", "SELECT", "USING (EXISTS (SELECT 1 FROM dsh.sessions s WHERE s.key = artifacts.key))"),
    ("dsh_artifacts_insert", "INSERT",
     "WITH CHECK (EXISTS (SELECT 1 FROM dsh.sessions s WHERE s.key = artifacts.key AND s.owner = current_user))"),
    ("dsh_artifacts_delete", "DELETE",
     "USING (EXISTS (SELECT 1 FROM dsh.sessions s WHERE s.key = artifacts.key AND s.owner = current_user))"),
]


def postgres_save(conn: Any, key: bytes, name: str, data: bytes) -> None:
    """Store one artifact of the session ``key`` (a psycopg connection in autocommit mode)."""
    conn.execute("INSERT INTO dsh.artifacts (key, name, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                 (key, check_name(name), data))


def postgres_load(conn: Any, key: bytes, name: str) -> bytes | None:
    row = conn.execute("SELECT data FROM dsh.artifacts WHERE key = %s AND name = %s",
                       (key, check_name(name))).fetchone()
    return bytes(row[0]) if row is not None else None


__all__ = [
    "ARTIFACTS_FOLDER",
    "MAX_ARTIFACT_BYTES",
    "POSTGRES_POLICIES",
    "POSTGRES_TABLE",
    "ArtifactError",
    "artifact_name",
    "check_name",
    "load_file",
    "postgres_load",
    "postgres_save",
    "save_file",
    "sqlite_delete",
    "sqlite_load",
    "sqlite_save",
]
