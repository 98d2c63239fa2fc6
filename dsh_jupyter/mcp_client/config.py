"""Which MCP servers the agent may use: Claude-style ``mcpServers`` read from three places and merged.

The shape is the one Claude Code, Claude Desktop and Cursor read::

    {"mcpServers": {
        "notes": {"command": "uvx", "args": ["notes-mcp"], "env": {"NOTES_DIR": "~/notes"}},
        "search": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}},
        "old": {"command": "old-server", "disabled": true}}}

Sources, later ones winning server by server (:func:`load_servers`): the user file (``$DSH_HOME/mcp.json``
unless ``DshMagics.mcp_config_file`` names another), the project file ``.mcp.json`` in the notebook's folder
(``DshMagics.mcp_project_file``), then the ``DshMagics.mcp_servers`` traitlet (the same ``mcpServers``
mapping). A project file's servers start only once the person trusts the file as it is (:mod:`.trust`).
``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``, ``url`` and ``headers`` are
replaced from the kernel's environment, so a token need not be written in a file.

Nothing here starts a server or imports the ``mcp`` SDK: this module is read on every turn.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..secrets import default_masker, is_credential_name
from .trust import ProjectTrust, digest

Transport = Literal["stdio", "http"]

#: A server name: it becomes part of tool names (``mcp__<server>__<tool>``).
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
#: The keys a server entry may hold (Claude Code's), by transport.
STDIO_KEYS = frozenset({"type", "command", "args", "env", "cwd", "disabled"})
HTTP_KEYS = frozenset({"type", "url", "headers", "disabled"})
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: The project file's name in the notebook's folder (Claude Code's project-scoped file).
PROJECT_FILE = ".mcp.json"
USER_FILE = "mcp.json"


class McpConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the file or the setting."""


@dataclass(frozen=True)
class ServerConfig:
    """One configured server, variables already replaced. ``origin`` says where it was written."""

    name: str
    transport: Transport
    origin: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    disabled: bool = False
    #: False for a project file's server while that file is not trusted as it is now (:mod:`.trust`).
    trusted: bool = True

    def target(self) -> str:
        """What the server is, in one line: its command line or its URL."""
        if self.transport == "http":
            return self.url
        return " ".join([self.command, *self.args])


@dataclass
class ServerSet:
    """The merged configuration: servers by name (in the order first written) and the problems found."""

    servers: dict[str, ServerConfig] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: For one file: the fingerprint of the bytes read (:func:`~.trust.digest`); empty when there was none.
    fingerprint: str = ""


class _Unexpanded(dict[str, str]):
    """The environment of a file not trusted yet: its ``${VAR}`` stay as written (nothing of the kernel's
    environment, a token say, goes into what an untrusted file defines or into ``%dsh mcp``'s table)."""


#: :func:`read_file`'s ``env`` for a file not trusted yet.
UNEXPANDED: Mapping[str, str] = _Unexpanded()


def _expand(value: str, where: str, env: Mapping[str, str]) -> str:
    if env is UNEXPANDED:
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise McpConfigError(f"{where} uses ${{{name}}}, which is not set in the kernel's environment; set it "
                             f"(or write ${{{name}:-default}})")

    return _VARIABLE.sub(replace, value)


def _string(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise McpConfigError(f"{where}: \"{key}\" must be a string, not {json.dumps(value)}")
    return value


def _pairs(entry: Mapping[str, Any], key: str, where: str, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    value = entry.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f"{where}: \"{key}\" must be an object of strings, such as {{\"NAME\": \"value\"}}")
    return tuple((k, _expand(v, f"{where} \"{key}\".{k}", env)) for k, v in value.items())


def parse_server(name: str, entry: Any, origin: str, env: Mapping[str, str] | None = None) -> ServerConfig:
    """One ``mcpServers`` entry as a :class:`ServerConfig`, or :class:`McpConfigError` saying what to fix."""
    env = os.environ if env is None else env
    where = f"MCP server {name!r} in {origin}"
    if not SERVER_NAME.match(name):
        raise McpConfigError(f"MCP server name {name!r} in {origin} is not usable: use 1-40 letters, digits, "
                             "'-' or '_' (it becomes part of the tool names)")
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where} must be an object such as {{\"command\": \"...\"}} or {{\"url\": \"...\"}}")
    kind = entry.get("type")
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
        more = " (SSE servers: use their Streamable HTTP endpoint)" if kind == "sse" else ""
        raise McpConfigError(f"{where}: \"type\" {json.dumps(kind)} is not supported; use \"stdio\" or \"http\"{more}")
    transport: Transport = "http" if kind not in (None, "stdio") or ("url" in entry and "command" not in entry) \
        else "stdio"
    known = HTTP_KEYS if transport == "http" else STDIO_KEYS
    unknown = sorted(set(entry) - known)
    if unknown:
        raise McpConfigError(f"{where} has unknown key(s) {', '.join(map(json.dumps, unknown))}; "
                             f"a {transport} server takes {', '.join(sorted(known))}")
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise McpConfigError(f"{where}: \"disabled\" must be true or false")
    if transport == "http":
        url = _expand(_string(entry, "url", where), f"{where} \"url\"", env).strip()
        if not re.match(r"^https?://", url) and not (env is UNEXPANDED and url.startswith("${")):
            raise McpConfigError(f"{where} needs a \"url\" starting with http:// or https:// (got {json.dumps(url)})")
        return ServerConfig(name, "http", origin, url=url, headers=_pairs(entry, "headers", where, env),
                            disabled=disabled)
    command = _expand(_string(entry, "command", where), f"{where} \"command\"", env).strip()
    if not command:
        raise McpConfigError(f"{where} needs a \"command\" (the program that serves it over stdio) or a \"url\"")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}: \"args\" must be a list of strings, such as [\"-m\", \"server\"]")
    cwd = _expand(_string(entry, "cwd", where), f"{where} \"cwd\"", env)
    return ServerConfig(name, "stdio", origin, command=command,
                        args=tuple(_expand(a, f"{where} \"args\"", env) for a in args),
                        env=_pairs(entry, "env", where, env), cwd=os.path.expanduser(cwd), disabled=disabled)


