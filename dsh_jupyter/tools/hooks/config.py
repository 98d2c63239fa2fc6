"""Hook configuration in the shapes users already have: Claude Code settings and Codex ``hooks.json``.

Both nest the same way::

    {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "...",
                                                             "timeout": 60}]}]}}

They differ in how a ``matcher`` reads. Claude Code: absent, ``""`` or ``"*"`` matches everything; a
matcher made only of letters, digits, ``_``, ``-``, spaces, ``,`` and ``|`` is a list of exact names
(``Edit|Write``); anything else is an unanchored regular expression. Codex: every matcher is an
unanchored regular expression (absent, ``""`` and ``"*"`` still match everything).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

#: Events this harness fires (the others in a user's configuration are kept but never run here).
FIRED_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
#: Events whose matcher filters something: tool events filter the tool name, SessionStart its source.
MATCHED_EVENTS = frozenset({"SessionStart", "PreToolUse", "PostToolUse"})

Matcher = Callable[[str], bool]

_EXACT_LIST = re.compile(r"^[A-Za-z0-9_\-, |]+$")


class HookConfigError(ValueError):
    """A hook configuration cannot be used; the message names the file or entry and what is wrong."""


def _match_all(_: str) -> bool:
    return True


def claude_code_matcher(text: str | None) -> Matcher:
    """Compile a Claude Code matcher (exact names, ``|``/``,`` alternatives, or an unanchored regex)."""
    if text is None or text.strip() in ("", "*"):
        return _match_all
    if _EXACT_LIST.match(text):
        names = frozenset(part.strip() for part in re.split(r"[|,]", text) if part.strip())
        return names.__contains__
    return re.compile(text).search  # type: ignore[return-value]


def codex_matcher(text: str | None) -> Matcher:
    """Compile a Codex matcher: an unanchored regex (absent, ``""`` and ``"*"`` match everything)."""
    if text is None or text.strip() in ("", "*"):
        return _match_all
    return re.compile(text).search  # type: ignore[return-value]


@dataclass(frozen=True)
class CommandHook:
    """One ``{"type": "command"}`` entry. ``timeout`` is in seconds; ``None`` means the bridge default."""

    command: str
    timeout: float | None = None


@dataclass(frozen=True)
class MatcherGroup:
    """A ``matcher`` and the hooks it selects."""

    matcher: str | None
    hooks: tuple[CommandHook, ...]
    matches: Matcher = field(compare=False, repr=False, default=_match_all)


@dataclass(frozen=True)
class HookConfig:
    """A parsed configuration: matcher groups per event, plus notes about what was skipped."""

    events: Mapping[str, tuple[MatcherGroup, ...]]
    warnings: tuple[str, ...] = ()
    origin: str = "<dict>"

    def hooks_for(self, event: str, target: str | None) -> list[CommandHook]:
        """Hooks of ``event`` whose matcher accepts ``target`` (events without a matcher ignore it)."""
        selected: list[CommandHook] = []
        for group in self.events.get(event, ()):
            if event in MATCHED_EVENTS and target is not None and not group.matches(target):
                continue
            selected.extend(group.hooks)
        return selected

    @property
    def empty(self) -> bool:
        return not any(self.events.values())


def _read_json_file(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise HookConfigError(f"hook configuration file {path} does not exist") from None
    except OSError as exc:
        raise HookConfigError(f"cannot read hook configuration file {path}: {exc}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise HookConfigError(f"{path} is not valid JSON ({exc}); fix the file and load it again") from None


def _timeout_of(entry: Mapping[str, Any], where: str, keys: tuple[str, ...]) -> float | None:
    for key in keys:
        if key in entry and entry[key] is not None:
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise HookConfigError(f"{where}: '{key}' must be a positive number of seconds, got {value!r}")
            return float(value)
    return None


def parse_hook_config(source: Mapping[str, Any] | str | os.PathLike[str], *, dialect: str) -> HookConfig:
    """Parse a Claude Code (``dialect="claude-code"``) or Codex (``dialect="codex"``) configuration.

    ``source`` is the decoded JSON object or a path to the file (``settings.json`` / ``hooks.json``).
    Keys other than ``hooks`` are ignored (a settings file holds much more). ``"disableAllHooks": true``
    yields an empty configuration. Unsupported hook types (``prompt``, ``agent``, ``http``) are skipped
    with a warning; malformed entries raise :class:`HookConfigError`.
    """
    if dialect not in ("claude-code", "codex"):
        raise ValueError(f"unknown hook dialect {dialect!r}; use 'claude-code' or 'codex'")
    compile_matcher = claude_code_matcher if dialect == "claude-code" else codex_matcher
    timeout_keys = ("timeout",) if dialect == "claude-code" else ("timeout", "timeoutSec")
    if isinstance(source, (str, os.PathLike)):
        origin = os.fspath(source)
        document = _read_json_file(Path(origin))
    else:
        origin = "<dict>"
        document = source
    if not isinstance(document, Mapping):
        raise HookConfigError(f"{origin}: a hook configuration must be a JSON object with a \"hooks\" key")
    if document.get("disableAllHooks") is True:
        return HookConfig({}, ("all hooks are disabled by \"disableAllHooks\"",), origin)
    if "hooks" not in document:
        stray = [key for key in document if key in FIRED_EVENTS]
        if stray:
            raise HookConfigError(
                f"{origin}: event names ({', '.join(stray)}) must sit under a top-level \"hooks\" key, "
                "e.g. {\"hooks\": {\"PreToolUse\": [...]}}"
            )
        return HookConfig({}, (), origin)
    table = document["hooks"]
    if table is None:
        return HookConfig({}, (), origin)
    if not isinstance(table, Mapping):
        raise HookConfigError(f"{origin}: \"hooks\" must be an object mapping event names to lists of matcher groups")
    events: dict[str, tuple[MatcherGroup, ...]] = {}
    warnings: list[str] = []
    for event, groups in table.items():
        where = f"{origin}: hooks.{event}"
        if not isinstance(groups, list):
            raise HookConfigError(f"{where} must be a list of matcher groups ({{\"matcher\": ..., \"hooks\": [...]}})")
        parsed_groups: list[MatcherGroup] = []
        for g_index, group in enumerate(groups):
            g_where = f"{where}[{g_index}]"
            if not isinstance(group, Mapping):
                raise HookConfigError(f"{g_where} must be an object with \"matcher\" and \"hooks\"")
            matcher = group.get("matcher")
            if matcher is not None and not isinstance(matcher, str):
                raise HookConfigError(f"{g_where}.matcher must be a string, got {type(matcher).__name__}")
            try:
                matches = compile_matcher(matcher)
            except re.error as exc:
                raise HookConfigError(
                    f"{g_where}.matcher {matcher!r} is not a valid regular expression: {exc}") from None
            entries = group.get("hooks")
            if not isinstance(entries, list):
                raise HookConfigError(f"{g_where}.hooks must be a list of hook entries")
            commands: list[CommandHook] = []
            for h_index, entry in enumerate(entries):
                h_where = f"{g_where}.hooks[{h_index}]"
                if not isinstance(entry, Mapping):
                    raise HookConfigError(
                        f"{h_where} must be an object such as {{\"type\": \"command\", \"command\": ...}}")
                kind = entry.get("type", "command")
                if kind != "command":
                    warnings.append(f"{h_where}: hook type {kind!r} is not supported here (only \"command\"); skipped")
                    continue
                command = entry.get("command")
                if not isinstance(command, str) or not command.strip():
                    raise HookConfigError(f"{h_where} needs a non-empty \"command\" string")
                commands.append(CommandHook(command, _timeout_of(entry, h_where, timeout_keys)))
            parsed_groups.append(MatcherGroup(matcher, tuple(commands), matches))
        if event not in FIRED_EVENTS and any(g.hooks for g in parsed_groups):
            warnings.append(
                f"{where}: this host never fires {event!r} (only {', '.join(FIRED_EVENTS)}); those hooks will not run"
            )
        events[event] = tuple(parsed_groups)
    return HookConfig(events, tuple(warnings), origin)
