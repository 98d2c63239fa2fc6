"""The tool seam: what a tool is, what one execution knows, and the registry the agent loop calls.

A host (the notebook, a test) registers :class:`Tool` objects in a :class:`ToolRegistry`; the agent
loop hands the model :meth:`ToolRegistry.specs` and runs each call through
:meth:`ToolRegistry.execute`. Bad calls (unknown tool, arguments that are not a JSON object, missing
required arguments) come back as error :class:`ToolOutput` values so the model can correct itself.
Every result leaves :meth:`ToolRegistry.execute` with secret values masked.
"""

from __future__ import annotations

import abc
import asyncio
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..images import ToolImage
from ..secrets import mask_fields
from ..session import SessionHeader
from ..store.base import SessionLocation

Disposer = Callable[[], None]

#: What a tool can do: ``"read"`` only looks (never asked about); ``"act"`` can change the user's machine or
#: notebook (asked about in the ``ask`` approval mode, refused in ``read-only``).
Effect = Literal["read", "act"]

#: Tool names the OpenAI-compatible function-calling API accepts.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: The most characters of text a tool result hands the model (python cells, MCP tools); the rest is cut with a note.
MAX_RESULT_CHARS = 20_000


def _no_location() -> SessionLocation | None:
    return None


@dataclass(frozen=True)
class ToolExecution:
    """Everything one tool call may know about where it runs.

    ``header`` is ``None`` when no agent owns the call. ``locate`` is the session store's
    ``locate(header)`` bound to this header and queried at execution time (it never creates or flushes
    anything). ``session_dir`` is the session's artifact folder, when the store has one. ``cancel`` is
    set when the user interrupts; tools must notice it promptly. ``background`` marks an execution the
    host already runs detached from the turn.
    """

    call_id: str
    header: SessionHeader | None
    locate: Callable[[], SessionLocation | None]
    session_dir: Path | None
    cwd: str
    cancel: threading.Event
    background: bool = False

    @classmethod
    def create(cls, call_id: str, cwd: str, *, header: SessionHeader | None = None,
               locate: Callable[[], SessionLocation | None] | None = None,
               session_dir: Path | None = None, cancel: threading.Event | None = None,
               background: bool = False) -> ToolExecution:
        """Build an execution with sensible defaults (no location, a fresh cancel event)."""
        return cls(call_id=call_id, header=header, locate=locate or _no_location, session_dir=session_dir,
                   cwd=cwd, cancel=cancel if cancel is not None else threading.Event(), background=background)

    @property
    def session_id(self) -> str | None:
        return self.header.id if self.header is not None else None


@dataclass(frozen=True)
class ToolOutput:
    """What a tool hands back to the model: text, whether it is an error, host-only metadata, images."""

    text: str
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    images: tuple[ToolImage, ...] = ()


class Tool(abc.ABC):
    """A model-callable tool. Subclasses set ``name``, ``description`` and ``parameters`` (JSON schema).

    ``effect`` says whether the tool only reads (``"read"``) or can change something (``"act"``, the default,
    so a tool that forgets to say is asked about).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    effect: Effect = "act"

    @abc.abstractmethod
    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        """Run one call. Must return promptly (killing any child work) once ``execution.cancel`` is set."""

    def describe(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        """What a person asked to approve this call is shown, and its language for highlighting
        (``"python"``, ``"diff"`` ...); ``None``: the generic description (the exact command or code, else
        the arguments as JSON). Must be quick and must not fail: it runs before every acting call."""
        return None

    def spec(self) -> dict[str, Any]:
        """The neutral description the model sees: ``{name, description, parameters}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolRegistryError(ValueError):
    """A tool cannot be registered (bad name, bad schema, or the name is taken)."""


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "number": (int, float),
    "integer": (int,),
    "null": (type(None),),
}


def _type_matches(value: Any, expected: str | list[str]) -> bool:
    names = [expected] if isinstance(expected, str) else list(expected)
    for name in names:
        kinds = _JSON_TYPES.get(name)
        if kinds is None:
            return True  # a type we do not check
        if isinstance(value, bool) and name in ("number", "integer"):
            continue
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, kinds):
            return True
    return False


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """A shallow check of call arguments against a tool's object schema; the problem, or ``None``.

    It covers what models most often get wrong (a missing required argument, a wrong top-level type);
    tools still validate their own values.
    """
    required = schema.get("required") or []
    missing = [name for name in required if name not in arguments]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    properties = schema.get("properties") or {}
    for name, value in arguments.items():
        prop = properties.get(name)
        if isinstance(prop, Mapping) and "type" in prop and not _type_matches(value, prop["type"]):
            return f"argument {name!r} must be of type {prop['type']}, got {type(value).__name__}"
    return None


