"""The notebook host: one per kernel. Owns the current session's agent and the agent thread.

It adapts the host-independent core to a notebook: the session parts come from one
:class:`~dsh_jupyter.services.Services` (the same wiring the server and the CLI use); sessions are created
and resumed through the agent's own constructors (so ``SessionStart`` hooks fire once, with the right
source); prompts go through the agent layer's one submit path; and the session's ``DSH_*`` facts are
exported for the user's own ``!`` and ``%%bash`` cells. Widgets and the completer use the small protocol in
:mod:`dsh_jupyter.notebook.protocols`.

Deferred imports: the agent, the models, the tools, the references, the store errors and the workspace
tools load when the first ``%%dsh`` cell builds its session (or the first completion needs them), so
``%load_ext dsh_jupyter`` stays under 150 ms (``benchmarks/bench_notebook.py``).

Why one module of over 700 lines: it is one class, the kernel's composition point, and most of its methods
are a few lines that hand a part to the cells, widgets and comms. What has a rule of its own already lives
elsewhere (sessions and their parts in ``services``, turns in ``agent``, approvals in :mod:`.approval`, cells in
``workspace``); splitting the class would spread the one current-session lifecycle (new, resume, leave,
close) over modules that each need all of it.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..services import ServiceError, Services, ServiceSettings
from ..ui.messages import session_name
from ..workspace.cell_runner import CellRunner
from ..workspace.kernel_record import KernelRecord
from ..workspace.live_document import with_proposals
from .config import DshSettings
from .runtime import AgentThread

if TYPE_CHECKING:
    from ..agent import Agent, AgentConfig
    from ..agent.approvals import ApprovalPolicy, Approver
    from ..agent.events import AgentEvent
    from ..agent.prompt_submit import Decision, Next, PromptSubmission
    from ..agent.submit import Submission
    from ..mcp_client.clients import McpClients, McpSettings
    from ..models.base import ModelProvider
    from ..models.facts import Prices
    from ..query import SessionQuery
    from ..references import ReferenceTarget, SessionReferenceResolver
    from ..references.candidates import RemoteCandidateJson
    from ..references.variables import VariableSnapshots
    from ..store.base import SessionLocation, SessionStore
    from ..tools.base import ToolRegistry
    from ..tools.env import ProcessEnv, ShellEnvRegistry
    from ..tools.hooks import HookRunner
    from ..workspace.cell_refs import NotebookCells
    from ..workspace.cell_runner import ExecutedCell
    from ..workspace.notebook_tools import LiveSource, Workspace
    from ..workspace.variables import VariableCandidate

log = logging.getLogger(__name__)
_T = TypeVar("_T")


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


#: Settings that only change how the current agent behaves (applied to it when it is idle).
_MODEL_SETTINGS = frozenset({"model", "base_url", "api_key_env", "context_window", "model_images", "model_prices"})
#: Settings of the session's approval policy (applied at once, even to a running turn's next call).
_APPROVAL_SETTINGS = frozenset({"approval", "approval_timeout"})
#: Settings whose change changes what :meth:`NotebookHost.export_env` gives the kernel.
_ENV_SETTINGS = frozenset({"export_env", "dsh_home"})


class NotebookHost:
    """Everything one kernel needs to drive agents from cells."""

    def __init__(self, settings: DshSettings, shell: Any = None, cwd: str | None = None) -> None:
        self.settings = settings
        self.shell = shell
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.services = Services(ServiceSettings.from_config(settings, self.cwd))
        self.thread = AgentThread()
        self.agent: Agent | None = None
        self._model: ModelProvider | None = None
        self._model_spec: str | None = None
        #: Model settings changed by ``%config`` since the current agent got its model (applied to its next turn).
        self._model_changes: set[str] = set()
        self._background: concurrent.futures.Future[Any] | None = None
        self._bash_tools: list[Any] = []
        self._disposers: list[Callable[[], None]] = []
        self.main_thread_calls: Any = None  # set by the magic while a foreground cell waits
        self._approver: Approver | Literal[False] | None = None  # False: nobody can be asked here
        #: One lock for agent code run in the kernel off its main thread (python tool, notebook_run in --bg).
        self.kernel_lock = threading.Lock()
        #: The kernel's record of executed cells (installed at %load_ext: :meth:`install_kernel_record`).
        self.kernel_record: KernelRecord | None = None
        self.cell_runner: CellRunner | None = None
        #: The live notebook's source (set by the live document module when the frontend extension connects).
        self.live_source: LiveSource | None = None
        self._workspace: Workspace | None = None
        self._process_env: ProcessEnv | None = None
        self._mcp: McpClients | None = None

    # -- configuration-derived services (one wiring: dsh_jupyter.services) ------------------------------
    @property
    def store(self) -> SessionStore:
        return self._service(lambda: self.services.store)

    @property
    def query(self) -> SessionQuery:
        query = self._service(lambda: self.services.query)
        if self.agent is not None:
            query.register_live(self.agent.session)
        return query

    @property
    def resolver(self) -> SessionReferenceResolver:
        return self._service(lambda: self.services.resolver)

    def make_resolver(self, max_reference_bytes: int | None, *, option: str = "--budget") -> SessionReferenceResolver:
        """A reference service with another per-reference budget (``option``: what the user typed)."""
        return self._service(lambda: self.services.make_resolver(max_reference_bytes, option=option))

    def resolver_for(self, agent: Agent | None, budget: int | None = None) -> SessionReferenceResolver:
        """The reference service for a prompt of ``agent``: ``budget`` (``--budget``) when given, the configured
        budget when set, else the automatic one, fitted to a small model's window (see
        :func:`~dsh_jupyter.references.budget.window_fitted_budget`)."""
        if budget is not None:
            return self.make_resolver(budget, option="--budget")
        if agent is None or self.settings.max_reference_bytes:
            return self.resolver
        from ..references.budget import window_fitted_budget

        fitted = window_fitted_budget(agent.model.info.context_window, self.settings.reference_context_fraction)
        return self.resolver if fitted is None else self.make_resolver(fitted, option="the automatic budget")

    @property
    def catalog(self) -> Any:
        """The cross-folder session catalog, or ``None`` (turned off, SQLite store, or unavailable)."""
        return self.services.catalog

    @property
    def env_registry(self) -> ShellEnvRegistry:
        return self.services.env_registry

    def sessions_root(self) -> Path:
        return self.services.sessions_root()

    def dsh_home(self) -> str:
        return self.services.dsh_home()

    def start_indexing(self) -> None:
        """Index this folder's store in the background (as the kernel starts: stores copied in are found)."""
        self.services.start_indexing()

    @staticmethod
    def _service(build: Callable[[], _T]) -> _T:
        try:
            return build()
        except ServiceError as exc:
            from ..references import SessionReferenceError
            from ..ui.messages import describe

            cause = exc.__context__  # a reference setting the service refused: say which, as it is typed
            raise HostError(describe(cause) if isinstance(cause, SessionReferenceError) else str(exc)) from None

    def settings_changed(self, name: str) -> str | None:
        """Apply a ``%config`` change: later reads, prompts and sessions use it; a running turn is left alone.

        A changed store applies to the next session (``%dsh new``); a changed model to the current session's
        next turn (:meth:`current`); agent options (placement, tools, hooks, limits) to its next prompt.
        Returns a line for the user when the change cannot apply at once (a turn is running), else ``None``.
        """
        changed = self.services.configure(ServiceSettings.from_config(self.settings, self.cwd))
        if self._mcp is not None and (name.startswith("mcp_") or name == "dsh_home"):
            self._mcp.configure(self.mcp_settings())  # read at the next prompt
        if name.startswith("mcp_"):
            return None
        if name in _ENV_SETTINGS:
            try:
                self.export_env()
            except Exception as exc:  # a bad home is reported where it is used; the setting itself is kept
                log.warning("could not export the managed variables after %s changed: %s", name, exc)
        agent = self.agent
        if name in _MODEL_SETTINGS:
            self._model = None
            self._model_spec = None
            if agent is not None:
                self._model_changes.add(name)
                if agent.busy:
                    return (f"{self._said_model_settings()} applies from the next turn; the running turn keeps "
                            f"{agent.model.info.model}")
            return None
        if agent is not None and name in _APPROVAL_SETTINGS:  # the session's grants stay
            agent.approvals.mode = self.settings.approval
            agent.approvals.timeout = self.settings.approval_timeout
            return None
        if agent is not None and not agent.busy and not changed & {
                "store", "sessions_dir", "sqlite_path", "postgres_dsn"}:
            agent.config = self._agent_config()
            agent.tools = self._tools()
            agent.hooks = self._hooks()
        return None

    def _said_model_settings(self) -> str:
        """The changed model settings as the user typed them (``DshMagics.model = 'gpt-4o'``)."""
        return ", ".join(f"DshMagics.{name} = {getattr(self.settings, name)!r}" for name in sorted(self._model_changes))

    def _apply_model_changes(self, agent: Agent) -> str | None:
        """Give ``agent`` (idle) the model the changed settings name; the notice saying so, or a
        :class:`HostError` in one line (what was set, why it cannot apply, what to do) that sends nothing."""
        said = self._said_model_settings()
        before = agent.model.info.model
        try:
            provider, _ = self.model_for(None)
        except HostError as exc:
            raise HostError(f"{said} cannot take effect, so nothing was sent: {exc} (or set it back to keep "
                            f"{before})") from None
        self._model_changes.clear()
        if provider is agent.model:
            return None
        agent.model = provider
        return f"{said}: this session answers with {provider.info.model} from this turn on (before: {before})."

    # -- models ---------------------------------------------------------------------------------------
    def model_spec(self, spec: str | None = None) -> tuple[str, str | None]:
        """The model spec a new session would use (``spec``, else the ``model`` setting, else the default:
        DeepSeek with a key, else offline) and the notice that explains a default choice."""
        from ..models.registry import default_model_spec

        wanted = (spec or self.settings.model or "").strip()
        if wanted:
            return wanted, None
        return default_model_spec(os.environ)

    def model_for(self, spec: str | None) -> tuple[ModelProvider, str | None]:
        """The provider for ``spec`` (or the configured/default one) and a notice to show, if any."""
        from ..models.base import ModelError
        from ..models.registry import resolve_model

        wanted, notice = self.model_spec(spec)
        if self._model is not None and self._model_spec == wanted:
            return self._model, None
        try:
            provider = resolve_model(
                wanted, base_url=self.settings.base_url or None, api_key_env=self.settings.api_key_env or None,
                context_window=self.settings.context_window or None,
                accepts_images={"yes": True, "no": False}.get(self.settings.model_images.lower()),
                prices=self._prices_for(wanted),
            )
        except ModelError as exc:
            from ..ui.messages import Said, model_error_message

            raise HostError(model_error_message(exc, Said(options={"--model": spec} if spec else {}))) from None
        key_present = getattr(provider, "key_present", None)
        if key_present is not None and not key_present():
            variable = getattr(provider, "api_key_env", None) or "the API key variable"
            raise HostError(
                f"${variable} is not set, so the model {wanted!r} cannot be used; set it in the kernel's "
                "environment, or use the keyless offline model (%%dsh --model offline)"
            )
        self._model, self._model_spec = provider, wanted
        return provider, notice

    def _prices_for(self, spec: str) -> Prices | None:
        """The ``model_prices`` setting's prices of ``spec`` (``None``: not set for it)."""
        from ..models.facts import parse_prices

        given = self.settings.model_prices
        value = given.get(spec)
        if value is None and ":" in spec:  # "ollama:llama3.1" priced as "llama3.1"
            value = given.get(spec.partition(":")[2])
        return None if value is None else parse_prices(spec, value)

    # -- what a new agent gets ------------------------------------------------------------------------
    def _tools(self) -> ToolRegistry:
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

            registry.register(PythonTool(self, lock=self.kernel_lock))
        if self.settings.notebook_tools and self.shell is not None:
            from ..workspace.notebook_tools import notebook_tools

            for tool in notebook_tools(self.workspace):
                registry.register(tool)
        if self.settings.variables_tool and self.shell is not None:
            from ..workspace.variables import VariablesTool

            registry.register(VariablesTool(self.shell))
        return registry

    # -- the notebook as the agent's workspace --------------------------------------------------------
    @property
    def workspace(self) -> Workspace:
        """The document the notebook tools use: the live notebook when connected, else the kernel record."""
        if self._workspace is None:
            from ..workspace.notebook_tools import Workspace

            self._workspace = Workspace(self)
        return self._workspace

    def install_kernel_record(self) -> Callable[[], None]:
        """Start recording the cells this kernel executes (once); returns the disposer that stops it."""
        if self.shell is None:
            return lambda: None
        record = self.kernel_record
        if record is None:
            record = self.kernel_record = KernelRecord(self.shell)
            record.runner = self.cell_runner = CellRunner(record, self, self.kernel_lock)
        record.install()
        return record.uninstall

    def execute_cell(self, source: str, cell_id: str | None, timeout: float) -> ExecutedCell:
        """Run ``source`` as the cell ``cell_id`` (see :func:`~.workspace.cell_runner.execute_cell`), on the right
        thread: the kernel's main thread while a foreground cell waits, else under :attr:`kernel_lock`."""
        runner = self.cell_runner
        if runner is None:
            raise HostError("cells can only be run once the extension is loaded (%load_ext dsh_jupyter)")
        return runner.execute(source, cell_id, timeout)

    # -- MCP servers: their tools join the agent's before each prompt ------------------------------------
    def mcp_settings(self) -> McpSettings:
        from ..mcp_client.clients import McpSettings
        from ..mcp_client.config import USER_FILE
        from ..mcp_client.trust import TRUST_FILE

        s = self.settings
        user = os.path.expanduser(s.mcp_config_file) if s.mcp_config_file.strip() else None
        project = s.mcp_project_file.strip()
        allowlist = s.mcp_stdio_command_allowlist
        return McpSettings(
            user_file=Path(user) if user else Path(self.dsh_home()) / USER_FILE,
            project_file=Path(self.cwd, os.path.expanduser(project)) if project else None,
            trust_file=Path(self.dsh_home()) / TRUST_FILE,
            servers=dict(s.mcp_servers), connect_timeout=s.mcp_connect_timeout, call_timeout=s.mcp_call_timeout,
            allowlist=tuple(allowlist) if allowlist is not None else None, cwd=self.cwd)

    @property
    def mcp(self) -> McpClients:
        """This kernel's MCP servers (none started until a prompt or ``%dsh mcp --connect`` needs them)."""
        if self._mcp is None:
            from ..mcp_client.clients import McpClients

            self._mcp = McpClients(AgentThread("dsh-mcp"), self.mcp_settings())
            atexit.register(self._mcp.close)  # a stdio server's process ends with the kernel's
        return self._mcp

    def _mcp_listener(self, agent: Agent) -> Callable[[PromptSubmission, Next], Any]:
        """Before each prompt of ``agent``: its MCP tools brought up to date, problems shown in the turn."""
        async def prepare(submission: PromptSubmission, proceed: Next) -> Decision:
            try:
                lines = await self.mcp.prepare(agent.tools, stopped=lambda: agent.stopping)
            except Exception as exc:  # the prompt goes on with the tools it has
                lines = [f"MCP servers could not be prepared: {type(exc).__name__}: {exc}"]
            for line in lines:
                agent.notice(line, "warning")
            return await proceed(submission)

        return prepare

    def _hooks(self) -> HookRunner | None:
        bridges: list[Any] = []
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

    def _agent_config(self) -> AgentConfig:
        from ..agent import AgentConfig
        from ..agent.config import DEFAULT_SYSTEM_PROMPT

        s = self.settings
        return AgentConfig(
            system_prompt=s.system_prompt or DEFAULT_SYSTEM_PROMPT, placement=s.placement, max_steps=s.max_steps,
            auto_compact_fraction=s.auto_compact_fraction or None, model_titles=s.model_titles,
            notebook=os.environ.get("JPY_SESSION_NAME"),
        )

    def _approvals(self) -> ApprovalPolicy:
        """A fresh policy for a new or resumed session: grants "for this session" end with it."""
        from ..agent.approvals import ApprovalPolicy

        return ApprovalPolicy(self.settings.approval, self.approver,
                              timeout=self.settings.approval_timeout)

    @property
    def approver(self) -> Approver | None:
        """How this kernel asks a person: a widget in the cell, a prompt on stdin, or nobody."""
        if self._approver is None:
            from .approval import approver_for

            approver = approver_for(self.shell, self)
            if approver is not None and self.live_source is not None:  # notebook edits: proposals in the notebook
                approver = with_proposals(approver, self.live_source)
            self._approver = approver or False
        return self._approver or None

    def page_connected(self) -> bool:
        """Whether a notebook page with dsh's extension is connected to this kernel now (a person is looking)."""
        return bool(getattr(self.live_source, "connected", 0))

    def approval_slot(self, *, background: bool) -> None:
        """Before a turn starts (main thread): reserve the place in the cell where its questions appear."""
        approver = self.approver
        prepare = getattr(approver, "prepare_cell", None)
        if prepare is not None and (self.settings.approval != "auto" or self._hooks_configured()):
            prepare(background=background)

    def approval_slot_in(self, place: Callable[[Any], None]) -> None:
        """Before a widget's turn starts (main thread): its questions appear in a widget ``place`` shows."""
        prepare = getattr(self.approver, "prepare_panel", None)
        if prepare is not None and (self.settings.approval != "auto" or self._hooks_configured()):
            prepare(place)

    def _hooks_configured(self) -> bool:
        return bool(self.settings.claude_hooks.strip() or self.settings.codex_hooks.strip())

    def _agent_options(self) -> dict[str, Any]:
        return {"tools": self._tools(), "hooks": self._hooks(), "config": self._agent_config(),
                "approvals": self._approvals()}

    # -- sessions -------------------------------------------------------------------------------------
    def _install(self, agent: Agent, *, created: bool) -> Agent:
        self.agent = agent
        self._model_changes.clear()  # its model was resolved from the settings as they are now
        self.query.register_live(agent.session)
        self._disposers.append(agent.subscribe(self._on_agent_event))
        self._disposers.append(agent.prompt_submit.add(self._mcp_listener(agent)))
        self.services.note_session(agent.id, created=created, notebook=os.environ.get("JPY_SESSION_NAME"))
        self.export_env()
        return agent

    def _on_agent_event(self, event: AgentEvent) -> None:
        from ..agent import events as ev

        if isinstance(event, ev.TurnEnded | ev.TitleChanged) and self.agent is not None:
            self.services.note_session(self.agent.id)

    def _leave_current(self, *, discard: bool = False) -> None:
        """Close the current session before another becomes current; never drops unsaved events silently.

        A turn that could not be saved (say, the disk was full) is written now; if that still fails the switch
        is refused, unless ``discard`` says to drop those events.
        """
        agent = self.agent
        if agent is None:
            return
        if agent.busy:
            raise HostError("the current session is still running a turn; wait for it (%dsh wait) or stop it "
                            "(%dsh stop) first")
        writer = agent.writer
        pending = int(getattr(writer, "pending", 0) or 0) if writer is not None else 0
        if writer is not None and pending and not discard:
            try:
                writer.flush()
            except Exception as exc:
                raise HostError(
                    f"the current session has {pending} event(s) that could not be saved ({exc}); free the space "
                    "or fix the folder and run the command again, or drop them by adding --discard (%dsh new --discard)"
                ) from None
        for dispose in self._disposers:
            dispose()
        self._disposers.clear()
        self.query.unregister_live(agent.id)
        self.agent = None
        if writer is None:
            return
        try:
            if discard:
                dropped = writer.discard()
                if dropped:
                    print(f"dropped {dropped} unsaved event(s) of session {agent.id}; its log ends at its last save")
            else:
                writer.close()
        except Exception as exc:  # the session stays readable up to its last flush
            log.warning("could not close session %s cleanly: %s", agent.id, exc)

    def new_session(self, model: str | None = None, *, discard: bool = False) -> tuple[Agent, str | None]:
        from ..agent import Agent

        provider, notice = self.model_for(model)
        self._service(self.services.check_writable)
        store = self.store
        self._leave_current(discard=discard)
        agent = Agent.create(store, provider, cwd=self.cwd, **self._agent_options())
        return self._install(agent, created=True), notice

    def resume(self, session_id: str, model: str | None = None, *, discard: bool = False
               ) -> tuple[Agent, str | None]:
        from ..agent import Agent
        from ..session import SessionError, SessionNotFoundError

        if self.agent is not None and self.agent.id == session_id:
            return self.agent, None
        provider, notice = self.model_for(model)
        if self.busy:
            raise HostError("the current session is still running a turn; wait for it (%dsh wait) or stop it "
                            "(%dsh stop) first")
        try:
            agent = Agent.resume(self.store, session_id, provider, **self._agent_options())
        except SessionNotFoundError:
            raise HostError(
                f"no session {session_id!r} in {self.services.describe_store()}; list them with %dsh sessions"
            ) from None
        except SessionError as exc:
            from ..ui.messages import Said, session_error_message

            raise HostError(session_error_message(exc, Said(title_of=self.query.title), session_id)) from None
        try:
            self._leave_current(discard=discard)
        except HostError:
            if agent.writer is not None:
                agent.writer.close()
            raise
        return self._install(agent, created=False), notice

    def current(self, model: str | None = None) -> tuple[Agent, str | None]:
        """The current session's agent, created lazily; switching model keeps the session."""
        if self.agent is None:
            return self.new_session(model)
        notice = None
        if model:
            provider, notice = self.model_for(model)
            self.agent.model = provider
        return self.agent, notice

    def for_turn(self, model: str | None = None) -> tuple[Agent, str | None]:
        """:meth:`current`, for a prompt about to be sent: model settings changed by ``%config`` since the
        session got its model apply now (a steer joins the running turn and keeps its model)."""
        agent, notice = self.current(model)
        if not model and self._model_changes and not agent.busy:
            notice = self._apply_model_changes(agent)
        return agent, notice

    def find_session(self, text: str) -> str:
        """A session id from an id, a unique id prefix or an exact title."""
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        query = self.query
        ids = [r.id for r in query.list_sessions()]
        if text in ids:
            return text
        prefixed = [i for i in ids if i.startswith(text)]
        if len(prefixed) == 1:
            return prefixed[0]
        titled = [i for i in ids if query.title_or_none(i) == text]  # a damaged log never blocks the rest
        if len(titled) == 1:
            return titled[0]
        if len(prefixed) > 1 or len(titled) > 1:
            names = ", ".join(session_name(i, query.title(i)) for i in (prefixed if len(prefixed) > 1 else titled)[:4])
            raise HostError(f"{text!r} matches several sessions ({names}); use more of the id (see %dsh sessions)")
        raise HostError(f"no session matches {text!r}; list them with %dsh sessions")

    def locate(self) -> SessionLocation | None:
        return self.store.locate(self.agent.header) if self.agent is not None else None

    def export_env(self) -> None:
        """Give the user's own cells (``os.environ``, ``!`` and ``%%bash``) this session's managed facts: the
        values a tool call of the current session gets (:meth:`env_values`), whatever the store; with
        ``export_env`` off, what the kernel had before."""
        if self._process_env is None:
            from ..tools.env import ProcessEnv

            self._process_env = ProcessEnv()
        if not self.settings.export_env:
            self._process_env.withdraw()
            return
        from ..tools.env import ShellEnvError

        registry = self.env_registry
        try:
            values = self.env_values()
        except ShellEnvError as exc:  # a contributor's bug: the cells lose its values, never the session itself
            print(f"dsh: the managed variables could not all be given to the kernel ({exc}); DSH_HOME is set, "
                  "the others are not until that contributor is fixed", file=sys.stderr)
            values = {"DSH_HOME": str(registry.dsh_home)}
        self._process_env.apply(registry, values)

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
    def target(self, *, include_current: bool = False) -> ReferenceTarget:
        """Who is asking: the current session, or nobody (``session_id`` ``None``) when there is none yet or
        the current one should be offered too."""
        agent = self.agent
        if agent is None or include_current:
            return self.services.target()
        return self.services.target(agent.header, context_window=agent.model.info.context_window)

    def candidates(self, query: str = "", limit: int | None = None, *,
                   include_current: bool = False, body: bool = False) -> list[RemoteCandidateJson]:
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

    def variable_snapshots(self) -> VariableSnapshots | None:
        """Where ``@[df](dsh-variable:df)`` mentions are read from: this kernel's namespace."""
        from ..workspace.variable_refs import variable_source

        return variable_source(self.shell)

    def cell_snapshots(self, prompt_cell: str | None = None) -> NotebookCells:
        """Where ``@cell`` and ``@cell:<id>`` are read from for one prompt: the notebook the tools see
        (``prompt_cell``: the id of the cell the prompt was typed in; ``None`` from the sidebar or a prompt box)."""
        from ..workspace.cell_refs import NotebookCells

        return NotebookCells(lambda: self.workspace.document().read(), prompt_cell)

    def running_cell_id(self) -> str | None:
        """The id of the cell the kernel runs now, as its frontend sent it (``None`` outside a cell)."""
        record = self.kernel_record
        return record.running_cell_id() if record is not None else None

    def variable_candidates(self, query: str = "", limit: int = 50) -> list[VariableCandidate]:
        """The user's variables to mention (data frames first), each ``{name, kind, type, brief, mention}``."""
        from ..workspace.variables import variable_candidates

        return variable_candidates(self.shell, query, limit) if self.shell is not None else []

    def submit_async(self, text: str, listener: Callable[[AgentEvent], None] | None = None,
                     model: str | None = None) -> concurrent.futures.Future[Submission]:
        """Prepare ``text`` and send it (idle) or steer it into the running turn (busy), through the agent
        layer's one submit path; a turn it starts becomes the background turn ``%dsh wait`` waits for."""
        from ..agent.submit import submit

        agent, _ = self.for_turn(model)
        dispose = agent.subscribe(listener) if listener is not None else None
        turn_done: concurrent.futures.Future[Submission] = concurrent.futures.Future()

        def started() -> None:  # on the agent thread, as the turn is reserved
            self.track_background(turn_done)

        resolver = self.resolver_for(agent)
        variables = self.variable_snapshots()
        cells = self.cell_snapshots()

        async def run() -> Submission:
            try:
                return await submit(agent, text, resolver, on_start=started, variables=variables, cells=cells)
            finally:
                if dispose is not None:
                    dispose()

        outer = self.thread.submit(run())
        outer.add_done_callback(lambda f: _copy_outcome(f, turn_done))
        return outer

    def close(self) -> None:
        if self.agent is not None:
            try:
                self._leave_current()
            except HostError:
                self.agent.cancel()
        for bash in self._bash_tools:  # background jobs outlive turns, not the kernel's extension
            try:
                self.thread.run(bash.jobs.stop_all(), timeout=10)
            except Exception:
                log.debug("could not stop background jobs", exc_info=True)
        if self._mcp is not None:  # stdio servers' processes end with the kernel's extension
            self._mcp.close()
        model = self._model
        if model is not None:
            try:
                self.thread.run(model.close(), timeout=10)
            except Exception:
                log.debug("could not close the model", exc_info=True)
        self.thread.stop()


def _copy_outcome(source: concurrent.futures.Future[Any], target: concurrent.futures.Future[Any]) -> None:
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(source.result())
