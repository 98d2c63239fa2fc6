"""jupyter-server extension of dsh-jupyter: read-only REST endpoints for the browser front end.

Installed packages enable it through ``etc/jupyter/jupyter_server_config.d/dsh_jupyter.json``
(``{"ServerApp": {"jpserver_extensions": {"dsh_jupyter": true}}}``): the top-level package points
jupyter-server here through its own ``_jupyter_server_extension_points``. Enabling
``dsh_jupyter.server`` directly works too. The routes are listed in :mod:`dsh_jupyter.server.handlers`.
"""

from __future__ import annotations

from typing import Any

#: The module jupyter-server loads.
EXTENSION_MODULE = "dsh_jupyter.server"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": EXTENSION_MODULE}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the dsh REST handlers under the server's ``base_url``."""
    from jupyter_server.utils import url_path_join

    from .handlers import ROUTES

    base_url = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [(url_path_join(base_url, route), handler) for route, handler in ROUTES])
    serverapp.log.info("dsh-jupyter: REST endpoints at %sdsh/api/ (candidates, sessions, locate)", base_url)
    _index_root_in_background(serverapp)


def _index_root_in_background(serverapp: Any) -> None:
    """Pick up the store of the folder the server starts in (say, one copied in from a colleague)."""
    import threading
    from pathlib import Path

    from .sessions import server_catalog

    root = Path(serverapp.root_dir)
    threading.Thread(target=server_catalog, args=(root,), name="dsh-catalog-index", daemon=True).start()


# jupyter-server before 2 looked for this name.
load_jupyter_server_extension = _load_jupyter_server_extension