def parse_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """Decode model-supplied arguments to a dict, or return a message explaining why that failed."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str):
        return f"tool arguments must be a JSON object, got {type(arguments).__name__}"
    if not arguments.strip():
        return {}
    try:
        decoded = json.loads(arguments)
    except ValueError as exc:
        return f"tool arguments are not valid JSON ({exc}); send a JSON object such as {{\"command\": \"ls\"}}"
    if not isinstance(decoded, dict):
        return f"tool arguments must be a JSON object, got {type(decoded).__name__}"
    return decoded


class ToolRegistry:
    """The tools a session offers, by name. Registration order is the order the model sees."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._lock = threading.Lock()

    def register(self, tool: Tool) -> Disposer:
        """Add ``tool``; returns a disposer that removes exactly this registration (idempotent)."""
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
            raise ToolRegistryError(
                f"tool name {name!r} is not valid: use 1-64 letters, digits, '_' or '-'"
            )
        if not isinstance(getattr(tool, "description", None), str):
            raise ToolRegistryError(f"tool {name!r} needs a string description")
        parameters = getattr(tool, "parameters", None)
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            raise ToolRegistryError(f"tool {name!r} needs a JSON-schema parameters object with \"type\": \"object\"")
        with self._lock:
            if name in self._tools:
                raise ToolRegistryError(
                    f"a tool named {name!r} is already registered; unregister it first or pick another name"
                )
            self._tools[name] = tool

        def dispose() -> None:
            with self._lock:
                if self._tools.get(name) is tool:
                    del self._tools[name]

        return dispose

    def unregister(self, name: str) -> None:
        """Remove the tool called ``name``; an unknown name raises ``KeyError``."""
        with self._lock:
            if name not in self._tools:
                raise KeyError(f"no tool named {name!r} is registered")
            del self._tools[name]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def effect(self, name: str) -> Effect:
        """What a call of ``name`` can do; an unknown name only fails, so it counts as reading."""
        tool = self._tools.get(name)
        return "read" if tool is None else tool.effect

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        """Neutral tool descriptions ``{name, description, parameters}`` in registration order."""
        return [tool.spec() for tool in list(self._tools.values())]

    def openai_specs(self) -> list[dict[str, Any]]:
        """The same descriptions in the chat-completions ``tools`` shape."""
        return [{"type": "function", "function": spec} for spec in self.specs()]

    async def execute(self, name: str, arguments: str | Mapping[str, Any] | None,
                      execution: ToolExecution) -> ToolOutput:
        """Run one model call. Mistakes the model can fix come back as error outputs, never exceptions.

        ``asyncio.CancelledError`` still propagates (the caller cancelled the task); any other exception
        raised by a tool becomes an error output naming the tool. Every output comes back with secret
        values masked (:mod:`dsh_jupyter.secrets`): this is the one place tool results pass through.
        """
        return mask_fields(await self._execute(name, arguments, execution))

    async def _execute(self, name: str, arguments: str | Mapping[str, Any] | None,
                       execution: ToolExecution) -> ToolOutput:
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return ToolOutput(f"Error: there is no tool named {name!r}. Available tools: {available}.",
                              is_error=True, meta={"error": "unknown-tool"})
        parsed = parse_arguments(arguments)
        if isinstance(parsed, str):
            return ToolOutput(f"Error calling {name}: {parsed}", is_error=True, meta={"error": "invalid-arguments"})
        problem = check_arguments(tool.parameters, parsed)
        if problem is not None:
            return ToolOutput(f"Error calling {name}: {problem}", is_error=True, meta={"error": "invalid-arguments"})
        if execution.cancel.is_set():
            return ToolOutput(f"{name} was not run: the turn was cancelled.", is_error=True,
                              meta={"cancelled": True})
        try:
            return await tool.run(parsed, execution)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug must not end the turn; the model sees what failed
            return ToolOutput(f"Error: tool {name} failed: {type(exc).__name__}: {exc}", is_error=True,
                              meta={"error": "tool-failed"})
