"""The managed ``DSH_*`` shell environment and the scrubbed environment every child process starts from.

Each shell call gets a fresh, immutable snapshot of harness facts (``DSH_HOME``, ``DSH_SHELL``,
``DSH_SESSION_ID`` and whatever registered contributors add). Children never inherit ambient ``DSH_*``
values or credential-like variables from the process that runs the harness, and the managed values
are applied last so nothing else can displace them. ``os.environ`` is modified only by
:class:`ProcessEnv`, which a notebook kernel uses to give the user's own ``!`` and ``%%bash`` cells the
same values (``export_env``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..secrets import default_masker
from .home import resolve_dsh_home

if TYPE_CHECKING:
    from .base import ToolExecution

#: Every managed variable starts with this prefix.
DSH_ENV_PREFIX = "DSH_"
_SUFFIX = re.compile(r"^[A-Z][A-Z0-9_]*$")

DSH_HOME = "DSH_HOME"
DSH_SHELL = "DSH_SHELL"
DSH_SESSION_ID = "DSH_SESSION_ID"
DSH_SESSION_JSONL = "DSH_SESSION_JSONL"

#: Keys the registry sets itself; no contributor may declare them.
RESERVED_KEYS = frozenset({DSH_HOME, DSH_SHELL, DSH_SESSION_ID})

#: Name of the built-in contributor that publishes the JSONL location.
SESSION_PERSISTENCE_CONTRIBUTOR = "session-persistence"
#: ``contributor`` shown by :meth:`ShellEnvRegistry.list` for the keys the registry sets itself.
BUILTIN_CONTRIBUTOR = "builtin"

_BUILTIN_DESCRIPTIONS = {
    DSH_HOME: "Absolute path of the harness home directory (user-level configuration and state).",
    DSH_SHELL: "Always '1' inside a shell started by the harness for a model tool call.",
    DSH_SESSION_ID: "Id of the agent session that owns this shell call; absent when no agent owns it.",
}
_JSONL_DESCRIPTION = (
    "Absolute path of this session's JSONL log when the session is stored as JSONL; the file may not "
    "exist yet (it is written lazily). A location hint, not a credential."
)

#: Set for every child so tools print plain, unpaged text.
TERMINAL_ENV: Mapping[str, str] = MappingProxyType(
    {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
)

Resolver = Callable[["ToolExecution"], Mapping[str, str]]
Disposer = Callable[[], None]


class ShellEnvError(ValueError):
    """A contributor declaration or a contributor's output breaks the managed-environment rules."""


@dataclass(frozen=True)
class ShellEnvContributor:
    """A named owner of some ``DSH_*`` keys.

    ``variables`` maps each key it may return to a description (a string, or ``{"description": ...}``);
    ``resolve`` is called once per shell call and returns a subset of those keys with string values
    (omit a key to leave it unset).
    """

    name: str
    variables: Mapping[str, str | Mapping[str, str]]
    resolve: Resolver


@dataclass(frozen=True)
class ShellEnvDeclaration:
    """One declared key as :meth:`ShellEnvRegistry.list` reports it."""

    key: str
    contributor: str
    description: str
    builtin: bool = False


def is_managed_key(key: str) -> bool:
    """True for ``DSH_`` followed by an uppercase letter and then uppercase letters, digits or ``_``."""
    return (isinstance(key, str) and key.startswith(DSH_ENV_PREFIX)
            and _SUFFIX.match(key[len(DSH_ENV_PREFIX):]) is not None)


def _description_of(value: object) -> object:
    if isinstance(value, Mapping):
        return value.get("description")
    return value


def _locale_key(name: str) -> tuple[str, str]:
    return (name.casefold(), name)


