"""One generated 1 GB chat-heavy session, shared by the benchmarks that need a huge session.

:func:`huge_session` writes it once under ``benchmarks/.data/`` (git-ignored) and reuses it while the
generator (:mod:`benchmarks._logs`) is unchanged. ``bench_huge_session.py`` times the CLI on it; the REST
benchmark can read the same store.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
SESSION_ID = "huge-chat-session"
CWD = "/home/bench/huge"


@dataclass(frozen=True)
class HugeSession:
    """Where the generated session is: its JSONL store ``root`` (a ``.dsh/sessions`` folder), id and log."""

    root: Path
    session_id: str
    path: Path
    messages: int
    bytes: int


def huge_session(size_mb: int = 1024, *, quiet: bool = False) -> HugeSession:
    """The chat-heavy session of about ``size_mb`` MiB (long prompts, streamed answers, no tools), generated
    on first use (about a minute for 1 GB) and reused after."""
    from benchmarks._logs import write_chat_log
    from dsh_jupyter.store import JsonlStore

    version = hashlib.sha256((HERE / "_logs.py").read_bytes()).hexdigest()[:16]
    root = DATA / f"huge-session-{size_mb}mb" / ".dsh" / "sessions"
    store = JsonlStore(root)
    path = store.log_path(SESSION_ID)
    marker = path.with_name("generated-by")
    if not (path.exists() and marker.exists() and marker.read_text().split()[0] == version):
        path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        facts = write_chat_log(path, size_mb=size_mb, session_id=SESSION_ID, cwd=CWD)
        marker.write_text(f"{version} {facts['messages']}")
        if not quiet:
            print(f"  (generated {facts['bytes'] / 2**20:.0f} MB, {facts['messages']} messages, "
                  f"in {time.monotonic() - started:.0f} s)", flush=True)
    messages = int(marker.read_text().split()[1])
    return HugeSession(root, SESSION_ID, path, messages, path.stat().st_size)
