"""The notebook host: one per kernel. Owns the store, the current session's agent and the agent thread.

It adapts the host-independent core to a notebook: it decides send versus steer after preparation,
exports the session's ``DSH_*`` facts for the user's own ``!`` and ``%%bash`` cells, and offers the
small protocol the completer and widgets use (``candidates``, ``file_candidates``, ``submit_async``,
``busy``, ``cancel``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .config import DshSettings
from .runtime import AgentThread

if TYPE_CHECKING:
    import concurrent.futures

    from ..store.base import SessionLocation, SessionStore
    from ..agent import Agent
    from ..agent.events import AgentEvent
    from ..agent.submit import Submission
    from ..models.base import ModelProvider
    from ..query import SessionQuery
    from ..references import SessionReferenceResolver
    from ..tools.env import ShellEnvRegistry


class HostError(RuntimeError):
    """A problem the user can fix; its message is shown as one line in the cell."""


@dataclass
class SessionHandle:
    """``dsh`` in the notebook namespace: the current session's id and where its log lives."""

    host: NotebookHost

    @property
    def session_id(self) -> str | None:
        agent = self.host.agent
        return agent.id if agent is not None else None

    @property
    def location(self) -> SessionLocation | None:
        return self.host.locate()

    @property
    def path(self) -> str | None:
        location = self.location
        return location.path if location is not None else None

    @property
    def title(self) -> str | None:
        agent = self.host.agent
        return agent.title() if agent is not None else None

    def __repr__(self) -> str:
        if self.session_id is None:
            return "<dsh: no session yet; run a %%dsh cell to start one>"
        return f"<dsh session {self.session_id!r} at {self.path or '(no JSONL file: SQLite store)'}>"


