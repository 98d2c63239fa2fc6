"""The kernel side of the chat sidebar of JupyterLab and Notebook 7 (``labextension/src/sidebar.ts``).

The sidebar opens one comm to :data:`SIDEBAR_TARGET` per notebook and keeps it. The kernel answers with the
model id of a chat panel (:class:`~dsh_jupyter.ui.widgets.ChatPanel`, ``kind="sidebar"``) bound to the
current session, and the browser renders that widget with the notebook's own widget manager: the transcript,
tool lines, approval questions, proposals' status and Stop are the very code of ``%dsh chat``. The sidebar
brings its own prompt box (mention chips, the ``@`` popup, the model picker) and sends prompts over the comm.

Messages from the browser carry a ``request`` number that the answer repeats:

- ``{"kind": "bind"}``: answered with the state below;
- ``{"kind": "send", "text": str, "model": str | None}``: the prompt goes through the panel (a new turn, run
  on the agent thread, so the notebook stays free; or a steer into the running one); answered
  ``{"kind": "sent", "mode": "sent" | "steered"}`` or ``{"kind": "error", "message": str}``. A prompt refused
  after that answer, before it reached the log (a mention of a session that is gone, say), comes back unasked on
  the same comm: ``{"kind": "returned", "text": str, "message": str}``, and the sidebar puts it back in its box;
- ``{"kind": "model", "model": str | None}``: the model of the sidebar's next prompts (``None``: the
  notebook's ``DshMagics.model``); checked at once, answered with the state or an error;
- ``{"kind": "variables", "query": str, "limit": int}``: the ``@`` popup's variables, answered as the
  ``dsh.variables`` comm answers (:func:`~dsh_jupyter.notebook.frontend_comm.answer_variables`), without a
  short-lived comm per keystroke.

The state (``{"kind": "state", "modelId", "sessionId", "busy", "model", "models"}``) is also sent unasked
when a turn starts or ends, so the browser follows a session the turn created and its prompt box knows a turn
runs. Each session keeps its panel for the life of the kernel, so a reloaded page (or a notebook switched back
to) shows the conversation again. The panel follows the session's agent: every turn streams into it, whichever
frontend sent the prompt (a ``%%dsh`` cell, ``%dsh chat``, the sidebar), and a panel made for a session begun
elsewhere (in cells, or resumed after a restart) first shows the session's log folded as exports fold it.

Nothing here imports ipykernel or ipywidgets at load time; outside a kernel nothing is registered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ui.widgets import ChatPanel
    from .host import NotebookHost

#: The comm target the sidebar opens (labextension/src/sidebar_kernel.ts).
SIDEBAR_TARGET = "dsh.sidebar"

log = logging.getLogger(__name__)

def model_choices(host: NotebookHost) -> list[dict[str, Any]]:
    """The sidebar's model picker: the notebook's setting first, then every model ``%dsh models`` lists."""
    from ..models.registry import list_models

    configured, _ = host.model_spec()
    rows: list[dict[str, Any]] = [{"spec": None, "label": f"{configured} (default)",
                                   "available": True, "note": "DshMagics.model"}]
    for row in list_models():
        note = row.note if row.available or not row.key_env else f"needs ${row.key_env}"
        rows.append({"spec": row.spec, "label": row.spec, "available": row.available, "note": note})
    return rows


class SidebarChats:
    """The sidebar's chat panels of one kernel: one per session, made when first asked for."""

    def __init__(self, host: Callable[[], NotebookHost]) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._panels: dict[str, ChatPanel] = {}
        #: The panel shown while the kernel has no session yet; its first prompt creates one.
        self._fresh: ChatPanel | None = None
        #: The model the sidebar's prompts use (``None``: the notebook's setting).
        self.model: str | None = None
        self._comms: list[Any] = []

    # -- the panel of the current session

    def panel(self) -> ChatPanel:
        """The chat panel of the current session (made now if it has none)."""
        from ..ui.widgets import ChatPanel

        host = self._host()
        agent = host.agent
        with self._lock:
            if agent is None:
                if self._fresh is None:
                    self._fresh = ChatPanel(host, kind="sidebar")
                return self._fresh
            panel = self._panels.get(agent.id)
            if panel is None:
                panel = self._panels[agent.id] = ChatPanel(host, kind="sidebar")
                try:
                    panel.replay(agent.session.events)
                except Exception:  # the conversation from here on is what matters; the log keeps the rest
                    log.warning("dsh: could not show the session's earlier turns in the sidebar", exc_info=True)
            self._follow(panel, agent)
            return panel

    def _follow(self, panel: ChatPanel, agent: Any) -> None:
        """Keep ``panel`` showing ``agent``'s turns (a resumed session is a new agent object)."""
        if panel.followed is not agent:
            panel.follow(agent, on_turn=self.broadcast)

    def state(self) -> dict[str, Any]:
        host = self._host()
        panel = self.panel()
        agent = host.agent
        return {"kind": "state", "modelId": panel.model_id, "sessionId": agent.id if agent is not None else None,
                "busy": bool(host.busy) or panel.state.busy, "model": self.model, "models": model_choices(host)}

    # -- requests

    def send(self, text: str, model: str | None,
             returned: Callable[[str, str], None] | None = None) -> dict[str, Any]:
        """Send ``text`` from the sidebar: a turn on the agent thread (or a steer); its panel shows it.
        ``returned(text, why)`` is called when the prompt is refused later, before it reached the log."""
        if not text.strip():
            return {"kind": "error", "message": "nothing to send: the prompt box is empty; type a prompt first"}
        host = self._host()
        if model is not None:
            self.model = model
        panel = self.panel()
        if self.model is not None and not host.busy:
            host.current(self.model)  # checked before the prompt is recorded: a missing key says so
        submission = panel.submit(text)
        agent = host.agent
        if agent is not None:
            with self._lock:  # the fresh panel now belongs to the session its prompt created
                if self._fresh is panel:
                    self._fresh = None
                if self._panels.setdefault(agent.id, panel) is panel:
                    self._follow(panel, agent)
        if returned is not None:
            from ..ui.widgets.submission import one_line_error

            def refused(future: Any) -> None:
                error = None if future.cancelled() or submission.recorded.is_set() else future.exception()
                if error is not None:
                    returned(text, one_line_error(error, text))

            submission.future.add_done_callback(refused)
        submission.future.add_done_callback(lambda _future: self.broadcast())
        return {"kind": "sent", "mode": submission.mode}

    def choose_model(self, model: str | None) -> dict[str, Any]:
        """Use ``model`` for the sidebar's next prompts (checked now: an unknown spec or missing key says so)."""
        host = self._host()
        if model is not None:
            host.model_for(model)
            if host.agent is not None and not host.busy:
                host.current(model)
        self.model = model
        return self.state()

    def answer(self, data: Mapping[str, Any],
               returned: Callable[[str, str], None] | None = None) -> dict[str, Any] | None:
        """The answer to one browser message (``None`` for a message of an unknown kind); ``returned``: see
        :meth:`send`."""
        from ..ui.widgets.submission import one_line_error

        kind = data.get("kind")
        try:
            if kind == "bind":
                reply = self.state()
            elif kind == "send":
                text, model = data.get("text"), data.get("model")
                if not isinstance(text, str) or not (model is None or isinstance(model, str)):
                    return {"kind": "error", "message": "the prompt must be text"}
                reply = self.send(text, model or None, returned)
            elif kind == "model":
                model = data.get("model")
                if not (model is None or isinstance(model, str)):
                    return {"kind": "error", "message": "the model must be a model spec such as 'offline'"}
                reply = self.choose_model(model.strip() or None if model is not None else None)
            elif kind == "variables":
                from .frontend_comm import answer_variables

                reply = {"kind": "variables", **answer_variables(self._host(), dict(data))}
            else:
                return None
        except Exception as error:
            log.debug("dsh: the sidebar's %s request failed", kind, exc_info=True)
            text = data.get("text") if kind == "send" else ""
            return {"kind": "error", "message": one_line_error(error, text if isinstance(text, str) else "")}
        return reply

    # -- comms

    def opened(self, comm: Any, message: Any) -> None:
        """A sidebar connected: answer its messages on this comm until it closes."""
        from .approval import pin_replies

        def returned(text: str, why: str) -> None:
            try:
                comm.send({"kind": "returned", "text": text, "message": why})
            except Exception:
                log.debug("dsh: could not give a refused prompt back to its sidebar", exc_info=True)

        def received(msg: Any) -> None:
            content = msg.get("content") if isinstance(msg, dict) else None
            data = content.get("data") if isinstance(content, dict) else None
            if not isinstance(data, dict):
                return
            reply = self.answer(data, returned)
            if reply is not None:
                comm.send({**reply, "request": data.get("request")})

        def closed(_msg: Any) -> None:
            with self._lock:
                if comm in self._comms:
                    self._comms.remove(comm)

        # Its requests go to the main shell whichever thread last sent on it (a broadcast from a turn's
        # thread would otherwise send the next request to that thread's subshell, maybe gone by then).
        pin_replies(comm, None)
        comm.on_msg(received)
        comm.on_close(closed)
        with self._lock:
            self._comms.append(comm)
        received(message)

    def broadcast(self) -> None:
        """Tell every connected sidebar the current state (a turn ended: maybe a new session)."""
        try:
            state = self.state()
        except Exception:
            log.debug("dsh: could not read the sidebar's state", exc_info=True)
            return
        with self._lock:
            comms = list(self._comms)
        for comm in comms:
            try:
                comm.send(state)
            except Exception:
                log.debug("dsh: a sidebar comm is gone", exc_info=True)

    def close(self) -> None:
        with self._lock:
            panels = [*self._panels.values(), *([self._fresh] if self._fresh is not None else [])]
            self._panels.clear()
            self._fresh = None
            comms, self._comms = self._comms, []
        for comm in comms:
            try:
                comm.close()
            except Exception:
                log.debug("dsh: could not close a sidebar comm", exc_info=True)
        for panel in panels:
            panel.close()


def install_sidebar_comm(shell: Any, host: Callable[[], NotebookHost]) -> Callable[[], None]:
    """Register :data:`SIDEBAR_TARGET` on ``shell``'s kernel; returns a function that removes it and closes
    the sidebar's panels (nothing is registered outside a kernel)."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None or not hasattr(manager, "register_target"):
        return lambda: None
    chats = SidebarChats(host)
    manager.register_target(SIDEBAR_TARGET, chats.opened)

    def remove() -> None:
        targets = getattr(manager, "targets", None)
        if isinstance(targets, dict) and targets.get(SIDEBAR_TARGET) == chats.opened:
            del targets[SIDEBAR_TARGET]
        chats.close()

    return remove
