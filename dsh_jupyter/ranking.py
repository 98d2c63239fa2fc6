"""The reference's candidate ranking rule, shared by the log-scanning path and the session catalog.

Kept in a module of its own so the catalog can use it without importing the reference service.
"""

from __future__ import annotations


def workspace_rank(candidate_cwd: str | None, target_cwd: str | None) -> int:
    """0: same working directory; 1: the candidate has none; 2: anything else."""
    if candidate_cwd is not None and target_cwd is not None and candidate_cwd == target_cwd:
        return 0
    if candidate_cwd is None:
        return 1
    return 2
