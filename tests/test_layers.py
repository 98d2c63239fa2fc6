"""The package's layers, read from every module's imports with :mod:`ast` (nothing is imported).

- the core (sessions, stores, references, catalog, sources, agent, models, tools and the low modules)
  imports neither the presentation wing (``dsh_jupyter.ui``) nor the IPython host (``dsh_jupyter.notebook``);
- ``dsh_jupyter.ui`` imports neither the host nor the server extension nor the CLI;
- ``dsh_jupyter.workspace`` (the notebook as the agent's workspace, which the host and the server's shared
  notebook both use) imports neither the host, the presentation wing, the server extension nor the CLI;
- no two modules import each other, directly or around a circle (top-level and function-level imports
  alike; imports under ``if TYPE_CHECKING:`` never run, so they do not count).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from import_helpers import PACKAGE, import_statements, imported_names, module_names, package_of

CORE = ("session", "store", "references", "catalog", "sources", "agent", "models", "tools",
        "services", "query", "secrets", "images", "clip", "escape")
HOST = "dsh_jupyter.notebook"
UI = "dsh_jupyter.ui"
WORKSPACE = "dsh_jupyter.workspace"


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a module of the package."""

    source: str
    target: str
    line: int
    type_checking: bool

    def __str__(self) -> str:
        return f"{self.source} (line {self.line}) imports {self.target}"


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The package modules ``name`` imports: ``from a import b`` names ``a.b`` when that is a module."""
    package = package_of(path, name)
    found: list[Import] = []
    for node, guarded in import_statements(path):
        for named in imported_names(node, package):
            target = named
            while target and target not in modules:  # ``import a.b.c`` of a package module, or an attribute
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append(Import(name, target, node.lineno, guarded))
    return list(dict.fromkeys(found))


def import_graph(root: Path) -> list[Import]:
    modules = module_names(root)
    return [edge for name, path in modules.items() for edge in imports_of(name, path, modules)]


def import_circles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), over imports that run."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set())
        graph.setdefault(edge.target, set())
        if not edge.type_checking:
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def core_violations(edges: list[Import]) -> list[Import]:
    core = [f"dsh_jupyter.{name}" for name in CORE]
    return [edge for edge in edges if any(_within(edge.source, c) for c in core)
            and (_within(edge.target, UI) or _within(edge.target, HOST))]


def ui_violations(edges: list[Import]) -> list[Import]:
    above = (HOST, "dsh_jupyter.server", "dsh_jupyter.cli")
    return [edge for edge in edges if _within(edge.source, UI) and any(_within(edge.target, a) for a in above)]


def workspace_violations(edges: list[Import]) -> list[Import]:
    above = (HOST, UI, "dsh_jupyter.server", "dsh_jupyter.cli")
    return [edge for edge in edges
            if _within(edge.source, WORKSPACE) and any(_within(edge.target, a) for a in above)]


@pytest.fixture(scope="module")
def edges() -> list[Import]:
    return import_graph(PACKAGE)


def test_the_graph_is_read(edges: list[Import]) -> None:
    pairs = {(edge.source, edge.target) for edge in edges}
    assert ("dsh_jupyter.notebook.magics", "dsh_jupyter.ui.display") in pairs  # top level, relative
    assert ("dsh_jupyter.notebook.magics", "dsh_jupyter.ui.widgets") in pairs  # inside a method
    assert ("dsh_jupyter.agent.grants", "dsh_jupyter.escape") in pairs
    for name in CORE:
        assert f"dsh_jupyter.{name}" in module_names(PACKAGE), f"{name} is gone: update CORE"


def test_the_core_imports_neither_presentation_nor_host(edges: list[Import]) -> None:
    assert [str(edge) for edge in core_violations(edges)] == []


def test_presentation_imports_neither_host_nor_server_nor_cli(edges: list[Import]) -> None:
    assert [str(edge) for edge in ui_violations(edges)] == []


def test_the_workspace_imports_neither_host_nor_presentation_nor_server(edges: list[Import]) -> None:
    assert ("dsh_jupyter.workspace.cell_runner", "dsh_jupyter.workspace.document") in {
        (edge.source, edge.target) for edge in edges}
    assert [str(edge) for edge in workspace_violations(edges)] == []


def test_no_import_circles(edges: list[Import]) -> None:
    assert import_circles(edges) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "dsh_jupyter"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checks_catch_circles_and_upward_imports(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "clip.py": "def f():\n    from .notebook import host\n",
        "agent/__init__.py": "",
        "agent/loop.py": "from ..ui.render import x\n",
        "ui/__init__.py": "",
        "ui/render.py": "from .display import y\n",
        "ui/display.py": "import dsh_jupyter.ui.render\nfrom dsh_jupyter.cli import main\n",
        "ui/hints.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .other import z\n",
        "ui/other.py": "from .hints import w\n",
        "notebook/__init__.py": "",
        "notebook/host.py": "",
        "cli/__init__.py": "",
    })
    edges = import_graph(root)
    assert [str(edge) for edge in core_violations(edges)] == [
        "dsh_jupyter.agent.loop (line 1) imports dsh_jupyter.ui.render",
        "dsh_jupyter.clip (line 2) imports dsh_jupyter.notebook.host",
    ]
    assert [str(edge) for edge in ui_violations(edges)] == ["dsh_jupyter.ui.display (line 2) imports dsh_jupyter.cli"]
    assert import_circles(edges) == [["dsh_jupyter.ui.display", "dsh_jupyter.ui.render"]]  # hints/other: types only
