"""Packaging of the front end: the prebuilt labextension and the server-extension switch in the wheel.

The static checks read the repository's own files. The slow test builds a wheel from the current tree
without build isolation (so nothing is downloaded) and inspects what a user would install.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from notebook_helpers import VIEWS

import dsh_jupyter

ROOT = Path(__file__).resolve().parents[1]
NPM_NAME = "dsh-jupyter"
LABEXT_DATA = f"share/jupyter/labextensions/{NPM_NAME}"
SERVER_CONFIG = "etc/jupyter/jupyter_server_config.d/dsh_jupyter.json"
ASSETS = ROOT / "dsh_jupyter" / "labextension"
#: The anywidget views `jlpm build` bundles from labextension/src/widgets/.
VIEW_BUNDLES = [f"dsh_jupyter/ui/static/{name}.js" for name in VIEWS]


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_npm_package_output_matches_the_wheel_mapping() -> None:
    package = json.loads((ROOT / "labextension" / "package.json").read_text(encoding="utf-8"))
    assert package["name"] == NPM_NAME
    output = (ROOT / "labextension" / package["jupyterlab"]["outputDir"]).resolve()
    assert output == ASSETS
    shared = pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["dsh_jupyter/labextension"] == LABEXT_DATA
    assert shared["install.json"] == f"{LABEXT_DATA}/install.json"
    assert shared["jupyter-config/server-config"] == "etc/jupyter/jupyter_server_config.d"
    assert package["jupyterlab"]["extension"] and package["jupyterlab"]["mimeExtension"]
    assert "@jupyter/builder" in package["devDependencies"]


def test_build_hook_never_needs_node_for_a_wheel_with_assets() -> None:
    hook = pyproject()["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    assert hook["skip-if-exists"] == ["dsh_jupyter/labextension/static/style.js", *VIEW_BUNDLES]
    assert "dsh_jupyter/labextension/package.json" in hook["ensured-targets"]
    assert set(VIEW_BUNDLES) <= set(hook["ensured-targets"])
    # The view bundles are gitignored build output: the wheel and the sdist name them.
    targets = pyproject()["tool"]["hatch"]["build"]["targets"]
    assert "dsh_jupyter/ui/static/*.js" in targets["wheel"]["artifacts"]
    assert "dsh_jupyter/ui/static/*.js" in targets["sdist"]["artifacts"]
    editable = pyproject()["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]["editable-build-kwargs"]
    assert editable["build_dir"] in VIEW_BUNDLES and editable["source_dir"] == "labextension/src"
    requires = pyproject()["build-system"]["requires"]
    assert any(r.startswith("jupyterlab") for r in requires)  # jlpm and jupyter-builder for the build


def test_install_metadata_and_server_switch() -> None:
    install = json.loads((ROOT / "install.json").read_text(encoding="utf-8"))
    assert install == {
        "packageManager": "python",
        "packageName": "dsh-jupyter",
        "uninstallInstructions": install["uninstallInstructions"],
    }
    config = json.loads((ROOT / "jupyter-config" / "server-config" / "dsh_jupyter.json").read_text("utf-8"))
    assert config == {"ServerApp": {"jpserver_extensions": {"dsh_jupyter": True}}}
    points = dsh_jupyter._jupyter_server_extension_points()
    assert [p["module"] for p in points] == ["dsh_jupyter.server"]
    server = importlib.import_module(points[0]["module"])
    assert callable(server._load_jupyter_server_extension)


@pytest.mark.slow
def test_wheel_holds_the_prebuilt_extension_and_the_server_config(tmp_path: Path) -> None:
    if not (ASSETS / "static" / "style.js").is_file():
        pytest.fail(
            "dsh_jupyter/labextension is not built: run `bash scripts/venv.sh` (or `jlpm --cwd labextension "
            "install && jlpm --cwd labextension build`) before this test"
        )
    missing = [name for name in ("hatchling", "hatch_jupyter_builder") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"building a wheel offline needs {', '.join(missing)} in the test environment")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-w", str(tmp_path), str(ROOT)],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = tmp_path.glob("dsh_jupyter-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        data = f"dsh_jupyter-{dsh_jupyter.__version__}.data/data/"
        package = json.loads(archive.read(f"{data}{LABEXT_DATA}/package.json"))
        assert package["name"] == NPM_NAME
        build = package["jupyterlab"]["_build"]
        assert {"load", "extension", "mimeExtension", "style"} <= set(build)
        assert f"{data}{LABEXT_DATA}/{build['load']}" in names
        assert f"{data}{LABEXT_DATA}/static/style.js" in names
        install = json.loads(archive.read(f"{data}{LABEXT_DATA}/install.json"))
        assert install["packageName"] == "dsh-jupyter"
        config = json.loads(archive.read(f"{data}{SERVER_CONFIG}"))
        assert config["ServerApp"]["jpserver_extensions"] == {"dsh_jupyter": True}
        assert "dsh_jupyter/server/handlers.py" in names
        assert set(VIEW_BUNDLES) <= names, "the bundled anywidget views are in the wheel"
        assert not any("node_modules" in n or n.startswith("labextension/") for n in names)
        # Every built asset is shipped, and nothing else lands in the extension folder.
        built = {p.relative_to(ASSETS).as_posix() for p in ASSETS.rglob("*") if p.is_file()}
        shipped = {n[len(f"{data}{LABEXT_DATA}/"):] for n in names if n.startswith(f"{data}{LABEXT_DATA}/")}
        assert shipped == built | {"install.json"}


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_is_enabled(tmp_path: Path) -> None:
    """Install the built wheel (no deps, offline) into a new venv that borrows the test environment's
    packages through a plain path entry (so our editable install is not visible), then ask Jupyter."""
    missing = [name for name in ("hatchling", "hatch_jupyter_builder") if importlib.util.find_spec(name) is None]
    if missing or not (ASSETS / "static" / "style.js").is_file():
        pytest.skip("needs hatchling, hatch-jupyter-builder and a built labextension (bash scripts/venv.sh)")
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-w", str(wheels), str(ROOT)],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("dsh_jupyter-*.whl")
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    test_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "jupyter_server").is_dir())
    Path(site, "borrowed.pth").write_text(test_site + "\n")  # a path line: its .pth files are not run
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
         "--disable-pip-version-check", str(wheel)],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER") and k != "PYTHONPATH"}
    env["HOME"] = str(tmp_path / "home")
    where = subprocess.run([str(python), "-c", "import dsh_jupyter; print(dsh_jupyter.__file__)"],
                           capture_output=True, text=True, env=env, check=True, cwd=tmp_path).stdout
    assert where.startswith(site), where  # the wheel's copy, not the editable checkout
    labext = subprocess.run([str(python), "-m", "jupyterlab.labextensions", "list"],
                            check=False, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    listing = re.sub(r"\x1b\[[0-9;]*m", "", labext.stdout + labext.stderr)  # drop colour codes
    assert re.search(r"dsh-jupyter v\S+ enabled\s+.*OK", listing), listing
    assert str(venv) in listing, listing
    server = subprocess.run([str(python), "-m", "jupyter_server.extension.serverextension", "list"],
                            check=False, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    listing = re.sub(r"\x1b\[[0-9;]*m", "", server.stdout + server.stderr)
    assert re.search(r"dsh_jupyter enabled", listing) and "OK" in listing, listing
