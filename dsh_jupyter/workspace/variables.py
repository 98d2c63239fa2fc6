"""The user's variables as context: which names count, and a bounded text summary of each.

A summary is plain text for the model, deterministic for a given value and bounded in size whatever the
value: a data frame is described by its shape, column dtypes, null counts and a few rows (never its full
repr); an array by its shape, dtype and a few values; a container by its length and a clipped repr; anything
else by a clipped repr. A repr that raises is reported as such, and one that takes too long is abandoned
(:data:`REPR_SECONDS`), so one odd object never stops the others.

Nothing here imports pandas or numpy: a value is a data frame only when pandas is already imported (it is in
``sys.modules``) and the value is one of its frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import reprlib
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from ..clip import fitted
from ..references.mentions import format_variable_mention
from ..tools.base import Tool, ToolExecution, ToolOutput


class VariableCandidate(TypedDict):
    """One variable the ``@`` popup may offer: ``kind`` is ``dataframe``, ``series``, ``array`` or ``other``,
    ``brief`` its type and shape for people, ``mention`` the ``@[name](dsh-variable:name)`` to insert."""

    name: str
    kind: str
    type: str
    brief: str
    mention: str

#: Characters of one variable's summary (the default).
MAX_SUMMARY_CHARS = 2_000
#: Characters of a whole listing (the ``variables`` tool's answer).
MAX_LISTING_CHARS = 16_000
#: Columns described, rows shown and characters per line in a frame's summary.
MAX_COLUMNS = 20
MAX_ROWS = 5
MAX_LINE_CHARS = 160
#: Rows whose nulls are counted; bigger frames are counted on their first rows only.
NULL_COUNT_ROWS = 1_000_000
#: Values of an array shown.
MAX_ARRAY_VALUES = 8
#: Seconds a repr may take before it is abandoned.
REPR_SECONDS = 0.5

#: Names IPython (and the harness) put in every namespace.
_SHELL_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "dsh"})

#: Sort rank of each kind: data frames first, then series, then arrays, then the rest.
_RANK = {"dataframe": 0, "series": 1, "array": 2, "other": 3}


@dataclass(frozen=True)
class VariableSummary:
    """One variable: ``kind`` (dataframe, series, array, other), ``type_name`` (``DataFrame``), ``brief``
    (``DataFrame 1,000×4``: what a popup row or a reference line shows) and ``text`` (the bounded summary)."""

    name: str
    kind: str
    type_name: str
    brief: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind, "type": self.type_name, "brief": self.brief}


def _pandas_type(value: object, name: str) -> bool:
    pandas = sys.modules.get("pandas")
    kind = getattr(pandas, name, None) if pandas is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


def _numpy_array(value: object) -> bool:
    numpy = sys.modules.get("numpy")
    kind = getattr(numpy, "ndarray", None) if numpy is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


def kind_of(value: object) -> str:
    """``dataframe``, ``series``, ``array`` or ``other``."""
    if _pandas_type(value, "DataFrame"):
        return "dataframe"
    if _pandas_type(value, "Series"):
        return "series"
    if _numpy_array(value):
        return "array"
    return "other"


def is_code(value: object) -> bool:
    """Modules, functions, methods and classes: code, not data."""
    return isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
                              types.MethodType))


def _hidden(name: str, value: object) -> bool:
    """IPython's own names, private names and code objects (modules, functions, classes)."""
    return name.startswith("_") or name in _SHELL_NAMES or is_code(value)


_NOT_HIDDEN = object()


def user_variables(namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None = None) -> list[tuple[str, Any]]:
    """The user's own variables of ``namespace`` in the summary order (data frames, series, arrays, the rest;
    by name within each). ``hidden``: IPython's ``user_ns_hidden``; a name still bound to the value it had there
    is IPython's, one the user re-bound is theirs (as ``%who`` decides)."""
    hidden = hidden or {}
    found = []
    for name, value in list(namespace.items()):
        if not isinstance(name, str) or _hidden(name, value) or hidden.get(name, _NOT_HIDDEN) is value:
            continue
        found.append((name, value))
    return sorted(found, key=lambda item: (_RANK[kind_of(item[1])], item[0]))


