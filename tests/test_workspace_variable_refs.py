"""The kernel's variables as reference snapshots (workspace/variable_refs.py)."""

from __future__ import annotations

import pandas as pd
from IPython.core.interactiveshell import InteractiveShell

from dsh_jupyter.workspace.variable_refs import MAX_REFERENCE_CHARS, NamespaceVariables, variable_source


def test_snapshots_read_the_namespace_within_the_budget() -> None:
    shell = InteractiveShell.instance()
    shell.user_ns["snap_df"] = pd.DataFrame({"a": range(1000), "b": ["x" * 500] * 1000})
    source = NamespaceVariables(shell)
    small = source.snapshot("snap_df", 300)
    assert small is not None and small.brief == "DataFrame 1,000×2" and small.type_name == "DataFrame"
    assert len(small.text) <= 300 and small.text.startswith("snap_df: DataFrame 1,000×2")
    assert len(source.snapshot("snap_df", 10**9).text) <= MAX_REFERENCE_CHARS  # type: ignore[union-attr]
    assert source.snapshot("snap_gone", 1000) is None
    assert variable_source(None) is None and isinstance(variable_source(shell), NamespaceVariables)
