"""Hook bridges: run a user's Claude Code or Codex command hooks with the payload each dialect expects.

Both bridges send ``session_id``, ``transcript_path``, ``cwd`` and ``hook_event_name`` plus the event's
fields. They differ where the tools they imitate differ:

* Claude Code: ``transcript_path`` is always a string (``""`` when the session has no log file); stdin
  ends with a newline; ``${CLAUDE_PROJECT_DIR}`` and ``${CLAUDE_PLUGIN_ROOT}`` are substituted in commands
  and ``CLAUDE_PROJECT_DIR`` is exported (the session cwd unless configured).
* Codex: ``transcript_path`` is ``null`` when there is no log file; stdin has no trailing newline; every
  payload adds ``model`` and ``permission_mode: "default"``, turn-scoped events add ``turn_id``; tool
  events carry ``tool_input: {"command": ...}``.

Hooks run one after another in the session cwd, each in its own process group, with the scrubbed
environment (no credential-like or ``DSH_*`` variables); every payload has secret values masked
(:mod:`dsh_jupyter.secrets`) before it is encoded, and so has everything a hook answers (reasons,
added context, messages) before the agent sees it. Looking up ``transcript_path`` asks the store's
``locate`` only; it never creates or flushes the session file.
"""

from __future__ import annotations

import abc
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._json import dumps
from ...secrets import mask_data, mask_fields
from ...session import SessionHeader
from ...session.messages import PluginSource
from ...store.base import SessionLocation
from ..env import child_env
from .config import CommandHook, HookConfig, parse_hook_config
from .protocol import HookRun, StopFields, ToolFields, Verdict, interpret, merge, run_command_hook

#: Source of context a Claude Code hook adds to the conversation.
CLAUDE_CODE_HOOKS_SOURCE: PluginSource = {"kind": "plugin", "plugin": "hooks-claude-code"}
#: Source of context a Codex hook adds to the conversation.
CODEX_HOOKS_SOURCE: PluginSource = {"kind": "plugin", "plugin": "hooks-codex"}

#: Default limit for one hook, in seconds (a hook entry's ``timeout`` overrides it).
DEFAULT_HOOK_TIMEOUT = 600.0

#: Events that belong to a turn (Codex adds ``turn_id`` to these).
TURN_EVENTS = frozenset({"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"})


def _no_location() -> SessionLocation | None:
    return None


@dataclass(frozen=True)
class HookContext:
    """What a bridge needs to know about the session an event belongs to.

    ``header`` is ``None`` without an agent. ``locate`` is the store's ``locate(header)`` for this session
    (queried only when a hook actually runs). ``turn_id`` is the current turn number as a string.
    """

    header: SessionHeader | None
    locate: Callable[[], SessionLocation | None]
    cwd: str
    model: str | None = None
    turn_id: str | None = None

    @classmethod
    def create(cls, cwd: str, *, header: SessionHeader | None = None,
               locate: Callable[[], SessionLocation | None] | None = None,
               model: str | None = None, turn_id: str | int | None = None) -> HookContext:
        return cls(header, locate or _no_location, cwd, model, None if turn_id is None else str(turn_id))

    @property
    def session_id(self) -> str:
        return self.header.id if self.header is not None else ""

    @property
    def working_directory(self) -> str:
        return self.cwd or os.getcwd()

    def transcript_location(self) -> SessionLocation | None:
        if self.header is None:
            return None
        return self.locate()


def _default_shell() -> str:
    return shutil.which("bash") or "/bin/sh"