def matches(name: str, pattern: str) -> bool:
    """A glob (``df*``, ``sales_?``) matches whole names; text without ``*``, ``?`` or ``[`` matches names that
    contain it."""
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def _clip_lines(text: str, width: int = MAX_LINE_CHARS) -> str:
    return "\n".join(line if len(line) <= width else line[: width - 1] + "…" for line in text.splitlines())


def _timed(fn: Callable[[], str], seconds: float = REPR_SECONDS) -> str:
    """``fn()`` in a helper thread, given ``seconds``; a failure or a timeout is described instead."""
    outcome: list[str] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:
            outcome.append(f"(its repr failed: {type(exc).__name__}: {fitted(str(exc), 120)})")

    worker = threading.Thread(target=run, name="dsh-variable-repr", daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        return f"(its repr took longer than {seconds:g} s; not shown)"
    return outcome[0]


class _ClippedRepr(reprlib.Repr):
    """``reprlib`` with room for a useful glimpse, and reprs that raise reported in place."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = 10
        self.maxdict = 10
        self.maxstring = 200
        self.maxlong = 60
        self.maxother = 300

    def repr_instance(self, x: object, level: int) -> str:
        try:
            text = repr(x)
        except Exception as exc:
            return f"<{type(x).__name__}: repr failed: {type(exc).__name__}>"
        return fitted(text, self.maxother)


_REPR = _ClippedRepr()


def clipped_repr(value: object, limit: int = MAX_SUMMARY_CHARS) -> str:
    """A bounded repr of any value (reprlib-style for containers), guarded against raising and slow reprs."""
    return fitted(_timed(lambda: _REPR.repr(value)), limit)


def _count(n: int) -> str:
    return f"{n:,}"


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if nbytes < 1000 or unit == "GB":
            return f"{nbytes:,.0f} {unit}" if unit == "bytes" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1000
    return f"{nbytes:,.1f} TB"  # not reached


def _dims(shape: tuple[int, ...]) -> str:
    return "×".join(_count(int(n)) for n in shape) if shape else "scalar"


def _frame_summary(name: str, df: Any) -> tuple[str, str]:
    rows, cols = (int(n) for n in df.shape)
    brief = f"DataFrame {_dims((rows, cols))}"
    lines = [f"{name}: {brief}"]
    with contextlib.suppress(Exception):
        lines[0] += f", {_size(float(df.memory_usage(index=True, deep=False).sum()))}"
    try:  # rows and columns cut before anything is computed: a huge frame is never copied whole
        nulls = [int(n) for n in df.iloc[:NULL_COUNT_ROWS, :MAX_COLUMNS].isna().sum().tolist()]
    except Exception:
        nulls = []
    where = f" in the first {_count(NULL_COUNT_ROWS)} rows" if rows > NULL_COUNT_ROWS else ""
    lines.append(f"columns (dtype, nulls{where}):")
    for index, (column, dtype) in enumerate(df.dtypes.iloc[:MAX_COLUMNS].items()):
        null = f", {_count(nulls[index])} null" if index < len(nulls) else ""
        lines.append(f"  {fitted(str(column), 60)}: {dtype}{null}")
    if cols > MAX_COLUMNS:
        lines.append(f"  … {_count(cols - MAX_COLUMNS)} more columns")
    if rows:
        first = df.iloc[:MAX_ROWS, :MAX_COLUMNS]
        head = _timed(lambda: first.to_string(max_colwidth=30, show_dimensions=False))
        lines.append(f"first {min(rows, MAX_ROWS)} rows:")
        lines.append(_clip_lines(head))
    return brief, "\n".join(lines)


def _series_summary(name: str, series: Any) -> tuple[str, str]:
    length = len(series)
    brief = f"Series {_count(length)}"
    lines = [f"{name}: {brief}, dtype {series.dtype}, name {fitted(repr(series.name), 60)}"]
    try:
        nulls = int(series.iloc[:NULL_COUNT_ROWS].isna().sum())  # the first rows only: bounded
        where = f" in the first {_count(NULL_COUNT_ROWS)}" if length > NULL_COUNT_ROWS else ""
        lines.append(f"nulls{where}: {_count(nulls)}")
    except Exception:
        pass
    if length:
        head = _timed(lambda: series.head(MAX_ROWS).to_string(max_rows=MAX_ROWS))
        lines.append(f"first {min(length, MAX_ROWS)} values:")
        lines.append(_clip_lines(head))
    return brief, "\n".join(lines)


def _array_summary(name: str, array: Any) -> tuple[str, str]:
    shape = tuple(int(n) for n in array.shape)
    brief = f"ndarray {_dims(shape)} {array.dtype}"
    lines = [f"{name}: {brief}, {_size(float(array.nbytes))}"]
    if array.size:
        first = array.flat[:MAX_ARRAY_VALUES].tolist()  # only these elements are read, whatever the layout
        values = ", ".join(fitted(_REPR.repr(v), 40) for v in first)
        more = ", …" if array.size > MAX_ARRAY_VALUES else ""
        lines.append(f"first values: [{values}{more}]")
    return brief, "\n".join(lines)


def _sized(value: object) -> int | None:
    if isinstance(value, (list, tuple, dict, set, frozenset, str, bytes, bytearray)):
        return len(value)
    return None


def summarise(name: str, value: object, limit: int = MAX_SUMMARY_CHARS) -> VariableSummary:
    """The bounded summary of one variable (at most ``limit`` characters; never raises)."""
    kind = kind_of(value)
    type_name = type(value).__name__
    describe = {"dataframe": _frame_summary, "series": _series_summary, "array": _array_summary}.get(kind)
    if describe is not None:
        try:
            brief, text = describe(name, value)
            return VariableSummary(name, kind, type_name, brief, fitted(text, limit))
        except Exception as exc:  # an odd subclass: fall back to the clipped repr
            note = f" (could not describe it: {type(exc).__name__})"
            return VariableSummary(name, kind, type_name, type_name,
                                   fitted(f"{name}: {type_name}{note}\n{clipped_repr(value, limit)}", limit))
    length = _sized(value)
    brief = f"{type_name} len {_count(length)}" if length is not None else type_name
    text = fitted(f"{name}: {brief} = {clipped_repr(value, limit)}", limit)
    return VariableSummary(name, kind, type_name, brief, text)


def brief_of(value: object) -> str:
    """The short form only (``DataFrame 1,000×4``, ``ndarray 3×4 float64``, ``list len 3``): cheap, for popups."""
    kind = kind_of(value)
    try:
        if kind == "dataframe":
            return f"DataFrame {_dims(tuple(getattr(value, 'shape', ())))}"
        if kind == "series":
            return f"Series {_count(len(value))}"  # type: ignore[arg-type]
        if kind == "array":
            return f"ndarray {_dims(tuple(getattr(value, 'shape', ())))} {getattr(value, 'dtype', '')}"
    except Exception:
        return type(value).__name__
    length = _sized(value)
    return f"{type(value).__name__} len {_count(length)}" if length is not None else type(value).__name__


@dataclass(frozen=True)
class Listing:
    """What the ``variables`` tool answers: summaries in order, unknown names, and names left out for room."""

    summaries: list[VariableSummary]
    unknown: list[str]
    left_out: list[str]

    def text(self) -> str:
        parts = [s.text for s in self.summaries]
        if not parts and not self.unknown:
            parts.append("No user variables are defined in the notebook yet.")
        if self.unknown:
            parts.append("Not defined in the notebook: " + ", ".join(self.unknown))
        if self.left_out:
            shown = ", ".join(self.left_out[:40]) + (", …" if len(self.left_out) > 40 else "")
            parts.append(f"{len(self.left_out)} more variable(s) left out for room (ask for them by name): {shown}")
        return "\n\n".join(parts)


def list_variables(namespace: Mapping[str, Any], *, names: Iterable[str] | None = None, pattern: str | None = None,
                   hidden: Mapping[str, Any] | None = None, limit: int = MAX_LISTING_CHARS,
                   per_variable: int = MAX_SUMMARY_CHARS) -> Listing:
    """Summaries of the user's variables (or of ``names``, any kind, modules and functions included; or of the
    names matching ``pattern``), within ``limit`` characters in all."""
    unknown: list[str] = []
    if names is not None:
        wanted = list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in namespace]
        chosen = sorted(((n, namespace[n]) for n in wanted if n in namespace),
                        key=lambda item: (_RANK[kind_of(item[1])], item[0]))
    else:
        chosen = user_variables(namespace, hidden)
    if pattern:
        chosen = [(n, v) for n, v in chosen if matches(n, pattern)]
    summaries: list[VariableSummary] = []
    left_out: list[str] = []
    used = 0
    for name, value in chosen:
        if left_out:
            left_out.append(name)
            continue
        summary = summarise(name, value, min(per_variable, max(200, limit - used)))
        if used + len(summary.text) > limit and summaries:
            left_out.append(name)
            continue
        summaries.append(summary)
        used += len(summary.text) + 2
    return Listing(summaries, unknown, left_out)


# -- the ``variables`` tool ------------------------------------------------------------------------------


class NamespaceShell(Protocol):
    """The part of IPython's shell the variables need: the namespace and IPython's own entries of it."""

    @property
    def user_ns(self) -> dict[str, Any]: ...

    @property
    def user_ns_hidden(self) -> dict[str, Any]: ...


def shell_listing(shell: NamespaceShell, **options: Any) -> Listing:
    """:func:`list_variables` over a shell's namespace (IPython's own names left out)."""
    return list_variables(shell.user_ns, hidden=getattr(shell, "user_ns_hidden", None), **options)


class VariablesTool(Tool):
    """The ``variables`` tool: the user's variables with their type and a bounded summary (reads only)."""

    name = "variables"
    effect = "read"
    description = (
        "List the user's variables in the Jupyter kernel with their type and a bounded summary: data frames "
        "(shape, column dtypes, null counts, first rows), arrays (shape, dtype, first values), other values "
        "(a clipped repr). Data frames come first. Pass `names` for particular variables (modules and functions "
        "too) or `pattern` to filter by name."
    )

    def __init__(self, shell: NamespaceShell) -> None:
        self.shell = shell
        self.parameters = {
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"},
                          "description": "Variables to describe (default: all the user's variables)."},
                "pattern": {"type": "string",
                            "description": "Only names matching this glob (`df*`); plain text matches names "
                            "containing it."},
            },
        }

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        names = arguments.get("names")
        pattern = arguments.get("pattern")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            return ToolOutput("Error: 'names' must be a list of variable names.", is_error=True)
        if pattern is not None and not isinstance(pattern, str):
            return ToolOutput("Error: 'pattern' must be a string such as \"df*\".", is_error=True)
        loop = asyncio.get_running_loop()
        listing = await loop.run_in_executor(
            None, lambda: shell_listing(self.shell, names=names or None, pattern=pattern or None))
        return ToolOutput(listing.text(), meta={"variables": [s.to_json() for s in listing.summaries],
                                                "unknown": listing.unknown})


# -- candidates for ``@`` completion -------------------------------------------------------------------


def variable_candidates(shell: NamespaceShell, query: str = "", limit: int = 50) -> list[VariableCandidate]:
    """The user's variables whose name contains ``query`` (case-insensitive), data frames first, at most
    ``limit``: ``{name, kind, type, brief, mention}`` (cheap: shapes only, no summaries)."""
    needle = query.lower()
    rows: list[VariableCandidate] = []
    for name, value in user_variables(shell.user_ns, getattr(shell, "user_ns_hidden", None)):
        if needle and needle not in name.lower():
            continue
        rows.append({"name": name, "kind": kind_of(value), "type": type(value).__name__, "brief": brief_of(value),
                     "mention": format_variable_mention(name)})
        if len(rows) >= limit:
            break
    return rows