class ShellEnvRegistry:
    """Contributors of managed ``DSH_*`` variables, and the per-call snapshot they produce.

    ``DSH_HOME`` is resolved once, here (explicit ``dsh_home``, else non-blank ``$DSH_HOME``, else
    ``~/.dsh``). The built-in ``session-persistence`` contributor publishes ``DSH_SESSION_JSONL`` when the
    execution's store locates the session as a JSONL file.
    """

    def __init__(self, dsh_home: str | os.PathLike[str] | None = None, *,
                 env: Mapping[str, str] = os.environ, session_persistence: bool = True) -> None:
        self.dsh_home: Path = resolve_dsh_home(dsh_home, env)
        self._contributors: dict[str, ShellEnvContributor] = {}
        self._owners: dict[str, str] = {}
        self._builtin_names: set[str] = set()
        self._lock = threading.Lock()
        if session_persistence:
            self.register(ShellEnvContributor(
                SESSION_PERSISTENCE_CONTRIBUTOR, {DSH_SESSION_JSONL: _JSONL_DESCRIPTION}, _jsonl_location,
            ))
            self._builtin_names.add(SESSION_PERSISTENCE_CONTRIBUTOR)

    # -- registration ------------------------------------------------------------------------------
    def register(self, contributor: ShellEnvContributor) -> Disposer:
        """Add a contributor after checking every rule; on any error nothing is registered.

        Rules, in order: a non-blank name; a name not yet registered; then for each declared key in
        declaration order: a well-formed ``DSH_*`` key, not reserved, with a non-blank description, and
        not owned by another contributor. Returns a disposer that removes the contributor (idempotent).
        """
        name = contributor.name
        if not isinstance(name, str) or not name.strip():
            raise ShellEnvError("a shell env contributor needs a non-blank name")
        with self._lock:
            if name in self._contributors:
                raise ShellEnvError(
                    f'shell env contributor "{name}" is already registered; dispose the earlier '
                    "registration or choose another name"
                )
            for key, spec in contributor.variables.items():
                if not is_managed_key(key):
                    raise ShellEnvError(
                        f'shell env contributor "{name}" declared invalid key "{key}": managed keys are '
                        f"{DSH_ENV_PREFIX} followed by an uppercase letter, then uppercase letters, digits or '_'"
                    )
                if key in RESERVED_KEYS:
                    raise ShellEnvError(
                        f'shell env contributor "{name}" cannot own reserved key "{key}"; the harness sets it'
                    )
                description = _description_of(spec)
                if not isinstance(description, str) or not description.strip():
                    raise ShellEnvError(f'shell env contributor "{name}" must describe "{key}" (blank description)')
                owner = self._owners.get(key)
                if owner is not None:
                    raise ShellEnvError(
                        f'shell env key "{key}" is already owned by contributor "{owner}"; '
                        f'contributor "{name}" cannot also own it'
                    )
            self._contributors[name] = contributor
            for key in contributor.variables:
                self._owners[key] = name

        def dispose() -> None:
            with self._lock:
                if self._contributors.get(name) is not contributor:
                    return
                del self._contributors[name]
                for key in contributor.variables:
                    if self._owners.get(key) == name:
                        del self._owners[key]

        return dispose

    # -- reading -----------------------------------------------------------------------------------
    def list(self) -> list[ShellEnvDeclaration]:
        """Every declared key, built-ins included (marked ``builtin``), sorted by key. Runs no resolver."""
        entries = [ShellEnvDeclaration(key, BUILTIN_CONTRIBUTOR, text, True)
                   for key, text in _BUILTIN_DESCRIPTIONS.items()]
        with self._lock:
            contributors = list(self._contributors.values())
        for contributor in contributors:
            builtin = contributor.name in self._builtin_names
            for key, spec in contributor.variables.items():
                entries.append(ShellEnvDeclaration(key, contributor.name, str(_description_of(spec)), builtin))
        return sorted(entries, key=lambda e: e.key)

    def collect(self, execution: ToolExecution) -> Mapping[str, str]:
        """The managed snapshot for one shell call: a read-only mapping with keys in sorted order.

        Raises :class:`ShellEnvError` when a contributor returns an undeclared key or a non-string value.
        """
        values: dict[str, str] = {DSH_HOME: str(self.dsh_home), DSH_SHELL: "1"}
        if execution.header is not None:
            values[DSH_SESSION_ID] = execution.header.id
        with self._lock:
            contributors = sorted(self._contributors.values(), key=lambda c: _locale_key(c.name))
        for contributor in contributors:
            produced = contributor.resolve(execution)
            if produced is None:
                continue
            if not isinstance(produced, Mapping):
                raise ShellEnvError(
                    f'shell env contributor "{contributor.name}" must return a mapping of keys to strings, '
                    f"got {type(produced).__name__}"
                )
            for key, value in produced.items():
                if key not in contributor.variables:
                    raise ShellEnvError(
                        f'shell env contributor "{contributor.name}" returned undeclared key "{key}"'
                    )
                if not isinstance(value, str):
                    raise ShellEnvError(
                        f'shell env contributor "{contributor.name}" returned a non-string value for "{key}" '
                        "(omit the key to leave it unset)"
                    )
                values[key] = value
        return MappingProxyType({key: values[key] for key in sorted(values)})