class HookBridge(abc.ABC):
    """Runs the command hooks of one configuration in one dialect."""

    #: Dialect id used by :func:`parse_hook_config`.
    dialect: str
    #: Human name used in warnings.
    label: str
    #: Source marker of context this bridge injects.
    source: PluginSource

    def __init__(self, config: HookConfig | Mapping[str, Any] | str | os.PathLike[str], *,
                 default_timeout: float = DEFAULT_HOOK_TIMEOUT, shell: str | None = None,
                 parent_env: Mapping[str, str] | None = None) -> None:
        if not default_timeout > 0:
            raise ValueError(f"default_timeout must be a positive number of seconds, got {default_timeout!r}")
        self.config = config if isinstance(config, HookConfig) else parse_hook_config(config, dialect=self.dialect)
        self.default_timeout = float(default_timeout)
        self.shell = shell or _default_shell()
        self.parent_env = parent_env

    @property
    def warnings(self) -> tuple[str, ...]:
        """Notes from loading the configuration (skipped hook types, events this host never fires)."""
        return self.config.warnings

    # -- dialect specifics -------------------------------------------------------------------------
    @abc.abstractmethod
    def payload(self, event: str, ctx: HookContext, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON object written to the hook's stdin."""

    @abc.abstractmethod
    def encode(self, payload: Mapping[str, Any]) -> bytes:
        """The stdin bytes for ``payload``."""

    def environment(self, ctx: HookContext) -> dict[str, str]:
        """The hook process environment: the scrubbed parent environment (and dialect extras)."""
        return child_env(None, None, self.parent_env)

    def expand(self, command: str, ctx: HookContext) -> str:
        """The command line actually run (dialect placeholders substituted)."""
        return command

    def tool_fields(self, tool_name: str, tool_input: Mapping[str, Any], tool_use_id: str) -> ToolFields:
        return {"tool_name": tool_name, "tool_input": dict(tool_input), "tool_use_id": tool_use_id}

    def stop_fields(self, last_assistant_message: str | None, stop_hook_active: bool) -> StopFields:
        fields: StopFields = {"stop_hook_active": stop_hook_active}
        if last_assistant_message is not None:
            fields["last_assistant_message"] = last_assistant_message
        return fields

    # -- running -----------------------------------------------------------------------------------
    def matching(self, event: str, target: str | None) -> list[CommandHook]:
        """Hooks configured for ``event`` that accept ``target`` (tool name or session-start source)."""
        return self.config.hooks_for(event, target)

    async def fire(self, event: str, ctx: HookContext, fields: Mapping[str, Any],
                   target: str | None = None) -> Verdict:
        """Run every matching hook serially (identical commands once) and merge their verdicts."""
        hooks = self.matching(event, target)
        if not hooks:
            return Verdict()
        payload = mask_data(self.payload(event, ctx, fields))
        stdin = self.encode(payload)
        env = self.environment(ctx)
        cwd = ctx.working_directory
        seen: set[str] = set()
        verdicts: list[Verdict] = []
        for hook in hooks:
            command = self.expand(hook.command, ctx)
            if command in seen:
                continue
            seen.add(command)
            timeout = hook.timeout if hook.timeout is not None else self.default_timeout
            if not os.path.isdir(cwd):
                run = HookRun(command, None, "", "", timeout,
                              error=f"could not start: working directory {cwd!r} does not exist")
            else:
                run = await run_command_hook(command, stdin, cwd=cwd, env=env, timeout=timeout, shell=self.shell)
            verdicts.append(interpret(event, run, label=self.label, source=self.source))
        return mask_fields(merge(verdicts))  # a hook can read secrets too: what it says back is masked


class ClaudeCodeHooks(HookBridge):
    """Command hooks from a Claude Code settings file (``{"hooks": {...}}``) or the decoded object."""

    dialect = "claude-code"
    label = "Claude Code"
    source = CLAUDE_CODE_HOOKS_SOURCE

    def __init__(self, config: HookConfig | Mapping[str, Any] | str | os.PathLike[str], *,
                 plugin_root: str | os.PathLike[str] | None = None,
                 project_dir: str | os.PathLike[str] | None = None,
                 default_timeout: float = DEFAULT_HOOK_TIMEOUT, shell: str | None = None,
                 parent_env: Mapping[str, str] | None = None) -> None:
        super().__init__(config, default_timeout=default_timeout, shell=shell, parent_env=parent_env)
        self.plugin_root = os.fspath(plugin_root) if plugin_root is not None else None
        self.project_dir = os.fspath(project_dir) if project_dir is not None else None

    def _project_dir(self, ctx: HookContext) -> str:
        return self.project_dir or ctx.working_directory

    def payload(self, event: str, ctx: HookContext, fields: Mapping[str, Any]) -> dict[str, Any]:
        location = ctx.transcript_location()
        record: dict[str, Any] = {
            "session_id": ctx.session_id,
            "transcript_path": location.path if location is not None else "",
            "cwd": ctx.working_directory,
            "hook_event_name": event,
        }
        record.update(fields)
        return record

    def encode(self, payload: Mapping[str, Any]) -> bytes:
        return (dumps(payload) + "\n").encode("utf-8", "surrogatepass")

    def environment(self, ctx: HookContext) -> dict[str, str]:
        extra = {"CLAUDE_PROJECT_DIR": self._project_dir(ctx)}
        if self.plugin_root is not None:
            extra["CLAUDE_PLUGIN_ROOT"] = self.plugin_root
        return child_env(None, extra, self.parent_env)

    def expand(self, command: str, ctx: HookContext) -> str:
        command = command.replace("${CLAUDE_PROJECT_DIR}", self._project_dir(ctx))
        if self.plugin_root is not None:
            command = command.replace("${CLAUDE_PLUGIN_ROOT}", self.plugin_root)
        return command


class CodexHooks(HookBridge):
    """Command hooks from a Codex ``hooks.json`` file or the decoded object."""

    dialect = "codex"
    label = "Codex"
    source = CODEX_HOOKS_SOURCE

    def payload(self, event: str, ctx: HookContext, fields: Mapping[str, Any]) -> dict[str, Any]:
        location = ctx.transcript_location()
        record: dict[str, Any] = {
            "session_id": ctx.session_id,
            "transcript_path": location.path if location is not None else None,
            "cwd": ctx.working_directory,
            "hook_event_name": event,
            "model": ctx.model or "",
            "permission_mode": "default",
        }
        if event in TURN_EVENTS:
            record["turn_id"] = ctx.turn_id
        record.update(fields)
        return record

    def encode(self, payload: Mapping[str, Any]) -> bytes:
        return dumps(payload).encode("utf-8", "surrogatepass")

    def tool_fields(self, tool_name: str, tool_input: Mapping[str, Any], tool_use_id: str) -> ToolFields:
        command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
        return {"tool_name": tool_name, "tool_use_id": tool_use_id,
                "tool_input": {"command": command if isinstance(command, str) else ""}}

    def stop_fields(self, last_assistant_message: str | None, stop_hook_active: bool) -> StopFields:
        return {"stop_hook_active": stop_hook_active, "last_assistant_message": last_assistant_message}