def parse_servers(document: Any, origin: str, env: Mapping[str, str] | None = None) -> ServerSet:
    """Every entry of one source (``{"mcpServers": {...}}``, or the inner mapping itself for the traitlet)."""
    found = ServerSet()
    servers = document.get("mcpServers", document) if isinstance(document, Mapping) else document
    if not isinstance(servers, Mapping):
        found.problems.append(f"{origin} must hold {{\"mcpServers\": {{\"name\": {{...}}}}}}")
        return found
    if isinstance(document, Mapping) and "mcpServers" in document:
        extra = sorted(set(document) - {"mcpServers"})
        if extra:
            found.problems.append(f"{origin} has unknown top-level key(s) {', '.join(map(json.dumps, extra))} "
                                  "(only \"mcpServers\" is read)")
    for name, entry in servers.items():
        try:
            found.servers[str(name)] = parse_server(str(name), entry, origin, env)
        except McpConfigError as exc:
            found.problems.append(str(exc))
    return found


def _read_document(path: Path) -> tuple[Any, str] | ServerSet:
    """One JSON file's document and the fingerprint of its bytes (:func:`~.trust.digest`); or, for a missing
    file, an empty :class:`ServerSet`, and for an unreadable one, a set holding the problem."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        return ServerSet()
    except (OSError, UnicodeDecodeError) as exc:
        return ServerSet(problems=[f"could not read the MCP configuration {path}: {exc}"])
    try:
        return json.loads(text), digest(data)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        at = f" at line {line}" if line else ""
        return ServerSet(problems=[f"the MCP configuration {path} is not valid JSON{at} ({exc}); fix the file "
                                   "(the agent runs without its servers until then)"])


def read_file(path: Path, env: Mapping[str, str] | None = None,
              trusted: Callable[[str], bool] | None = None) -> ServerSet:
    """The servers of one JSON file; a missing file holds none, an unreadable one is a problem. With
    ``trusted`` (asked with the fingerprint of the bytes read), a file it does not trust is read as written
    (:data:`UNEXPANDED`) and its servers are marked untrusted."""
    read = _read_document(path)
    if isinstance(read, ServerSet):
        return read
    document, fingerprint = read
    if trusted is not None and not trusted(fingerprint):
        found = parse_servers(document, str(path), UNEXPANDED)
        found.servers = {name: replace(config, trusted=False) for name, config in found.servers.items()}
    else:
        found = parse_servers(document, str(path), env)
    found.fingerprint = fingerprint
    return found


def load_servers(user_file: Path | None, project_file: Path | None, setting: Mapping[str, Any] | None,
                 env: Mapping[str, str] | None = None, *, trust: ProjectTrust | None = None) -> ServerSet:
    """The merged configuration: user file, project file, then ``DshMagics.mcp_servers``; a server defined
    again replaces the earlier definition as a whole (``"disabled": true`` there turns it off).

    The project file's servers are marked untrusted unless ``trust`` holds the file as it is now (without a
    ``trust`` record nothing in it is trusted); a problem line says how to trust it.
    """
    merged = ServerSet()
    sources = [read_file(user_file, env)] if user_file is not None else []
    if project_file is not None:
        # A file not trusted yet is read as written: it gets nothing of the kernel's environment.
        project = read_file(project_file, env, lambda fingerprint: trust is not None and
                            trust.trusts(project_file, fingerprint))
        if any(not config.trusted for config in project.servers.values()):
            project.problems.append(
                f"{project_file} (a project file, which comes with the folder) defines MCP server(s) "
                f"{', '.join(sorted(project.servers))}; they start only once you have read the file and run "
                "`%dsh mcp --trust` (a change to the file asks again)")
        sources.append(project)
    if setting:
        sources.append(parse_servers(dict(setting), "DshMagics.mcp_servers", env))
    for source in sources:
        merged.servers.update(source.servers)
        merged.problems.extend(source.problems)
    for config in merged.servers.values():
        if config.trusted:
            _watch_secrets(config)
    return merged


def _watch_secrets(config: ServerConfig) -> None:
    """Header values and credential-looking ``env`` values never show in results, cells or logs."""
    masker = default_masker()
    for name, value in config.env:
        if is_credential_name(name):
            masker.add_value(value)
    for name, value in config.headers:
        if name.lower() in ("authorization", "proxy-authorization", "cookie") or is_credential_name(
                name.upper().replace("-", "_")):
            masker.add_value(value.split(" ", 1)[1] if name.lower().endswith("authorization") and " " in value
                             else value)


def command_allowed(command: str, allowlist: Sequence[str] | None) -> bool:
    """Whether a stdio ``command`` may start under an admin's allowlist (``None``: any command).

    An entry without a ``/`` allows exactly that command name (found on ``PATH``, as written in the
    configuration); an entry with one allows the program at that path, however the configuration spells it.
    """
    if allowlist is None:
        return True
    for allowed in allowlist:
        if "/" not in allowed:
            if command == allowed:
                return True
            continue
        resolved = shutil.which(command) if "/" not in command else command
        if resolved is not None and os.path.realpath(resolved) == os.path.realpath(os.path.expanduser(allowed)):
            return True
    return False
