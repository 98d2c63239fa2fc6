"""Loading and unloading the IPython extension (kept tiny: heavy imports happen on first use)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..workspace.live_document import install_live_document, live_connections
from .commands import install_help_requests
from .frontend_comm import install_current_session_comm, install_variables_comm
from .outside import install_outside_tools
from .sidebar_comm import install_sidebar_comm

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
    kernel = getattr(ip, "kernel", None)
    route = _answer_subshell_route(kernel) if kernel is not None else None
    disposers.append(install_live_document(ip, live_connections(magics.host, route)))
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


def _answer_subshell_route(kernel: Any) -> Callable[[Any], None]:
    """Route a page comm's incoming messages to ``kernel``'s approval answer subshell (made, and the approval
    module imported, when the first page connects: ``%load_ext`` stays light)."""

    def route(comm: Any) -> None:
        from .approval import answer_subshell, pin_replies

        pin_replies(comm, answer_subshell(kernel))

    return route
