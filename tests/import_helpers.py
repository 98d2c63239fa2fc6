"""Reading a module's imports from its source (:mod:`ast`), for the tests that keep the layers apart."""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_jupyter

PACKAGE = Path(dsh_jupyter.__file__).parent
ROOT = PACKAGE.parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, here: str | None = None) -> set[str]:
    """Every module ``path`` (the module ``here``) imports, at the top or inside a function, as absolute names."""
    here = module_name(path) if here is None else here
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # ``from .. import cli``
    return found
