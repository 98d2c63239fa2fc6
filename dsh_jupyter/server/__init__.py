"""jupyter-server extension of dsh-jupyter: read-only REST endpoints for the browser front end.

Installed packages enable it through ``etc/jupyter/jupyter_server_config.d/dsh_jupyter.json``
(``{"ServerApp": {"jpserver_extensions": {"dsh_jupyter": true}}}``): the top-level package points
jupyter-server here through its own ``_jupyter_server_extension_points``. Enabling
``dsh_jupyter.server`` directly works too. The routes are listed in :mod:`dsh_jupyter.server.handlers`,
the settings (``c.DshServer.*``) in :mod:`dsh_jupyter.server.config`.

The server serves only session stores at or below its root (plus ``c.DshServer.extra_roots``) and, when
``c.DshServer.postgres_dsn`` (default ``$DSH_POSTGRES_DSN``) names one, a PostgreSQL store, reads
them on a small pool of its own threads with a deadline per request, and indexes the stores of its root
in a background thread of its own at start. A notebook it saves mid-turn says so in its turn footers instead of
"● running" (:mod:`dsh_jupyter.server.saving`).

jupyter-server, the settings and the handlers are imported by :func:`_load_jupyter_server_extension`:
``import dsh_jupyter.server`` alone (its helpers, the tests) does not start the web stack.
"""

from __future__ import annotations

from typing import Any

from .indexing import index_in_background
from .state import SETTINGS_KEY, ServerState

#: The module jupyter-server loads.
EXTENSION_MODULE = "dsh_jupyter.server"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": EXTENSION_MODULE}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the dsh REST handlers under the server's ``base_url``; index the root's stores in the background."""
    from jupyter_server.utils import url_path_join

    from ..completion.config import DshCompletion
    from ..completion.service import service_for
    from .completion import OPTIONS_KEY, SERVICE_KEY
    from .completion import ROUTES as COMPLETION_ROUTES
    from .config import DshServer
    from .handlers import ROUTES
    from .mcp import add_endpoint as add_mcp_endpoint
    from .saving import settle_footers_hook
    settings = DshServer(parent=serverapp)
    boundary = settings.boundary(serverapp.root_dir)
    postgres = settings.make_postgres()
    state = ServerState(boundary=boundary, pool=settings.make_pool(), timeout=settings.request_timeout,
                        postgres=postgres)
    web_app = serverapp.web_app
    web_app.settings[SETTINGS_KEY] = state
    completion = DshCompletion(parent=serverapp)
    web_app.settings[OPTIONS_KEY] = completion
    web_app.settings[SERVICE_KEY] = service_for(completion)
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, route), handler)
                                 for route, handler in [*ROUTES, *COMPLETION_ROUTES]])
    add_mcp_endpoint(web_app, serverapp.root_dir, base_url)
    _serve_notebook_applier(serverapp, base_url)
    serverapp.log.info("dsh-jupyter: REST endpoints at %sdsh/api/ (candidates, sessions, locate, completion, "
                       "notebook) and MCP at dsh/mcp, serving the session stores under the server root%s", base_url,
                       f" and {len(boundary.extra)} extra root(s)" if boundary.extra else "")
    if postgres is not None:
        serverapp.log.info("dsh-jupyter: also serving the PostgreSQL session store %s (what its role may read)",
                           postgres.where)
    contents = getattr(serverapp, "contents_manager", None)
    if contents is not None and hasattr(contents, "register_pre_save_hook"):
        contents.register_pre_save_hook(settle_footers_hook(serverapp.root_dir, boundary))
    if settings.index_at_start:
        index_in_background(boundary)


def _serve_notebook_applier(serverapp: Any, base_url: str) -> None:
    """``POST dsh/api/notebook`` (:mod:`.shared_notebook`), and the way there in the environment its kernels get
    (set again once the server listens: its port is final then)."""
    from jupyter_server.utils import url_path_join

    from .notebook_handler import APPLIER_KEY, KERNEL_KEY, ROUTE
    from .shared_notebook import NotebookApplier, hand_kernels_the_way_here, kernel_url

    settings = serverapp.web_app.settings
    settings[APPLIER_KEY] = NotebookApplier(serverapp)
    settings[KERNEL_KEY] = hand_kernels_the_way_here(kernel_url(serverapp, base_url))
    serverapp.web_app.add_handlers(".*$", [(url_path_join(base_url, ROUTE[0]), ROUTE[1])])

    def listening() -> None:
        settings[KERNEL_KEY] = hand_kernels_the_way_here(kernel_url(serverapp, base_url))

    loop = getattr(serverapp, "io_loop", None)
    if loop is not None:
        loop.add_callback(listening)


# jupyter-server before 2 looked for this name.
load_jupyter_server_extension = _load_jupyter_server_extension
