"""``%%dsh`` (a prompt for the notebook's session) and ``%dsh`` (session commands).

Deferred imports: the agent, the renderer, the store, the exporter, the widgets (anywidget), the model
list and the fix request load when the magic that needs them runs, so ``%load_ext dsh_jupyter`` stays
under 150 ms (``benchmarks/bench_notebook.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import string
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, kwds, magic_arguments, parse_argstring
from IPython.display import display

from ..ui.display import ReferenceContextDisplay, SessionTable, show_notice
from ..ui.messages import NO_VARIABLE, KeptField, Said, blocked_message, describe, interpolation_notice, usage_message
from ..workspace.document import NotebookError
from ..workspace.edits import UNDO_EVENT, describe_undo, recorded_edits, reverting_edit, undo_record
from . import commands, warmup
from .config import DshSettings
from .host import HostError, NotebookHost

INTERRUPT_GRACE_SECONDS = 5.0


#: Why an expression in braces is kept: only names are filled in.
NOT_A_NAME = "only a variable name (with .attribute or [key] after it) is filled in, not an expression"


def interpolate_fields(text: str, namespace: Mapping[str, Any]) -> tuple[str, list[KeptField]]:
    """``{name}`` → value from the notebook namespace, and the fields left as written (with why).

    Each field is filled in on its own, so one unknown name never stops the others. Unknown names, fields
    that cannot be read and positional ``{}`` stay as written; odd braces keep the whole text as written.
    Only fields that look like Python names are reported (``{"a": 1}`` in a JSON example is not a name).
    """
    formatter = string.Formatter()
    try:
        parts = list(formatter.parse(text))
    except ValueError:
        return text, []
    if not any(field for _, field, _, _ in parts):
        return text, []
    out: list[str] = []
    kept: list[KeptField] = []
    for literal, field, spec, conversion in parts:
        out.append(literal)
        if field is None:
            continue
        written = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        if not root or root.isdigit():
            out.append(written)
            continue
        if not root.isidentifier():  # an expression (``{len(df)}``) is kept; a JSON example (``{"a": 1}``) too
            out.append(written)
            if not field[:1].isspace() and field[:1] not in "\"'":
                kept.append(KeptField(written, NOT_A_NAME))
            continue
        try:
            out.append(written.format_map(namespace))
        except KeyError as exc:
            out.append(written)
            if root.isidentifier():
                missing = exc.args[0] if exc.args else root
                kept.append(KeptField(written, NO_VARIABLE if missing == root
                                      else f"{missing!r} is not in {root}"))
        except Exception as exc:  # any failure to read a value keeps the field as written
            out.append(written)
            if root.isidentifier():
                kept.append(KeptField(written, f"it could not be filled in ({exc})"))
    return "".join(out), kept


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """``{name}`` → value from the notebook namespace; unknown names and odd braces stay as written."""
    return interpolate_fields(text, namespace)[0]


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
        self._indexing = threading.Lock()
        self._indexing_started = False
        self.observe(self._setting_changed, names=list(DshSettings.class_trait_names(config=True)))

    def _setting_changed(self, change: Any) -> None:
        note = self.host.settings_changed(change["name"])
        if note:
            print(f"dsh: {note}")

    # -- %%dsh ---------------------------------------------------------------------------------------
    @commands.cell_magic_help("%%dsh")
    @magic_arguments()
    @kwds(formatter_class=commands.HelpFormatter, epilog=commands.CELL_MAGIC_EPILOG)
    @argument("-s", "--session", default=None, metavar="ID",
              help="Continue that session (its id, a unique id prefix or its exact title) instead of the "
              "current one.")
    @argument("-n", "--new", action="store_true", help="Start a new session for this prompt.")
    @argument("-m", "--model", default=None, metavar="SPEC",
              help="Model for this session: `offline`, `local`, `deepseek[:model]`, `openai:model`, "
              "`ollama:model`, a LiteLLM id (`provider/model`, e.g. `gemini/gemini-2.5-pro`), or a model name "
              "served at `base_url` (`%dsh models` lists them).")
    @argument("-p", "--placement", choices=["separate", "prompt-prefix"], default=None, metavar="WHERE",
              help="Where referenced-session snapshots go: `separate` (their own message before the prompt) or "
              "`prompt-prefix` (one message: snapshots, `## My request:`, prompt). Default: the `placement` "
              "setting.")
    @argument("-b", "--budget", type=int, default=None, metavar="BYTES",
              help="Byte budget per referenced session. Default: automatic, from the model's context window "
              "(at least 65,536, or less for a small model such as `local`, so the snapshot fits its window).")
    @argument("--bg", action="store_true",
              help="Run in the background: the cell returns at once and keeps streaming; a `%%dsh` cell run "
              "meanwhile is steered into the running turn.")
    @argument("--no-interpolate", action="store_true", help="Keep `{name}` as written (no notebook values).")
    @argument("--reasoning", action="store_true", help="Show the model's reasoning.")
    @cell_magic
    def dsh(self, line: str, cell: str) -> None:
        """Send the cell below the %%dsh line as a prompt to this notebook's agent session.

        Mention earlier sessions with @ (Tab, or the JupyterLab popup, offers them) to give the agent a
        read-only snapshot of their conversation. Interrupt the cell (Stop) to cancel the turn.
        """
        warmup.wait()
        try:
            args = parse_argstring(self.dsh, line)
        except Exception as exc:  # UsageError from argparse
            _error(usage_message(line, str(exc)))
            return
        prompt = cell.strip("\n")
        if not prompt.strip():
            _error("the cell is empty: write a prompt below the %%dsh line")
            return
        if self.interpolate and not args.no_interpolate and self.shell is not None:
            prompt, kept = interpolate_fields(prompt, self.shell.user_ns)
            notice = interpolation_notice(kept)
            if notice:
                print(notice)
        said = self._said(prompt, args)
        try:
            agent, notice = self._session_for(args)
        except Exception as exc:
            _error(self._describe(exc, said))
            return
        show_notice(notice, self)
        self._run_prompt(agent, prompt, args, said)

    def _said(self, prompt: str, args: Any) -> Said:
        """What the user typed in this cell, for error messages."""
        typed = {"--budget": args.budget, "--model": args.model, "--session": args.session}
        options = {name: str(value) for name, value in typed.items() if value is not None}
        return Said(prompt, options, None, self._title_of)

    def _title_of(self, session_id: str) -> str | None:
        agent = self.host.agent
        if agent is not None and agent.id == session_id:
            return agent.title()
        title = self.host.query.title(session_id)
        return title if isinstance(title, str) else None

    def _session_for(self, args: Any) -> tuple[Any, str | None]:
        host = self.host
        if args.new:
            if host.busy:
                raise HostError("a turn is still running; wait for it (%dsh wait) or stop it (%dsh stop) first")
            return host.new_session(args.model)
        if args.session:
            return host.resume(host.find_session(args.session), args.model)
        return host.for_turn(args.model)

    @staticmethod
    def _describe(exc: BaseException, said: Said | None = None) -> str:
        """One line in the user's terms (a :class:`HostError` is already worded for them)."""
        if isinstance(exc, HostError):
            return str(exc)
        return describe(exc, said)

    def _run_prompt(self, agent: Any, prompt: str, args: Any, said: Said | None = None) -> None:
        from ..agent.submit import prepare_prompt
        from ..ui.render import TurnView

        host = self.host
        said = dataclasses.replace(said or Said(prompt, title_of=self._title_of), session_id=agent.id)
        try:
            resolver = host.resolver_for(agent, args.budget)
        except Exception as exc:
            _error(self._describe(exc, said))
            return
        try:
            cells = host.cell_snapshots(host.running_cell_id())  # @cell here: the cell above this one
            preparing = prepare_prompt(agent, prompt, resolver, variables=host.variable_snapshots(), cells=cells)
            # Not yet a turn's cell: a --bg turn still running may ask for calls meanwhile, and its cells go elsewhere.
            prepared = self._wait(lambda: host.thread.submit(preparing), agent, cancel_turn=False, turn_cell=False)
        except KeyboardInterrupt:
            _error("preparing the prompt was interrupted; nothing was sent")
            return
        except Exception as exc:
            _error(self._describe(exc, said) + "; nothing was sent")
            return
        if prepared.context is not None:
            spills = {index: getattr(spill, "path", spill) for index, spill in prepared.spills.items()}
            display(ReferenceContextDisplay.from_context(prepared.context, target_session_id=agent.id, spills=spills))
        from ..agent.submit import dispatch

        try:
            dispatched = dispatch(agent, prepared, placement=args.placement)
        except Exception as exc:
            _error(self._describe(exc, said))
            return
        if dispatched.turn is None:
            print(f"↪ steered into the running turn of session {agent.id}")
            return
        turn = dispatched.turn
        view = TurnView(show_reasoning=self.show_reasoning or args.reasoning, rate=self.stream_rate,
                        background=args.bg, session=agent)
        view.start()
        host.approval_slot(background=args.bg)  # where this turn's approval questions appear
        dispose = agent.subscribe(view)

        def start() -> Any:
            future = host.thread.submit(turn)
            future.add_done_callback(lambda _: dispose())
            return future

        if args.bg:
            host.track_background(start())
            self._views.append(view)
            return
        try:
            # The cell serves the turn's main-thread calls from before the turn starts: a tool that runs at
            # once (the offline model answers instantly) must find this cell waiting, not a cell-less kernel.
            result = self._wait(start, agent, cancel_turn=True, turn_cell=True)
        except Exception as exc:
            view.finish("error", self._describe(exc, said))
            _error(self._describe(exc, said))
            return
        if result is not None and result.reason == "blocked":
            _error(blocked_message(result.error))

    def _wait(self, start: Callable[[], Any], agent: Any, *, cancel_turn: bool, turn_cell: bool) -> Any:
        """Start the work (``start`` returns its future) once this cell serves the agent's main-thread calls,
        and wait for it while running them; Stop cancels the turn. ``turn_cell``: this is the turn's own ``%%dsh``
        cell (a new cell the agent inserts lands under it), not ``%dsh wait`` or another command."""
        from .python_tool import MainThreadCalls

        calls = MainThreadCalls(turn_cell=turn_cell)
        self.host.main_thread_calls = calls
        interrupted_at: float | None = None
        try:
            future = start()
            future.add_done_callback(lambda _: calls.wake())
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
    @line_magic("dsh")  # type: ignore[arg-type]  # IPython types the named form as a union of returns
    @commands.documented(commands.line_magic_help())
    def dsh_line(self, line: str) -> Any:
        warmup.wait()
        try:
            request = commands.parse_line(line)
        except commands.CommandLineError as exc:
            _error(exc.advice(line))
            return None
        if request.help is not None:
            print(request.help)
            return None
        try:
            return getattr(self, f"_cmd_{request.command.name}")(request.args)
        except KeyboardInterrupt:
            _error("interrupted")
        except Exception as exc:
            _error(self._describe(exc, Said(session_id=self.host.agent.id if self.host.agent else None,
                                            title_of=self._title_of)))
        return None

    def _cmd_sessions(self, args: argparse.Namespace) -> Any:
        if args.body and self.host.services.candidate_source is None:
            raise HostError("--body searches the text of messages through the session catalog, which is off or "
                            "unavailable here; turn it on with %config DshMagics.catalog = True (JSONL store), or "
                            "leave --body out to match titles, ids and folders")
        found = self.host.candidates(" ".join(args.query), args.limit, include_current=True, body=args.body)
        current = self.host.agent.id if self.host.agent is not None else None
        return SessionTable([{**row, "current": row["sessionId"] == current} for row in found])

    def _cmd_new(self, args: argparse.Namespace) -> Any:
        agent, notice = self.host.new_session(args.model, discard=args.discard)
        show_notice(notice, self)
        print(f"new session {agent.id} (its log appears at the first turn's end: %dsh locate)")
        return None

    def _cmd_resume(self, args: argparse.Namespace) -> Any:
        agent, notice = self.host.resume(self.host.find_session(" ".join(args.session)), discard=args.discard)
        show_notice(notice, self)
        print(f"resumed session {agent.id}" + (f" ({agent.title()})" if agent.title() else ""))
        return None

    def _cmd_title(self, args: argparse.Namespace) -> Any:
        agent, _ = self.host.current()
        agent.set_title(" ".join(args.text))
        print(f"title set: {agent.title()}")
        return None

    def _cmd_share(self, args: argparse.Namespace) -> Any:
        return self._change_share(args, share=True)

    def _cmd_unshare(self, args: argparse.Namespace) -> Any:
        return self._change_share(args, share=False)

    def _change_share(self, args: argparse.Namespace, *, share: bool) -> None:
        from ..store.postgres import PostgresStore

        verb = "share" if share else "unshare"
        role = getattr(args, "with")
        if not role:
            raise HostError(f"name the database role: %dsh {verb} SESSION --with ROLE")
        store = self.host.store
        if not isinstance(store, PostgresStore):
            raise HostError(f"{verb} works with the PostgreSQL store (%config DshMagics.store = \"postgres\"); "
                            "sessions in files are shared through the file system's permissions")
        session_id = self.host.find_session(args.session)
        try:
            changed = store.share(session_id, role) if share else store.unshare(session_id, role)
        except (PermissionError, LookupError) as exc:
            raise HostError(str(exc)) from None
        if share:
            print(f"session {session_id} is shared with {role}: they can @-reference it"
                  if changed else f"session {session_id} was already shared with {role}")
        else:
            print(f"session {session_id} is no longer shared with {role}"
                  if changed else f"session {session_id} was not shared with {role}")

    def _cmd_compact(self, args: argparse.Namespace) -> Any:
        agent, _ = self.host.current()
        done = self._wait(lambda: self.host.thread.submit(agent.compact()), agent, cancel_turn=False,
                          turn_cell=False)
        print("compacted the earlier conversation into a checkpoint" if done else "nothing to compact yet")
        return None

    def _cmd_locate(self, args: argparse.Namespace) -> Any:
        self.host.current()
        location = self.host.locate()
        if location is None:
            print(f"{self.host.services.describe_store()} keeps no per-session file; use %dsh sessions to inspect it")
        return location

    def _cmd_env(self, args: argparse.Namespace) -> Any:
        self.host.current()
        return commands.EnvValues(self.host.env_values())

    def _cmd_export(self, args: argparse.Namespace) -> Any:
        from ..session import SessionError
        from ..ui.export import ExportError, export_name, export_stored, write_export

        host = self.host
        fmt = args.to or "md"
        agent = host.agent
        if args.session:
            session_id = host.find_session(args.session)
        elif agent is not None:
            session_id = agent.id
        else:
            raise HostError("there is no current session yet; name the one to export: %dsh export SESSION --to "
                            f"{fmt} (%dsh sessions lists them)")
        path = args.output or os.path.join(host.cwd, export_name(session_id, fmt))
        try:
            if agent is not None and agent.id == session_id:  # the live session, in memory
                written = write_export(agent.session, fmt, path, overwrite=args.force)
            else:  # a stored one, read one event at a time
                written, _ = export_stored(host.store, session_id, fmt, path, overwrite=args.force)
        except (ExportError, SessionError) as exc:
            raise HostError(str(exc)) from None
        except OSError as exc:
            raise HostError(f"could not write {path}: {exc.strerror or exc}; choose another --output") from None
        print(f"exported session {session_id} to {written}")
        return None

    def _cmd_pick(self, args: argparse.Namespace) -> Any:
        """A prompt box with the session picker, answers under it: one output (IPython shows it unless assigned)."""
        from ..ui.widgets import ChatPanel

        panel = ChatPanel(self.host, kind="pick")
        if args.query:
            panel.picker.query = " ".join(args.query)
        return panel

    def _cmd_chat(self, args: argparse.Namespace) -> Any:
        from ..ui.widgets import ChatPanel

        return ChatPanel(self.host)

    def _cmd_config(self, args: argparse.Namespace) -> Any:
        return commands.settings_table(self)

    def _cmd_models(self, args: argparse.Namespace) -> Any:
        from ..models.registry import list_models

        listings = list_models(base_url=self.host.settings.base_url or None)
        agent = self.host.agent
        if agent is not None:
            info = agent.model.info
            mark, unlisted = "current", f"This session uses {info.provider} model {info.model!r}."
            in_use = next((i for i, row in enumerate(listings)
                           if (row.provider, row.model) == (info.provider, info.model)), None)
        else:
            spec = self.host.model_spec()[0]
            mark, unlisted = "default", f"The next session will use {spec!r}."
            in_use = next((i for i, row in enumerate(listings) if row.spec == spec), None)
        return commands.models_table(listings, in_use, mark=mark, unlisted=unlisted if in_use is None else None)

    def _cmd_mcp(self, args: argparse.Namespace) -> Any:
        from .mcp_table import mcp_table

        clients = self.host.mcp
        clients.configure(self.host.mcp_settings())
        if args.trust:
            for line in clients.trust_project():
                print(line)
        if args.connect:
            for line in clients.connect():
                print(line)
        settings = clients.settings
        sources = [f"{settings.user_file} (user)" if settings.user_file else "",
                   f"{settings.project_file} (project)" if settings.project_file else "", "DshMagics.mcp_servers"]
        return mcp_table(clients.status(), clients.problems, [s for s in sources if s])

    def _cmd_undo(self, args: argparse.Namespace) -> Any:
        agent = self.host.agent
        if agent is None:
            print("nothing to undo: there is no session yet")
            return None
        if agent.busy:
            raise HostError("the agent is still running a turn; wait for it (%dsh wait) or stop it (%dsh stop), "
                            "then undo")
        edits = recorded_edits(agent.session.events)
        if not edits:
            print("nothing to undo: the agent has made no notebook edit in this session (or all were undone)")
            return None
        edit = edits[-1]
        try:
            document = self.host.workspace.document()
            applied = document.apply(reverting_edit(edit, document, force=args.force))
        except NotebookError as exc:
            raise HostError(f"cannot undo the agent's last edit: {exc}") from None
        agent.session.append(UNDO_EVENT, undo_record(edit, applied, document.view, forced=args.force),
                             source_event_seqs=[edit.seq], ignorable=True)
        if agent.writer is not None:
            agent.writer.flush()
        print(describe_undo(edit, applied))
        return None

    def _cmd_fix(self, args: argparse.Namespace) -> Any:
        from ..workspace.fix import NO_ERROR, build_fix_request

        host = self.host
        record = host.kernel_record
        cell = record.last_error() if record is not None else None
        if cell is None or self.shell is None:
            print(NO_ERROR)
            return None
        request = build_fix_request(cell, self.shell.user_ns, instruction=" ".join(args.instruction),
                                    transform=self.shell.transform_cell,
                                    can_edit=bool(getattr(self, "notebook_tools", False)))
        said = Said(request.prompt, {"--model": args.model} if args.model else {}, None, self._title_of)
        agent, notice = host.for_turn(args.model)
        show_notice(notice, self)
        print(request.heading())
        options = argparse.Namespace(budget=None, placement=None, bg=False, reasoning=args.reasoning)
        self._run_prompt(agent, request.prompt, options, said)
        return None

    def _cmd_wait(self, args: argparse.Namespace) -> Any:
        future = self.host.background
        if future is None:
            print("no background turn")
            return None
        agent = self.host.agent
        self._wait(lambda: future, agent, cancel_turn=True, turn_cell=False)  # not the turn's cell
        self.refresh_views()
        return None

    def _cmd_stop(self, args: argparse.Namespace) -> Any:
        if not self.host.busy:
            print("no turn is running")
            return None
        self.host.cancel()
        print("stopping the running turn")
        return None

    # -- background views -------------------------------------------------------------------------------
    def start_indexing(self) -> None:
        """Open the catalog and index the store in the background, once (the first-prompt warm-up or the first
        cell after loading, whichever comes first)."""
        with self._indexing:
            if self._indexing_started:
                return
            self._indexing_started = True
        self.host.start_indexing()

    def refresh_views(self, *args: Any) -> None:
        """Before each cell: export the session facts once, and re-send background views under the cell now
        starting (updates sent while the kernel was idle had no cell to ride on)."""
        if not self._env_exported:
            self._env_exported = True
            try:
                self.host.export_env()
                self.start_indexing()
            except Exception:  # never break the user's cell over an environment hint or an index
                pass
        keep = []
        for view in self._views:
            view.refresh()
            if not view.finished:
                keep.append(view)
        self._views = keep
