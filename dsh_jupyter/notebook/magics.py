"""``%%dsh`` (a prompt for the notebook's session) and ``%dsh`` (session commands)."""

from __future__ import annotations

import shlex
import string
import sys
import time
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .config import DshSettings
from .host import HostError, NotebookHost

INTERRUPT_GRACE_SECONDS = 5.0

LINE_HELP = """Session commands for the notebook's agent.

Usage: %dsh <command> [arguments]

Commands:
  sessions [QUERY] [--limit N] [--body]
                                 list sessions (label, id, cwd, created, same workspace) from every
                                 known notebook folder; QUERY filters by title, id or folder, and with
                                 --body also by message text
  new [--model SPEC]             start a new session for the following %%dsh cells
  resume ID                      continue an earlier session (id, unique id prefix or exact title)
  title TEXT                     set the current session's title (wins over automatic titles)
  compact                        summarise the older conversation into a checkpoint
  locate                         where the current session's log is (returns the location object)
  env                            the DSH_* values a tool call of this session gets
  pick [QUERY]                   a prompt box plus the session picker that inserts @-mentions into it
  chat                           show a chat panel (prompt box, picker, streaming transcript)
  config                         the current settings (change them with %config DshMagics.<name> = ...)
  models                         models you can use and whether their key is set
  wait                           wait for a background turn to finish
  stop                           interrupt the running turn
"""


class _Missing(dict):  # type: ignore[type-arg]
    """Interpolation namespace that leaves unknown ``{names}`` as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """``{name}`` → value from the notebook namespace; unknown names and odd braces stay as written."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f]
    except ValueError:
        return text
    if not fields:
        return text
    try:
        return text.format_map(_Missing(namespace))
    except (ValueError, IndexError, KeyError, AttributeError, TypeError):
        return text


def _error(message: str) -> None:
    """One line in the cell's error stream: what was wrong and what to do."""
    print(f"dsh: {message}", file=sys.stderr)


