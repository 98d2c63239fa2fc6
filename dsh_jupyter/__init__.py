"""dsh-jupyter: drive an agent harness from Jupyter notebooks.

``%load_ext dsh_jupyter`` registers the ``%%dsh`` and ``%dsh`` magics. Nothing heavy (model SDKs,
widgets) is imported until it is used.

The hooks import the IPython host (:mod:`dsh_jupyter.notebook.extension`) when IPython calls them:
``import dsh_jupyter`` alone (the CLI, the server extension) never loads it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(ip: Any) -> None:
    from .notebook.extension import load

    load(ip)


def unload_ipython_extension(ip: Any) -> None:
    from .notebook.extension import unload

    unload(ip)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "dsh-jupyter"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "dsh_jupyter.server"}]
