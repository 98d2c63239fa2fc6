"""What the browser may ask the kernel (notebook/frontend_comm.py): its current session and its variables."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dsh_jupyter.notebook.frontend_comm import (
    CURRENT_SESSION_TARGET,
    VARIABLES_TARGET,
    install_current_session_comm,
    install_variables_comm,
)


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


def open_comm(shell: Shell, data: Any, target: str = VARIABLES_TARGET) -> Comm:
    comm = Comm()
    shell.kernel.comm_manager.targets[target](comm, {"content": {"data": data}})
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


def test_the_current_session_is_answered_once() -> None:
    shell = Shell()
    host = SimpleNamespace(agent=None)
    remove = install_current_session_comm(shell, lambda: host)
    assert open_comm(shell, {}, CURRENT_SESSION_TARGET).sent == [{"sessionId": None}]
    host.agent = SimpleNamespace(id="s-1")
    comm = open_comm(shell, "not a dict", CURRENT_SESSION_TARGET)
    assert comm.sent == [{"sessionId": "s-1"}] and comm.closed
    remove()
    assert CURRENT_SESSION_TARGET not in shell.kernel.comm_manager.targets
