"""The code before a change, for benchmarks that print "before" beside "after" in one run.

``before_tree("main")`` checks the given commit out into a temporary ``git worktree`` (removed afterwards);
a benchmark then runs its measured child from that tree (``<tree>/benchmarks/bench_x.py --child ...``), so
the "before" figure is the old code on the same data, machine and moment as the new one.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextmanager
def before_tree(ref: str | None) -> Iterator[Path | None]:
    """A temporary checkout of ``ref`` (``None``: no "before" run was asked for)."""
    if ref is None:
        yield None
        return
    scratch = Path(tempfile.mkdtemp(prefix="dsh-before-"))
    tree = scratch / "tree"
    made = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise SystemExit(f"cannot check out {ref!r} for the before run: {made.stderr.strip()}")
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
