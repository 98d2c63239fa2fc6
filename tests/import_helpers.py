"""Reading a module's imports from its source (:mod:`ast`, nothing is imported), for the tests that keep the
layers apart: the one reader of import statements, their relative names and the package's module names; and
what ``%load_ext dsh_jupyter`` really imports, in a fresh process (:func:`loaded_by_load_ext`)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

#: The package of this tree (not whichever copy an installed environment would import).
PACKAGE = Path(__file__).resolve().parents[1] / "dsh_jupyter"
ROOT = PACKAGE.parent


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module at ``path`` under the folder ``root`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_names(package: Path) -> dict[str, Path]:
    """Every module under ``package`` (a package folder) by its dotted name."""
    return {module_name(path, package.parent): path for path in sorted(package.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, guarded: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, guarded
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for part in child.body:
                yield from _walk(ast.Module(body=[part], type_ignores=[]), True)
            for part in child.orelse:
                yield from _walk(ast.Module(body=[part], type_ignores=[]), guarded)
        else:
            yield from _walk(child, guarded)


def import_statements(path: Path) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The import statements anywhere in the module at ``path`` (functions included), each with whether it
    runs only for the type checker (under ``if TYPE_CHECKING:``)."""
    yield from _walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)


def package_of(path: Path, name: str) -> str:
    """The package relative imports in the module ``name`` (at ``path``) start from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def from_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from … import`` statement in ``package`` imports from."""
    if not node.level:
        return node.module or ""
    anchor = package.split(".")
    anchor = anchor[:len(anchor) - node.level + 1]
    return ".".join([*anchor, node.module] if node.module else anchor)


def imported_names(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The absolute names a statement names: ``import a.b`` names ``a.b``; ``from .x import y`` names
    ``<package>.x.y`` (a module or an attribute of ``<package>.x``: the caller tells them apart)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = from_base(node, package)
    return [f"{base}.{alias.name}" for alias in node.names]


def loaded_by_load_ext(tmp_path: Path, *names: str) -> list[str]:
    """Which of ``names`` (each a module and its submodules) ``%load_ext dsh_jupyter`` imports in a fresh IPython
    shell of a new process (its ``DSH_HOME`` and ``IPYTHONDIR`` in ``tmp_path``); the host must have loaded."""
    code = ("import sys\n"
            "from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\n"
            "shell.run_line_magic('load_ext', 'dsh_jupyter')\n"
            "assert 'dsh_jupyter.notebook.magics' in sys.modules, sorted(sys.modules)\n"
            f"names = {names!r}\n"
            "print(sorted(m for m in sys.modules if any(m == n or m.startswith(n + '.') for n in names)))\n")
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home"), "IPYTHONDIR": str(tmp_path / "ipython")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    return loaded


def module_imports(path: Path, here: str | None = None) -> set[str]:
    """Every module ``path`` (the module ``here``) imports, at the top or inside a function, as absolute names."""
    package = package_of(path, module_name(path) if here is None else here)
    found: set[str] = set()
    for node, _guarded in import_statements(path):
        found.update(imported_names(node, package))  # ``from .. import cli`` names the module ``cli``
        if isinstance(node, ast.ImportFrom):
            found.add(from_base(node, package))
    return found
