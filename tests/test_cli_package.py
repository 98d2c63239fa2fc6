"""The command line is one package (``dsh_jupyter.cli``) that only points downwards: the stores, the catalog
and the references never import it, ``%load_ext dsh_jupyter`` does not load it, and both ways of starting
it (``python -m dsh_jupyter.cli`` and the ``dsh-jupyter`` console script) still work."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from import_helpers import PACKAGE, ROOT, loaded_by_load_ext
from import_helpers import module_imports as _imports

LOWER = ("store", "catalog", "references")
SIZE_LIMIT = 400  # lines per module of the CLI package


def _imports_cli(names: set[str]) -> list[str]:
    return sorted(n for n in names if n == "dsh_jupyter.cli" or n.startswith("dsh_jupyter.cli."))


@pytest.mark.parametrize("folder", LOWER)
def test_the_lower_packages_never_import_the_cli(folder: str) -> None:
    sources = sorted((PACKAGE / folder).rglob("*.py"))
    assert sources, folder
    offenders = {str(p.relative_to(ROOT)): hit for p in sources if (hit := _imports_cli(_imports(p)))}
    assert offenders == {}


def test_the_import_reader_sees_relative_imports_of_the_cli(tmp_path: Path) -> None:
    """The check above can fail: each spelling of an upward import is caught."""
    spellings = ["from ..cli import escape", "from .. import cli", "import dsh_jupyter.cli.output",
                 "def f() -> None:\n    from ..cli.output import when\n"]
    for number, source in enumerate(spellings):
        fake = tmp_path / f"probe_{number}.py"
        fake.write_text(source, encoding="utf-8")
        assert _imports_cli(_imports(fake, f"dsh_jupyter.store.probe_{number}")), source
    assert not _imports_cli(_imports(PACKAGE / "store" / "jsonl.py"))


def test_importing_the_store_catalog_and_references_loads_no_cli() -> None:
    code = ("import sys, dsh_jupyter.store, dsh_jupyter.store.postgres, dsh_jupyter.catalog, "
            "dsh_jupyter.catalog.postgres, dsh_jupyter.references, dsh_jupyter.references.tail; "
            "print(sorted(m for m in sys.modules if m == 'dsh_jupyter.cli' or m.startswith('dsh_jupyter.cli.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_load_ext_does_not_import_the_cli(tmp_path: Path) -> None:
    assert loaded_by_load_ext(tmp_path, "dsh_jupyter.cli") == []


def test_the_old_module_paths_are_gone() -> None:
    assert not (PACKAGE / "cli.py").exists()
    assert not (PACKAGE / "store" / "postgres_cli.py").exists()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("dsh_jupyter.store.postgres_cli")


def test_every_cli_module_is_small() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "cli").glob("*.py")}
    assert {"__init__.py", "__main__.py", "parser.py", "sessions.py", "postgres.py", "output.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > SIZE_LIMIT} == {}


def _help(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_python_m_prints_the_help_and_the_exit_codes() -> None:
    done = _help([sys.executable, "-m", "dsh_jupyter.cli", "--help"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: dsh-jupyter") and "sessions" in done.stdout and "postgres" in done.stdout
    done = _help([sys.executable, "-m", "dsh_jupyter.cli", "sessions", "copy", "--help"])
    assert done.returncode == 0 and "--from DIR|postgres" in done.stdout, done.stderr
    done = _help([sys.executable, "-m", "dsh_jupyter.cli", "postgres", "frobnicate"])
    assert done.returncode == 2 and "invalid choice: 'frobnicate'" in done.stderr


def test_the_console_script_entry_point_resolves_and_runs() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, name = scripts["dsh-jupyter"].partition(":")
    target = getattr(importlib.import_module(module), name)
    from dsh_jupyter.cli import main

    assert target is main
    code = f"import sys, {module}; sys.exit({module}.{name}(['--version']))"
    done = _help([sys.executable, "-c", code])
    assert done.returncode == 0 and done.stdout.startswith("dsh-jupyter "), done.stderr
    script = shutil.which("dsh-jupyter", path=os.path.dirname(sys.executable))
    if script is not None:  # the installed wrapper, run with this tree first on the path
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60, check=False, env=env)
        assert done.returncode == 0 and done.stdout.startswith("usage: dsh-jupyter"), done.stderr
