"""The layers of storage: ``store/`` sits below the catalog and every host, and ``session/`` below ``store/``.

Read from the source (:func:`import_helpers.module_imports`), so an import inside a function (a lazy one)
counts as much as one at the top of a module."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_helpers import PACKAGE, ROOT, module_imports

#: What each layer may not import (packages of ``dsh_jupyter``, or its top-level modules).
FORBIDDEN = {
    "store": ("catalog", "cli", "notebook", "ui", "server"),
    "session": ("store", "catalog", "cli", "notebook", "ui", "server", "references"),
}


def offending(names: set[str], layer: str) -> list[str]:
    banned = [f"dsh_jupyter.{name}" for name in FORBIDDEN[layer]]
    return sorted(n for n in names if any(n == b or n.startswith(b + ".") for b in banned))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    sources = sorted((PACKAGE / layer).rglob("*.py"))
    assert sources, layer
    offenders = {str(p.relative_to(ROOT)): hit for p in sources if (hit := offending(module_imports(p), layer))}
    assert offenders == {}, f"dsh_jupyter/{layer}/ may not import {', '.join(FORBIDDEN[layer])}"


def test_the_check_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    """The check can fail: each spelling of an import of the catalog or a host from a store module is caught."""
    spellings = ["def f() -> None:\n    from ..catalog.postgres import body_words\n", "from .. import catalog",
                 "import dsh_jupyter.server.handlers", "from ..notebook import magics", "from dsh_jupyter.ui import x"]
    for number, source in enumerate(spellings):
        fake = tmp_path / f"probe_{number}.py"
        fake.write_text(source, encoding="utf-8")
        assert offending(module_imports(fake, f"dsh_jupyter.store.probe_{number}"), "store"), source
    assert not offending(module_imports(PACKAGE / "store" / "sql.py"), "store")
    assert offending({"dsh_jupyter.references.projection"}, "session")
