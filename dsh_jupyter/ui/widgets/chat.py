"""The streaming transcript widget of a chat panel (view: ``static/chat.js``): header, Stop and items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import traitlets
from anywidget.experimental import command

from ..assets import STATIC
from .submission import one_line_error


class ChatTranscript(anywidget.AnyWidget):
    """The streaming transcript view of a :class:`ChatPanel`: header (title, session, model, status, Stop) and items.

    ``variant`` ``"pick"`` (under a ``%dsh pick`` prompt box) shows nothing until the first prompt is sent.
    """

    _esm = STATIC / "chat.js"
    _css = STATIC / "widgets.css"

    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    #: Short session id, model and status word, shown after the title.
    details = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: ``idle``, ``running`` or ``error`` (styles the status badge).
    status = traitlets.Unicode("idle").tag(sync=True)
    variant = traitlets.Unicode("chat").tag(sync=True)
    #: The model id of the panel whose output the view keeps up to date in the notebook document.
    panel_id = traitlets.Unicode("").tag(sync=True)
    #: The panel's static copy (``text/html`` and ``text/plain``), for the view to write into that output.
    copy_html = traitlets.Unicode("").tag(sync=True)
    copy_text = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *, on_stop: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_stop = on_stop

    @command
    def stop_command(self, msg: Any, buffers: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """View → kernel: the Stop button."""
        if self._on_stop is None:
            return {"error": "nothing to stop"}, []
        try:
            self._on_stop()
        except Exception as error:
            return {"error": one_line_error(error)}, []
        return {"ok": True}, []
