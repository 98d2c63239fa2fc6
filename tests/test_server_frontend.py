"""The labextension's DOM-free TypeScript modules, tested with Node's own test runner.

``labextension/test/*.test.mjs`` import the compiled ``labextension/lib`` (written by ``jlpm build``,
which the editable install in ``scripts/venv.sh`` runs). The browser tests cover the DOM parts.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LABEXT = Path(__file__).resolve().parents[1] / "labextension"
PURE_MODULES = ("context", "escape", "items", "mentions", "inline_rules", "merge")


def test_frontend_units_pass_under_node() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    missing = [m for m in PURE_MODULES if not (LABEXT / "lib" / f"{m}.js").is_file()]
    if missing:
        pytest.skip(f"labextension/lib is not built ({', '.join(missing)}.js missing): "
                    "run `jlpm build` in labextension/")
    stale = [m for m in PURE_MODULES
             if (LABEXT / "src" / f"{m}.ts").stat().st_mtime > (LABEXT / "lib" / f"{m}.js").stat().st_mtime]
    assert not stale, f"labextension/lib is older than src for {stale}: run `jlpm build:lib` in labextension/"
    result = subprocess.run(
        [node, "--experimental-detect-module", "--test", "test/"],
        check=False, cwd=LABEXT, capture_output=True, text=True, timeout=120,
    )
    report = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "# fail 0" in result.stdout, report