def _jsonl_location(execution: ToolExecution) -> Mapping[str, str]:
    if execution.header is None:
        return {}
    location = execution.locate()
    if location is not None and location.kind == "jsonl":
        return {DSH_SESSION_JSONL: location.path}
    return {}


# -- this process's own environment ----------------------------------------------------------------
class ProcessEnv:
    """The managed values in this process's own environment (a kernel: its ``!`` and ``%%bash`` cells and
    ``os.environ`` read them), kept equal to a snapshot of :meth:`ShellEnvRegistry.collect`.

    :meth:`apply` sets every key of the snapshot except ``DSH_SHELL`` (this process is no shell the
    harness started for a model) and removes every other key the registry declares, so a value that no
    longer applies (``DSH_SESSION_JSONL`` of a JSONL session after a database session became current, a
    ``DSH_SESSION_ID`` inherited from the process that started this one) never lingers. :meth:`withdraw`
    puts back what each key held before the first :meth:`apply`.
    """

    def __init__(self, environ: MutableMapping[str, str] = os.environ) -> None:
        self._environ = environ
        self._before: dict[str, str | None] = {}

    def apply(self, registry: ShellEnvRegistry, snapshot: Mapping[str, str]) -> None:
        wanted = {key: value for key, value in snapshot.items() if key != DSH_SHELL}
        for key in sorted({entry.key for entry in registry.list()} | set(snapshot)):
            if key not in self._before:
                self._before[key] = self._environ.get(key)
            if key in wanted:
                self._environ[key] = wanted[key]
            else:
                self._environ.pop(key, None)

    def withdraw(self) -> None:
        for key, value in self._before.items():
            if value is None:
                self._environ.pop(key, None)
            else:
                self._environ[key] = value
        self._before.clear()


# -- child environments ----------------------------------------------------------------------------
def _overlay(target: dict[str, str], extra: Mapping[str, str]) -> None:
    for key, value in extra.items():
        if os.name == "nt":  # Windows names are case-insensitive: replace any spelling
            for existing in [k for k in target if k.upper() == key.upper()]:
                del target[existing]
        target[key] = value


def scrubbed_env(parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``parent`` (default ``os.environ``) without credentials or ``DSH_*`` names.

    Removed: every variable :meth:`~dsh_jupyter.secrets.SecretMasker.is_secret_variable` calls
    secret (a credential-looking or watched name, a value holding a URL with a password such as
    ``DATABASE_URL=postgres://user:pw@host/db``, a value containing a known secret) and every name whose
    uppercase form starts with ``DSH_``. Then the terminal settings (``NO_COLOR``, ``TERM``, ``PAGER``,
    ``GIT_PAGER``) are applied.
    """
    source = os.environ if parent is None else parent
    masker = default_masker()
    kept = {
        name: value
        for name, value in source.items()
        if not name.upper().startswith(DSH_ENV_PREFIX) and not masker.is_secret_variable(name, value)
    }
    _overlay(kept, TERMINAL_ENV)
    return kept


def child_env(managed: Mapping[str, str] | None = None, caller_env: Mapping[str, str] | None = None,
              parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The full environment of a child process.

    Order: the scrubbed parent environment, then the caller's ordinary ``caller_env``, then the managed
    ``DSH_*`` snapshot last so a managed value always wins.
    """
    env = scrubbed_env(parent)
    if caller_env:
        _overlay(env, caller_env)
    if managed:
        _overlay(env, managed)
    return env
