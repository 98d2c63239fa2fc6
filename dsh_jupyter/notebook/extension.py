"""Loading and unloading the IPython extension (kept tiny: heavy imports happen on first use)."""

from __future__ import annotations

import contextlib
from typing import Any

from .commands import install_help_requests
from .frontend_comm import install_current_session_comm, install_variables_comm
from .sidebar_comm import install_sidebar_comm
from .workspace.live_document import install_live_document, live_connections
from .workspace.outside import install_outside_tools

_STATE: dict[int, Any] = {}


def load(ip: Any) -> None:
    from .magics import DshMagics

    if id(ip) in _STATE:
        return
    magics = DshMagics(shell=ip)
    ip.register_magics(magics)
    ip.events.register("pre_run_cell", magics.refresh_views)
    disposers = [install_help_requests(ip), magics.host.install_kernel_record()]
    try:
        from .completer import install_completer

        disposers.append(install_completer(ip, lambda: magics.host))
    except ImportError:
        pass
    disposers.append(install_current_session_comm(ip, lambda: magics.host))
    disposers.append(install_variables_comm(ip, lambda: magics.host))
    disposers.append(install_sidebar_comm(ip, lambda: magics.host))
    disposers.append(install_live_document(ip, live_connections(ip, magics.host)))
    disposers.append(install_outside_tools(ip, lambda: magics.host))
    from .warmup import start_after_cell

    disposers.append(start_after_cell(ip, lambda: bool(magics.warm_up), then=magics.start_indexing,
                                     start_loop=lambda: magics.host.thread.loop))
    if "dsh" not in ip.user_ns:
        from .host import SessionHandle

        ip.user_ns["dsh"] = SessionHandle(magics.host)
        ip.user_ns_hidden["dsh"] = ip.user_ns["dsh"]
    _STATE[id(ip)] = (magics, disposers)


def unload(ip: Any) -> None:
    state = _STATE.pop(id(ip), None)
    if state is None:
        return
    magics, disposers = state
    for dispose in disposers:
        dispose()
    with contextlib.suppress(ValueError):
        ip.events.unregister("pre_run_cell", magics.refresh_views)
    magics.host.close()
