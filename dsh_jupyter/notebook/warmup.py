"""Warming the first prompt: what the first ``%%dsh`` turn would load, loaded in the background instead.

``%load_ext dsh_jupyter`` stays light: the agent loop, the tools, the models, the stores, references and the
Markdown renderer are imported on first use. Without more, that first use is the user's first prompt, which
then pays for all of it. Once the cell that loaded the extension has finished (IPython's ``post_run_cell``),
a daemon thread imports those modules and builds the renderer's parser and sanitisers, while the user is
typing. It also builds the secret masker's list of values (it reads the environment's names once), and starts
the agent thread's event loop, which the first prompt would otherwise start while the user waits. Then it
starts the catalog's background indexing, which the next cell would start anyway (so the first prompt does not
wait for the indexer to let go of the catalog). It does nothing else: no session is created, no file written,
no network reached.

A prompt that arrives while the warm-up still runs waits for it (:func:`wait`) instead of doing the same
work beside it, so nothing is paid twice; Python's import locks make the two safe either way. A failure in
the warm-up is only logged: the prompt then imports what it needs itself, and reports any error as usual.
``%config DshMagics.warm_up = False`` (in the loading cell, or ``c.DshMagics.warm_up`` in a config file)
turns it off.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: What the first turn imports, by the modules that pull the rest in (``tests/test_notebook_warmup.py``
#: checks that a first turn after the warm-up imports no module of ours, or mistune or nh3, beyond these).
FIRST_TURN_MODULES = (
    "dsh_jupyter.agent", "dsh_jupyter.agent.submit", "dsh_jupyter.agent.prompt_submit",
    "dsh_jupyter.agent.compaction", "dsh_jupyter.session.titles",
    "dsh_jupyter.models.registry", "dsh_jupyter.models.offline", "dsh_jupyter.models.openai_compat",
    "dsh_jupyter.models.local",
    "dsh_jupyter.store", "dsh_jupyter.store.jsonl", "dsh_jupyter.store.sqlite", "dsh_jupyter.store.postgres",
    "dsh_jupyter.catalog", "dsh_jupyter.catalog.registry", "dsh_jupyter.catalog.worker",
    "dsh_jupyter.query", "dsh_jupyter.sources.registry", "dsh_jupyter.sources.claude", "dsh_jupyter.sources.codex",
    "dsh_jupyter.references", "dsh_jupyter.references.resolver", "dsh_jupyter.references.mentions",
    "dsh_jupyter.tools", "dsh_jupyter.tools.bash", "dsh_jupyter.tools.env",
    "dsh_jupyter.notebook.approval", "dsh_jupyter.notebook.python_tool",
    "dsh_jupyter.workspace.notebook_tools", "dsh_jupyter.workspace.variables",
    "dsh_jupyter.workspace.variable_refs", "dsh_jupyter.workspace.cell_refs",
    "dsh_jupyter.workspace.edits",
    "dsh_jupyter.mcp_client.clients",  # every prompt asks it for the MCP servers (the SDK stays unloaded)
    "dsh_jupyter.ui.render", "dsh_jupyter.ui.coalescer", "dsh_jupyter.conversation.fold",
    "dsh_jupyter.agent.transcript_feed", "dsh_jupyter.ui.approval_choices", "dsh_jupyter.ui.markdown",
    # third-party modules the store and the scanner load on first use
    "filelock", "simdjson", "secrets", "decimal",
)


def _warm(ip: Any, then: Callable[[], None], start_loop: Callable[[], object]) -> None:
    for name in FIRST_TURN_MODULES:
        importlib.import_module(name)
    from ..secrets import default_masker
    from ..ui.markdown import markdown_html, safe_html

    markdown_html("**warm** `up`")  # builds the parser and the sanitiser once (both are cached)
    safe_html("<b>warm</b>")
    _ = ip.display_formatter.formatters  # IPython builds its formatters on the first display: the turn's first
    default_masker().values()  # every logged event is masked: the first one would build the list
    start_loop()
    then()


class _WarmUp:
    """The one warm-up of this process (imports are process-wide, so one is enough)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, work: Callable[[], None]) -> bool:
        """Run ``work`` in the warm-up thread unless one was started before; whether this call started it."""
        with self._lock:
            if self._thread is not None:
                return False
            self._thread = threading.Thread(target=self._run, args=(work,), name="dsh-warm-up", daemon=True)
        self._thread.start()
        return True

    @staticmethod
    def _run(work: Callable[[], None]) -> None:
        try:
            work()
        except Exception:  # the first prompt then loads (and reports) it itself
            log.debug("the first-prompt warm-up stopped early", exc_info=True)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def wait(self) -> None:
        """Return once the warm-up has finished (at once when it never started, or from the thread itself)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()


_WARM_UP = _WarmUp()


def wait() -> None:
    """Let a prompt that arrives during the warm-up wait for it rather than import the same modules beside it."""
    _WARM_UP.wait()


def start_after_cell(ip: Any, enabled: Callable[[], bool], *, then: Callable[[], None] = lambda: None,
                     start_loop: Callable[[], object] = lambda: None) -> Callable[[], None]:
    """Start the warm-up when the current cell (the one loading the extension) has run, if ``enabled()`` then
    says so; ``start_loop`` (starting the agent thread's loop) and then ``then`` run in the thread after the
    imports. Returns the disposer that unregisters the hook if it has not fired yet."""

    def after_cell(*_: Any) -> None:
        dispose()
        if enabled():
            _WARM_UP.start(lambda: _warm(ip, then, start_loop))

    def dispose() -> None:
        with contextlib.suppress(ValueError):  # it fired already
            ip.events.unregister("post_run_cell", after_cell)

    ip.events.register("post_run_cell", after_cell)
    return dispose
