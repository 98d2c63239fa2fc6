"""The kernel's variables as reference snapshots, and the comm the JupyterLab popup asks them through."""

from __future__ import annotations

from typing import Any

import pandas as pd
from IPython.core.interactiveshell import InteractiveShell

from dsh_jupyter.notebook.variable_refs import (
    MAX_REFERENCE_CHARS,
    VARIABLES_TARGET,
    NamespaceVariables,
    install_variables_comm,
    variable_source,
)


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


class Comm:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.closed = False

    def send(self, data: Any) -> None:
        self.sent.append(data)

    def close(self) -> None:
        self.closed = True


class Manager:
    def __init__(self) -> None:
        self.targets: dict[str, Any] = {}

    def register_target(self, name: str, handler: Any) -> None:
        self.targets[name] = handler


class Kernel:
    def __init__(self) -> None:
        self.comm_manager = Manager()


class Shell:
    def __init__(self) -> None:
        self.kernel = Kernel()


class Lister:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[tuple[str, int]] = []

    def variable_candidates(self, query: str = "", limit: int = 50) -> list[dict[str, str]]:
        self.asked.append((query, limit))
        if self.fail:
            raise RuntimeError("namespace exploded")
        return [{"name": "df", "kind": "dataframe", "type": "DataFrame", "brief": "DataFrame 2×2",
                 "mention": "@[df](dsh-variable:df)"}]


def open_comm(shell: Shell, data: Any) -> Comm:
    comm = Comm()
    shell.kernel.comm_manager.targets[VARIABLES_TARGET](comm, {"content": {"data": data}})
    return comm


def test_the_comm_answers_once_and_closes() -> None:
    shell, lister = Shell(), Lister()
    remove = install_variables_comm(shell, lambda: lister)
    comm = open_comm(shell, {"query": "d", "limit": 5})
    assert comm.sent == [{"variables": lister.variable_candidates()}] and comm.closed
    assert lister.asked[0] == ("d", 5)
    open_comm(shell, {"query": 3, "limit": 10**6})  # odd values: the defaults
    assert lister.asked[2] == ("", 50)
    remove()
    assert VARIABLES_TARGET not in shell.kernel.comm_manager.targets


def test_a_failing_listing_answers_empty_and_no_kernel_registers_nothing() -> None:
    shell = Shell()
    install_variables_comm(shell, lambda: Lister(fail=True))
    comm = open_comm(shell, None)
    assert comm.sent == [{"variables": []}] and comm.closed
    assert install_variables_comm(object(), Lister)() is None
