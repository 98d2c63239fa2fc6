"""Which project MCP files the person has trusted, each as it was when trusted.

A project file (``.mcp.json`` beside the notebook) comes with the folder: a cloned repository or a
downloaded archive can hold one, and its servers are commands the kernel would run and URLs it would send
tokens to. So its servers start only once the person has read the file and said so (``%dsh mcp --trust``),
and only while the file stays byte for byte what they trusted: any change asks again. The user's own file
and ``DshMagics.mcp_servers`` are the person's own words and need no trust.

The trusted files live in ``$DSH_HOME/mcp-trusted.json`` (``{"version": 1, "files": {PATH: SHA256}}``),
by the file's real path, written whole (:func:`~dsh_jupyter.atomic.write_atomic`) and private to the user.
A missing or unreadable record trusts nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..atomic import write_atomic

#: The record's name in the harness home.
TRUST_FILE = "mcp-trusted.json"
_VERSION = 1


def digest(data: bytes) -> str:
    """The fingerprint a trusted file is kept by."""
    return hashlib.sha256(data).hexdigest()


def _key(path: Path) -> str:
    return os.path.realpath(path)


class ProjectTrust:
    """The trust record in ``path`` (``$DSH_HOME/mcp-trusted.json``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _files(self) -> dict[str, str]:
        try:
            document = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        files = document.get("files") if isinstance(document, dict) and document.get("version") == _VERSION else None
        if not isinstance(files, dict):
            return {}
        return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}

    def trusts(self, project_file: Path, fingerprint: str) -> bool:
        """Whether ``project_file``, with these contents, was trusted."""
        return self._files().get(_key(project_file)) == fingerprint

    def trust(self, project_file: Path, fingerprint: str) -> None:
        """Trust ``project_file`` as it is now (``fingerprint`` of the bytes the person was shown)."""
        files = self._files()
        files[_key(project_file)] = fingerprint
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps({"version": _VERSION, "files": files}, indent=1).encode())

    def forget(self, project_file: Path) -> bool:
        """Stop trusting ``project_file``; whether it was trusted."""
        files = self._files()
        if files.pop(_key(project_file), None) is None:
            return False
        write_atomic(self.path, json.dumps({"version": _VERSION, "files": files}, indent=1).encode())
        return True
