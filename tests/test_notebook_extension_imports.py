"""``%load_ext dsh_jupyter`` stays light: it loads the host, never the presentation's heavy parts.

The widgets (and anywidget with them), the approval widget, exports (nbformat) and the sanitiser's parser
and cleaner (mistune, nh3) are imported when a cell first needs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("dsh_jupyter.ui.widgets", "dsh_jupyter.ui.approval_widget", "dsh_jupyter.ui.export", "anywidget",
         "ipywidgets", "mistune", "nh3", "nbformat")


def test_load_ext_imports_none_of_the_heavy_presentation_modules(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\n"
            "shell.run_line_magic('load_ext', 'dsh_jupyter')\n"
            "assert 'dsh_jupyter.notebook.magics' in sys.modules, sorted(sys.modules)\n"
            f"heavy = {HEAVY!r}\n"
            "print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in heavy)))\n")
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home"), "IPYTHONDIR": str(tmp_path / "ipython")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"