class NotebookHost:
    """Everything one kernel needs to drive agents from cells."""

    def __init__(self, settings: DshSettings, shell: Any = None, cwd: str | None = None) -> None:
        self.settings = settings
        self.shell = shell
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.thread = AgentThread()
        self.agent: Agent | None = None
        self._store: SessionStore | None = None
        self._query: SessionQuery | None = None
        self._resolver: SessionReferenceResolver | None = None
        self._env: ShellEnvRegistry | None = None
        self._model: ModelProvider | None = None
        self._model_spec: str | None = None
        self._background: concurrent.futures.Future[Any] | None = None
        self._bash_tools: list[Any] = []
        self._catalog: Any = None
        self._catalog_started = False
        self._catalog_lock = threading.Lock()
        self.main_thread_calls: Any = None  # set by the magic while a foreground cell waits

    # -- configuration-derived services ---------------------------------------------------------------
    def sessions_root(self) -> Path:
        from ..store import default_sessions_dir

        if self.settings.sessions_dir.strip():
            return Path(os.path.expanduser(self.settings.sessions_dir)).resolve()
        return default_sessions_dir(self.cwd)

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            if self.settings.store == "sqlite":
                from ..store import SqliteStore

                path = self.settings.sqlite_path.strip() or os.path.join(self.cwd, ".dsh", "sessions.sqlite")
                self._check_writable(Path(path).parent)
                self._store = SqliteStore(os.path.expanduser(path))
            else:
                from ..store import JsonlStore

                root = self.sessions_root()
                self._check_writable(root)
                self._store = JsonlStore(root)
        return self._store

    @staticmethod
    def _check_writable(folder: Path) -> None:
        probe = folder
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        if not probe.is_dir() or not os.access(probe, os.W_OK):
            raise HostError(
                f"the session folder {folder} is not writable; set %config DshMagics.sessions_dir to a "
                "folder you can write to (or $DSH_SESSIONS_DIR)"
            )

    @property
    def query(self) -> SessionQuery:
        if self._query is None:
            from ..query import SessionQuery

            self._query = SessionQuery(self.store)
            if self.agent is not None:
                self._query.register_live(self.agent.session)
        return self._query

    @property
    def resolver(self) -> SessionReferenceResolver:
        if self._resolver is None:
            self._resolver = self.make_resolver(self.settings.max_reference_bytes or None)
        return self._resolver

    def make_resolver(self, max_reference_bytes: int | None) -> SessionReferenceResolver:
        """A reference service with the current settings (and the catalog, for JSONL stores)."""
        from ..references import SessionReferenceError, SessionReferenceResolver

        s = self.settings
        try:
            return SessionReferenceResolver(
                self.query, max_references=s.max_references, candidate_limit=s.candidate_limit,
                max_reference_bytes=max_reference_bytes, reference_context_fraction=s.reference_context_fraction,
                catalog=self.catalog,
            )
        except SessionReferenceError as exc:
            raise HostError(f"invalid reference settings: {exc}") from None

    @property
    def catalog(self) -> Any:
        """The cross-folder session catalog, or ``None`` (turned off, SQLite store, or unavailable)."""
        if not self.settings.catalog or self.settings.store != "jsonl":
            return None
        with self._catalog_lock:
            return self._open_catalog()

    def _open_catalog(self) -> Any:
        if self._catalog is None:
            from ..catalog import open_catalog

            try:
                self._catalog = open_catalog(self.settings.dsh_home or None)
            except Exception as exc:  # the catalog is an index: without it, reads fall back to the logs
                import logging

                logging.getLogger(__name__).warning("session catalog unavailable: %s", exc)
                return None
        if not self._catalog_started:
            self._catalog_started = True
            root = self.sessions_root()
            threading.Thread(target=self._index_store, args=(root,), name="dsh-catalog", daemon=True).start()
        return self._catalog

    def start_indexing(self) -> None:
        """Index this folder's store in the background (as the kernel starts: stores copied in are found)."""
        threading.Thread(target=lambda: self.catalog, name="dsh-catalog-open", daemon=True).start()

    def _index_store(self, root: Path) -> None:
        try:
            self._catalog.ensure_store(root, budget=None)
        except Exception as exc:
            import logging

            logging.getLogger(__name__).warning("could not index %s: %s", root, exc)

    def _catalog_note(self, agent: Agent, *, created: bool = False) -> None:
        """Tell the catalog about a session this kernel created, opened or just flushed."""
        catalog = self.catalog
        store = self._store
        if catalog is None or store is None or not hasattr(store, "root"):
            return
        try:
            if created:
                catalog.register_session(store.root, agent.id, notebook=os.environ.get("JPY_SESSION_NAME"))
            else:
                catalog.session_changed(store.root, agent.id)
        except Exception as exc:
            import logging

            logging.getLogger(__name__).warning("could not update the session catalog: %s", exc)

    #: Which derived services each setting feeds (anything else only changes the agent's own options).
    _STORE_SETTINGS = frozenset({"sessions_dir", "store", "sqlite_path"})
    _MODEL_SETTINGS = frozenset({"model", "base_url", "api_key_env", "context_window"})

    def settings_changed(self, name: str) -> None:
        """Apply a ``%config`` change: later reads, prompts and sessions use it; a running turn is left alone.

        A changed store or model applies to the next session (``%dsh new``) and, for the model, to the next
        prompt; agent options (placement, tools, hooks, limits) apply to the current session's next prompt.
        """
        self._resolver = None
        if name in self._STORE_SETTINGS:
            self._store = None
            self._query = None
        if name in self._MODEL_SETTINGS:
            self._model = None
            self._model_spec = None
        if name in ("dsh_home", "catalog"):
            self._env = None
            self._catalog = None
            self._catalog_started = False
        agent = self.agent
        if agent is not None and not agent.busy and name not in self._STORE_SETTINGS | self._MODEL_SETTINGS:
            agent.config = self._agent_config()
            agent.tools = self._tools()
            agent.hooks = self._hooks()

    @property
    def env_registry(self) -> ShellEnvRegistry:
        if self._env is None:
            from ..tools.env import ShellEnvRegistry

            self._env = ShellEnvRegistry(self.settings.dsh_home or None)
        return self._env

    def dsh_home(self) -> str:
        from ..tools.home import resolve_dsh_home

        return str(resolve_dsh_home(self.settings.dsh_home or None))

    # -- models ---------------------------------------------------------------------------------------
    def model_for(self, spec: str | None) -> tuple[ModelProvider, str | None]:
        """The provider for ``spec`` (or the configured/default one) and a notice to show, if any."""
        from ..models.registry import default_model_spec, resolve_model

        notice = None
        wanted = (spec or self.settings.model or "").strip()
        if not wanted:
            wanted, notice = default_model_spec(os.environ)
        if self._model is not None and self._model_spec == wanted:
            return self._model, None
        from ..models.base import ModelError

        try:
            provider = resolve_model(
                wanted, base_url=self.settings.base_url or None, api_key_env=self.settings.api_key_env or None,
                context_window=self.settings.context_window or None,
            )
        except ModelError as exc:
            raise HostError(str(exc)) from None
        key_present = getattr(provider, "key_present", None)
        if key_present is not None and not key_present():
            variable = getattr(provider, "api_key_env", None) or "the API key variable"
            raise HostError(
                f"${variable} is not set, so the model {wanted!r} cannot be used; set it in the kernel's "
                "environment, or use the keyless offline model (%%dsh --model offline)"
            )
        self._model, self._model_spec = provider, wanted
        return provider, notice

    # -- sessions -------------------------------------------------------------------------------------
    def _tools(self) -> Any:
        from ..tools.base import ToolRegistry

        registry = ToolRegistry()
        if self.settings.bash_tool:
            from ..tools.bash import BashTool

            bash = BashTool(self.env_registry, default_timeout=self.settings.bash_timeout)
            self._bash_tools.append(bash)
            registry.register(bash)
            registry.register(bash.companion())
        if self.settings.python_tool and self.shell is not None:
            from .python_tool import PythonTool

            registry.register(PythonTool(self))
        return registry

    def _hooks(self) -> Any:
        bridges = []
        if self.settings.claude_hooks.strip():
            from ..tools.hooks import ClaudeCodeHooks

            bridges.append(ClaudeCodeHooks(os.path.expanduser(self.settings.claude_hooks)))
        if self.settings.codex_hooks.strip():
            from ..tools.hooks import CodexHooks

            bridges.append(CodexHooks(os.path.expanduser(self.settings.codex_hooks)))
        if not bridges:
            return None
        from ..tools.hooks import HookRunner

        return HookRunner(bridges)

    def _agent_config(self) -> Any:
        from ..agent import AgentConfig
        from ..agent.loop import DEFAULT_SYSTEM_PROMPT

        s = self.settings
        return AgentConfig(
            system_prompt=s.system_prompt or DEFAULT_SYSTEM_PROMPT, placement=s.placement, max_steps=s.max_steps,
            auto_compact_fraction=s.auto_compact_fraction or None, model_titles=s.model_titles,
        )

    def _install(self, agent: Agent) -> Agent:
        if self.agent is not None and self.agent is not agent:
            self._retire(self.agent)
        self.agent = agent
        self.query.register_live(agent.session)
        agent.subscribe(self._on_agent_event)
        self._catalog_note(agent, created=True)
        self.export_env()
        return agent

    def _on_agent_event(self, event: Any) -> None:
        from ..agent import events as ev

        if isinstance(event, (ev.TurnEnded, ev.TitleChanged)) and self.agent is not None:
            self._catalog_note(self.agent)

    def _retire(self, agent: Agent) -> None:
        if agent.busy:
            raise HostError("the current session is still running a turn; wait for it or interrupt it first")
        self.query.unregister_live(agent.id)
        if agent.writer is not None:
            try:
                agent.writer.close()
            except Exception as exc:  # the session stays readable up to its last flush
                import logging

                logging.getLogger(__name__).warning("could not close session %s cleanly: %s", agent.id, exc)

    def new_session(self, model: str | None = None) -> tuple[Agent, str | None]:
        from ..agent import Agent
        from ..session import SessionHeader, SessionLog

        provider, notice = self.model_for(model)
        header = SessionHeader.new(self.cwd)

        agent = Agent(SessionLog(header), self.store.create(header), self.store, provider, tools=self._tools(),
                      hooks=self._hooks(), config=self._agent_config())
        return self._install(agent), notice

    def resume(self, session_id: str, model: str | None = None) -> tuple[Agent, str | None]:
        from ..agent import Agent
        from ..session import SessionError, SessionNotFoundError

        if self.agent is not None and self.agent.id == session_id:
            return self.agent, None
        provider, notice = self.model_for(model)
        try:
            log, writer = self.store.open(session_id)
        except SessionNotFoundError:
            raise HostError(
                f"no session {session_id!r} in {self.sessions_root()}; list them with %dsh sessions"
            ) from None
        except SessionError as exc:
            raise HostError(str(exc)) from None
        agent = Agent(log, None, self.store, provider, tools=self._tools(), hooks=self._hooks(),
                      config=self._agent_config())
        agent.writer = writer
        return self._install(agent), notice

    def current(self, model: str | None = None) -> tuple[Agent, str | None]:
        """The current session's agent, created lazily; switching model keeps the session."""
        if self.agent is None:
            return self.new_session(model)
        notice = None
        if model:
            provider, notice = self.model_for(model)
            self.agent.model = provider
        return self.agent, notice

    def find_session(self, text: str) -> str:
        """A session id from an id, a unique id prefix or an exact title."""
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        records = self.query.list_sessions()
        ids = [r.id for r in records]
        if text in ids:
            return text
        prefixed = [i for i in ids if i.startswith(text)]
        if len(prefixed) == 1:
            return prefixed[0]
        titled = [i for i in ids if self.query.title(i) == text]
        if len(titled) == 1:
            return titled[0]
        if len(prefixed) > 1 or len(titled) > 1:
            raise HostError(f"{text!r} matches several sessions; use more of the id (see %dsh sessions)")
        raise HostError(f"no session matches {text!r}; list them with %dsh sessions")

    def locate(self) -> SessionLocation | None:
        return self.store.locate(self.agent.header) if self.agent is not None else None

    def export_env(self) -> None:
        """Give the user's own ``!`` and ``%%bash`` cells this session's managed facts."""
        if not self.settings.export_env:
            return
        os.environ["DSH_HOME"] = self.dsh_home()
        if self.agent is None:
            return
        os.environ["DSH_SESSION_ID"] = self.agent.id
        location = self.locate()
        if location is not None and location.kind == "jsonl":
            os.environ["DSH_SESSION_JSONL"] = location.path
        else:
            os.environ.pop("DSH_SESSION_JSONL", None)

    def env_values(self) -> dict[str, str]:
        """The managed values a tool call of the current session would get."""
        agent = self.agent
        if agent is None:
            from ..tools.base import ToolExecution

            execution = ToolExecution.create("env", self.cwd)
        else:
            execution = agent.execution("env")
        return dict(self.env_registry.collect(execution))

    # -- background turns ----------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.agent is not None and self.agent.busy

    def track_background(self, future: concurrent.futures.Future[Any]) -> None:
        self._background = future

    @property
    def background(self) -> concurrent.futures.Future[Any] | None:
        """The latest background turn's future (``None`` when none was started)."""
        return self._background

    def cancel(self) -> None:
        if self.agent is not None:
            self.agent.cancel()

    # -- protocol for completion and widgets ------------------------------------------------------------
    def target(self, *, include_current: bool = False) -> Any:
        from ..references import ReferenceTarget

        if self.agent is not None and not include_current:
            return ReferenceTarget(self.agent.id, self.agent.cwd, self.store.session_dir(self.agent.header),
                                   self.agent.model.info.context_window)
        # No session yet: an id that cannot name a stored session (stores never hold a NUL-only id).
        return ReferenceTarget("\x00dsh-no-session", self.cwd)

    def candidates(self, query: str = "", limit: int | None = None, *,
                   include_current: bool = False, body: bool = False) -> list[dict[str, Any]]:
        """Sessions to mention, in rank order (the current session is left out unless asked for).
        ``body`` also matches message text (needs the catalog)."""
        found = self.resolver.list_candidates(self.target(include_current=include_current), query, limit,
                                              body=body)
        return [candidate.to_remote_json() for candidate in found]

    def file_candidates(self, query: str = "", limit: int = 50) -> list[str]:
        folder, _, prefix = query.rpartition("/")
        base = Path(self.cwd, folder) if folder else Path(self.cwd)
        try:
            base = base.resolve()
            base.relative_to(Path(self.cwd).resolve())
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except (OSError, ValueError):
            return []
        out: list[str] = []
        for entry in entries:
            if entry.name.startswith(".") and not prefix.startswith("."):
                continue
            if not entry.name.lower().startswith(prefix.lower()):
                continue
            rel = f"{folder}/{entry.name}" if folder else entry.name
            out.append(rel + "/" if entry.is_dir() else rel)
            if len(out) >= limit:
                break
        return out

    def submit_async(self, text: str, listener: Callable[[AgentEvent], None] | None = None,
                     model: str | None = None) -> concurrent.futures.Future[Submission]:
        """Prepare ``text`` and send it (idle) or steer it into the running turn (busy)."""
        agent, _ = self.current(model)
        from ..agent.submit import submit

        dispose = agent.subscribe(listener) if listener is not None else None

        async def run() -> Submission:
            try:
                return await submit(agent, text, self.resolver)
            finally:
                if dispose is not None:
                    dispose()

        future = self.thread.submit(run())
        if not agent.busy:
            self.track_background(future)
        return future

    def close(self) -> None:
        if self.agent is not None:
            try:
                self._retire(self.agent)
            except HostError:
                self.agent.cancel()
        for bash in self._bash_tools:  # background jobs outlive turns, not the kernel's extension
            try:
                self.thread.run(bash.jobs.stop_all(), timeout=10)
            except Exception:
                pass
        model = self._model
        if model is not None:
            try:
                self.thread.run(model.close(), timeout=10)
            except Exception:
                pass
        self.thread.stop()
