"""``%dsh fix``: a bounded prompt from the last failed cell, asking the model for a corrected cell.

The prompt holds the failing cell's source, the error (name, value, a trimmed traceback without terminal
colours), the line that failed, and summaries of the variables the cell uses (names read with :mod:`ast`).
It is sent as an ordinary turn of the current session, so the answer streams into the ``%dsh fix`` cell
and the prompt is in the session log. The offline model recognises it by
:data:`~dsh_jupyter.models.offline.FIX_REQUEST_MARKER` and answers with the exception and the failing line.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..clip import fitted
from ..models.offline import FIX_EXCEPTION_LABEL, FIX_LINE_LABEL, FIX_REQUEST_MARKER
from .document import Cell
from .variables import is_code, list_variables

#: Characters of the whole prompt, and of its parts.
MAX_FIX_PROMPT_CHARS = 12_000
MAX_SOURCE_CHARS = 5_000
MAX_TRACEBACK_CHARS = 3_000
MAX_VARIABLES_CHARS = 3_000
#: Characters of each variable's summary in the prompt.
MAX_VARIABLE_CHARS = 1_200

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_IDENTIFIER = re.compile(r"[^\W\d]\w*")

NO_ERROR = ("no cell has failed since dsh was loaded in this kernel, so there is nothing to fix; run the "
            "failing cell again, then %dsh fix")


@dataclass(frozen=True)
class FixRequest:
    """The prompt for one ``%dsh fix`` and what it is about (for the line shown before the answer)."""

    prompt: str
    cell_id: str
    exception: str
    line_number: int | None
    line: str | None

    def heading(self) -> str:
        where = f" at line {self.line_number}" if self.line_number is not None else ""
        return f"fixing the last error: {self.exception}{where} (cell {self.cell_id})"


_SCHEMES = re.compile(r"dsh-(session|variable|cell):")
#: ``@cell``, the notebook's own mention syntax (a ``@cell`` decorator in the failing code must stay code).
_CELL_WORD = re.compile(r"@(?=cell(?![\w-]))")


def defused(text: str) -> str:
    """``text`` with reference URIs and ``@cell`` broken by a word joiner, so code that spells one is never read
    as a mention when the prompt is sent (the words the user adds to ``%dsh fix`` may still mention things)."""
    return _CELL_WORD.sub("@\u2060", _SCHEMES.sub("dsh-\\1\u2060:", text))


def strip_colours(text: str) -> str:
    """Terminal colour codes removed (IPython colours its tracebacks)."""
    return _ANSI.sub("", text)


def used_names(source: str, transform: Callable[[str], str] | None = None) -> list[str]:
    """The names ``source`` reads, in order of first use (magics turned into Python first when ``transform``
    is given; a cell that does not parse falls back to every identifier in it)."""
    try:
        tree = ast.parse(transform(source) if transform is not None else source)
    except (SyntaxError, ValueError, TypeError):
        return list(dict.fromkeys(m.group(0) for m in _IDENTIFIER.finditer(source)))
    names = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]
    return [n for n in dict.fromkeys(names) if not hasattr(builtins, n)]


def _trimmed_traceback(lines: tuple[str, ...]) -> str:
    """The traceback without colours, its end kept when it is long (the end says what failed)."""
    text = strip_colours("\n".join(lines)).strip("\n")
    if len(text) <= MAX_TRACEBACK_CHARS:
        return text
    kept = text[-(MAX_TRACEBACK_CHARS - 40):]
    return f"… ({len(text) - len(kept):,} earlier characters left out)\n{kept}"


def failing_line(cell: Cell, traceback_text: str) -> tuple[int | None, str | None]:
    """The line number (1-based) and text of the cell's line that failed, read from IPython's traceback
    (``Cell In[3], line 2``; for a syntax error ``line 2`` of ``Cell In[3]``)."""
    count = cell.execution_count
    spot = rf"Cell In\[{count}\], line (\d+)" if count is not None else r"Cell In\[\d+\], line (\d+)"
    match = re.search(spot, traceback_text) or re.search(r'File "<[^>]*>", line (\d+)', traceback_text)
    if match is None:
        return None, None
    number = int(match.group(1))
    lines = cell.source.splitlines()
    return number, (lines[number - 1] if 0 < number <= len(lines) else None)


def build_fix_request(cell: Cell, namespace: Mapping[str, Any], *, instruction: str = "",
                      transform: Callable[[str], str] | None = None, can_edit: bool = False) -> FixRequest:
    """The bounded prompt asking for a corrected version of ``cell`` (its last run failed)."""
    error = cell.error
    name = (error.ename if error is not None else None) or "Error"
    value = (error.evalue if error is not None else None) or ""
    exception = f"{name}: {value}" if value else name
    traceback_text = _trimmed_traceback(error.traceback if error is not None else ())
    number, line = failing_line(cell, traceback_text)
    used = [n for n in used_names(cell.source, transform)
            if n in namespace and not n.startswith("_") and not is_code(namespace[n])]
    summaries = list_variables(namespace, names=used, limit=MAX_VARIABLES_CHARS,
                               per_variable=MAX_VARIABLE_CHARS).summaries
    answer = ("Answer with exactly one ```python code block holding the whole corrected cell, then at most two "
              "sentences on what was wrong.")
    if can_edit:
        answer += (f" You may instead propose the corrected cell with the notebook_edit tool (action replace, "
                   f"cell id {cell.id}), so the user can accept or reject it.")
    parts = [
        f"{FIX_REQUEST_MARKER} The notebook cell below failed. Propose a corrected version of the cell.",
        answer,
    ]
    if instruction.strip():
        parts.append(f"The user adds: {fitted(instruction.strip(), 500)}")
    parts.append(defused(f"{FIX_EXCEPTION_LABEL}{fitted(exception, 300)}"))
    if number is not None:
        shown = f": {fitted(line.strip(), 200)}" if line is not None else ""
        parts.append(defused(f"{FIX_LINE_LABEL}{number}{shown}"))
    source = defused(fitted(cell.source.rstrip(), MAX_SOURCE_CHARS))
    parts.append(f"## The failing cell (id {cell.id})\n```python\n{source}\n```")
    if traceback_text:
        parts.append(f"## Traceback\n```\n{defused(traceback_text)}\n```")
    if summaries:
        parts.append("## Variables the cell uses (summaries, now)\n"
                     + defused("\n\n".join(s.text for s in summaries)))
    prompt = fitted("\n\n".join(parts), MAX_FIX_PROMPT_CHARS)
    return FixRequest(prompt, cell.id, exception, number, line)
