"""Watching a child process the code under test should stop: its pid from a file, and whether it is gone."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which still answers signal 0, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The state follows the command name in brackets, which may hold spaces and brackets itself.
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


async def gone(pid: int, seconds: float = 5.0) -> bool:
    """Whether ``pid`` is gone within ``seconds``."""
    for _ in range(max(1, int(seconds / 0.1))):
        if not alive(pid):
            return True
        await asyncio.sleep(0.1)
    return False


async def written_pid(pidfile: Path, seconds: float = 5.0) -> None:
    """Return once a child wrote its pid into ``pidfile`` (or ``seconds`` passed: the caller's read then fails)."""
    for _ in range(max(1, int(seconds / 0.05))):
        if pidfile.exists() and pidfile.read_text().strip():
            return
        await asyncio.sleep(0.05)
