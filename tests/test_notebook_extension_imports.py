"""``%load_ext dsh_jupyter`` stays light: it loads the host, never the presentation's heavy parts.

The widgets (and anywidget with them), the approval widget, exports (nbformat) and the sanitiser's parser
and cleaner (mistune, nh3) are imported when a cell first needs them.
"""

from __future__ import annotations

from pathlib import Path

from import_helpers import loaded_by_load_ext

HEAVY = ("dsh_jupyter.ui.widgets", "dsh_jupyter.ui.approval_widget", "dsh_jupyter.ui.export", "anywidget",
         "ipywidgets", "mistune", "nh3", "nbformat", "litellm")


def test_load_ext_imports_none_of_the_heavy_presentation_modules(tmp_path: Path) -> None:
    assert loaded_by_load_ext(tmp_path, *HEAVY) == []