@magics_class
class DshMagics(Magics, DshSettings):
    """The dsh-jupyter magics; every option is a traitlet (see ``%config DshMagics``)."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.host = NotebookHost(self, shell)
        self._views: list[Any] = []
        self._env_exported = False
        self.observe(self._setting_changed, names=list(DshSettings.class_trait_names(config=True)))

    def _setting_changed(self, change: Any) -> None:
        self.host.settings_changed(change["name"])

    # -- %%dsh ---------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("-s", "--session", default=None,
              help="Continue this session (id, unique id prefix or exact title) instead of the current one.")
    @argument("-n", "--new", action="store_true", help="Start a new session for this prompt.")
    @argument("-m", "--model", default=None,
              help="Model for this session: offline, local, deepseek[:model], openai:model, or a name at base_url.")
    @argument("-p", "--placement", choices=["separate", "prompt-prefix"], default=None,
              help="Where referenced-session snapshots go (default: the configured placement).")
    @argument("-b", "--budget", type=int, default=None,
              help="Byte budget per referenced session for this prompt (default: automatic).")
    @argument("--bg", action="store_true",
              help="Run in the background: the cell returns at once and keeps streaming; later %%dsh cells steer.")
    @argument("--no-interpolate", action="store_true", help="Do not replace {name} with notebook values.")
    @argument("--reasoning", action="store_true", help="Show the model's reasoning.")
    @cell_magic
    def dsh(self, line: str, cell: str) -> None:
        """Send the cell body as a prompt to this notebook's agent session.

        Mention earlier sessions with @ (completion offers them) to give the agent a read-only snapshot
        of their conversation. Interrupt the cell (Stop) to cancel the turn.
        """
        try:
            args = parse_argstring(self.dsh, line)
        except Exception as exc:  # UsageError from argparse
            _error(f"{exc} (see %%dsh?)")
            return
        prompt = cell.strip("\n")
        if not prompt.strip():
            _error("the cell is empty: write a prompt below the %%dsh line")
            return
        if self.interpolate and not args.no_interpolate and self.shell is not None:
            prompt = interpolate(prompt, self.shell.user_ns)
        try:
            agent, notice = self._session_for(args)
        except HostError as exc:
            _error(str(exc))
            return
        except Exception as exc:
            _error(self._describe(exc))
            return
        if notice:
            print(notice)
        self._run_prompt(agent, prompt, args)

    def _session_for(self, args: Any) -> tuple[Any, str | None]:
        host = self.host
        if args.new:
            if host.busy:
                raise HostError("a turn is still running; wait for it (%dsh wait) or stop it (%dsh stop) first")
            return host.new_session(args.model)
        if args.session:
            return host.resume(host.find_session(args.session), args.model)
        return host.current(args.model)

    @staticmethod
    def _describe(exc: BaseException) -> str:
        code = getattr(exc, "code", None)
        kind = getattr(exc, "kind", None)
        if code:
            return f"{exc} [{code}]"
        if kind:
            return f"{exc}"
        return f"{type(exc).__name__}: {exc}"

    def _run_prompt(self, agent: Any, prompt: str, args: Any) -> None:
        from ..agent.submit import prepare_prompt
        from .render import TurnView

        host = self.host
        resolver = host.resolver
        if args.budget is not None:
            try:
                resolver = host.make_resolver(args.budget, option="--budget")
            except HostError as exc:
                _error(str(exc))
                return
        try:
            prepared = self._wait(host.thread.submit(prepare_prompt(agent, prompt, resolver)), agent, cancel_turn=False)
        except KeyboardInterrupt:
            _error("preparation was interrupted; nothing was sent")
            return
        except Exception as exc:
            _error(self._describe(exc) + "; nothing was sent")
            return
        if prepared.context is not None:
            from IPython.display import display

            from .display import ReferenceContextDisplay

            spills = {index: getattr(spill, "path", spill) for index, spill in prepared.spills.items()}
            display(ReferenceContextDisplay(prepared.context["source"], target_session_id=agent.id, spills=spills))
        from ..agent.submit import dispatch

        try:
            dispatched = dispatch(agent, prepared, placement=args.placement)
        except Exception as exc:
            _error(self._describe(exc))
            return
        if dispatched.turn is None:
            print(f"↪ steered into the running turn of session {agent.id}")
            return
        turn = dispatched.turn
        view = TurnView(show_reasoning=self.show_reasoning or args.reasoning, rate=self.stream_rate,
                        background=args.bg)
        view.start()
        dispose = agent.subscribe(view)
        future = host.thread.submit(turn)
        future.add_done_callback(lambda _: dispose())
        if args.bg:
            host.track_background(future)
            self._views.append(view)
            return
        try:
            result = self._wait(future, agent, cancel_turn=True)
        except Exception as exc:
            view.finish("error", self._describe(exc))
            _error(self._describe(exc))
            return
        if result is not None and result.reason == "blocked":
            reason = (result.error or "no reason given").strip().rstrip(".")
            _error(f"the prompt was blocked by a hook ({reason}); nothing was written")

    def _wait(self, future: Any, agent: Any, *, cancel_turn: bool) -> Any:
        """Wait for ``future`` while running the agent's main-thread calls; Stop cancels the turn."""
        from .python_tool import MainThreadCalls

        calls = MainThreadCalls()
        self.host.main_thread_calls = calls
        future.add_done_callback(lambda _: calls.wake())
        interrupted_at: float | None = None
        try:
            while not future.done():
                try:
                    calls.pump(0.05)
                except KeyboardInterrupt:
                    interrupted_at = interrupted_at or time.monotonic()
                    if not cancel_turn:
                        future.cancel()
                        raise
                    agent.cancel()
                if interrupted_at is not None and time.monotonic() - interrupted_at > INTERRUPT_GRACE_SECONDS:
                    future.cancel()
                    break
            if future.cancelled():
                return None
            return future.result()
        finally:
            self.host.main_thread_calls = None
            calls.drain_cancelled()

    # -- %dsh ----------------------------------------------------------------------------------------
    @line_magic("dsh")
    def dsh_line(self, line: str) -> Any:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            _error(f"cannot parse the command line: {exc}")
            return None
        if not words or words[0] in ("help", "-h", "--help"):
            print(LINE_HELP)
            return None
        command, rest = words[0], words[1:]
        handler = getattr(self, f"_cmd_{command.replace('-', '_')}", None)
        if handler is None:
            _error(f"unknown command {command!r}; commands: sessions, new, resume, title, compact, locate, env, "
                   "pick, chat, config, models, wait, stop (see %dsh?)")
            return None
        try:
            return handler(rest)
        except HostError as exc:
            _error(str(exc))
        except KeyboardInterrupt:
            _error("interrupted")
        except Exception as exc:
            _error(self._describe(exc))
        return None

    dsh_line.__doc__ = LINE_HELP

    def _cmd_sessions(self, rest: list[str]) -> Any:
        from .display import SessionTable

        query, limit, body = "", None, False
        args = list(rest)
        while args:
            word = args.pop(0)
            if word == "--body":
                body = True
            elif word == "--limit" and args:
                value = args.pop(0)
                if not value.isdigit() or int(value) < 1:
                    raise HostError(f"--limit takes a positive whole number, got {value!r}")
                limit = int(value)
            else:
                query = (query + " " + word).strip()
        rows = self.host.candidates(query, limit, include_current=True, body=body)
        current = self.host.agent.id if self.host.agent is not None else None
        for row in rows:
            row["current"] = row["sessionId"] == current
        return SessionTable(rows)

    def _cmd_new(self, rest: list[str]) -> Any:
        model = rest[rest.index("--model") + 1] if "--model" in rest and rest.index("--model") + 1 < len(rest) else None
        agent, notice = self.host.new_session(model)
        if notice:
            print(notice)
        print(f"new session {agent.id} (its log appears at the first turn's end: %dsh locate)")
        return None

    def _cmd_resume(self, rest: list[str]) -> Any:
        if not rest:
            raise HostError("resume needs a session: %dsh resume <id, id prefix or title>")
        agent, notice = self.host.resume(self.host.find_session(" ".join(rest)))
        if notice:
            print(notice)
        print(f"resumed session {agent.id}" + (f" ({agent.title()})" if agent.title() else ""))
        return None

    def _cmd_title(self, rest: list[str]) -> Any:
        if not rest:
            raise HostError("title needs text: %dsh title <new title>")
        agent, _ = self.host.current()
        agent.set_title(" ".join(rest))
        print(f"title set: {agent.title()}")
        return None

    def _cmd_compact(self, rest: list[str]) -> Any:
        agent, _ = self.host.current()
        done = self._wait(self.host.thread.submit(agent.compact()), agent, cancel_turn=False)
        print("compacted the earlier conversation into a checkpoint" if done else "nothing to compact yet")
        return None

    def _cmd_locate(self, rest: list[str]) -> Any:
        agent, _ = self.host.current()
        location = self.host.locate()
        if location is None:
            print("this store keeps no per-session file (SQLite); use %dsh sessions to inspect it")
        return location

    def _cmd_env(self, rest: list[str]) -> Any:
        self.host.current()
        return dict(sorted(self.host.env_values().items()))

    def _cmd_pick(self, rest: list[str]) -> Any:
        """Show a prompt box and return the picker that fills it (IPython displays it unless assigned)."""
        from IPython.display import display

        from .widgets import MentionPicker, PromptBox

        box = PromptBox(self.host)
        picker = MentionPicker(self.host, target=box)
        if rest:
            picker.query = " ".join(rest)
        display(box)
        return picker

    def _cmd_chat(self, rest: list[str]) -> Any:
        from .widgets import ChatPanel

        return ChatPanel(self.host)

    def _cmd_config(self, rest: list[str]) -> Any:
        lines = []
        for name in sorted(DshSettings.class_trait_names(config=True)):
            lines.append(f"{name} = {getattr(self, name)!r}")
        print("\n".join(lines))
        return None

    def _cmd_models(self, rest: list[str]) -> Any:
        from ..models.registry import list_models

        rows = list_models()
        for row in rows:
            print(row if isinstance(row, str) else "  ".join(f"{k}={v}" for k, v in dict(row).items()))
        return None

    def _cmd_wait(self, rest: list[str]) -> Any:
        future = self.host.background
        if future is None:
            print("no background turn")
            return None
        agent = self.host.agent
        self._wait(future, agent, cancel_turn=True)
        self.refresh_views()
        return None

    def _cmd_stop(self, rest: list[str]) -> Any:
        if not self.host.busy:
            print("no turn is running")
            return None
        self.host.cancel()
        print("stopping the running turn")
        return None

    # -- background views -------------------------------------------------------------------------------
    def refresh_views(self, *args: Any) -> None:
        """Before each cell: export the session facts once, and re-send background views under the cell now
        starting (updates sent while the kernel was idle had no cell to ride on)."""
        if not self._env_exported:
            self._env_exported = True
            try:
                self.host.export_env()
                self.host.start_indexing()
            except Exception:  # never break the user's cell over an environment hint or an index
                pass
        keep = []
        for view in self._views:
            view.refresh()
            if not view.finished:
                keep.append(view)
        self._views = keep
