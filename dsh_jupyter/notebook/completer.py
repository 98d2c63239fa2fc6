"""``@`` completion inside ``%%dsh`` cell bodies, through IPython's kernel-side completer.

Every Jupyter frontend (JupyterLab, Notebook 7, VS Code, …) sends ``complete_request`` with the
whole cell, so one IPython matcher serves them all. Inside a ``%%dsh`` body, after an ``@`` that is
not part of a word, the matcher offers:

1. the user's variables (type ``variable``; data frames first, then series, arrays and the rest), inserted
   as the mention ``@[df](dsh-variable:df)``: when the prompt is sent the variable's bounded summary is frozen
   into the session log (see :mod:`.variable_refs`);
2. sessions (type ``session``): the text inserted is the canonical mention
   ``@[label](dsh-session:…)``, with the label's terminal controls escaped and the real id in the
   URI, replacing the ``@fragment`` typed so far;
3. then files relative to the notebook folder (type ``path``), inserted as ``@path``.

Everywhere else the matcher returns nothing and suppresses nothing, so ordinary completion is
untouched. Host failures are logged and never reach the user's completion request.

The host is a :class:`~.protocols.CompletionHost`: ``host.candidates(query, limit=None)`` (remote
candidate form, rank order) and ``host.file_candidates(query, limit=50) -> list[str]``; a host that also has
``variable_candidates(query, limit)`` (:class:`VariableCandidates`) offers variables.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from IPython.core.completer import CompletionContext, SimpleCompletion, SimpleMatcherResult, context_matcher

from ..escape import host_mention
from .protocols import CompletionHost, FileCandidates, SessionCandidates

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..workspace.variables import VariableCandidate

log = logging.getLogger(__name__)

#: Identifier of the matcher (usable in ``IPCompleter.disable_matchers``).
MATCHER_ID = "dsh_jupyter.mentions"
#: How many files to offer after the sessions.
FILE_LIMIT = 50

#: How many variables to offer before the sessions.
VARIABLE_LIMIT = 50

HostGetter = Callable[[], CompletionHost | None]


class VariableCandidates(Protocol):
    """Lists the user's variables to mention, data frames first: ``{name, brief, mention, ...}`` each."""

    def variable_candidates(self, query: str = "", limit: int = 50) -> list[VariableCandidate]: ...

#: ``@`` not preceded by a word character, then a fragment without whitespace, ``@`` or a leading
#: ``[`` (``@[`` is an already written mention), running to the cursor.
_FRAGMENT = re.compile(r"(?<!\w)@((?!\[)[^\s@]*)\Z")
_MAGIC = re.compile(r"%%dsh(?:\s|\Z)")

_lock = threading.Lock()
#: The getter of the latest :func:`install_completer` (one slot: a kernel has one notebook host).
_installed: list[HostGetter] = []


def _magic_line(full_text: str) -> int | None:
    """The index of the ``%%dsh`` line if the cell is a ``%%dsh`` cell, else ``None``.

    IPython drops leading blank lines and common indentation before looking for a cell magic, so
    the magic may follow blank lines and be indented; it must be the first line with content.
    """
    for index, line in enumerate(full_text.split("\n")):
        if not line.strip():
            continue
        return index if _MAGIC.match(line.lstrip()) else None
    return None


def mention_fragment(context: CompletionContext) -> str | None:
    """The fragment after ``@`` being completed, or ``None`` when this is not a place to complete."""
    magic = _magic_line(context.full_text)
    if magic is None or context.cursor_line <= magic:
        return None
    match = _FRAGMENT.search(context.text_until_cursor)
    return None if match is None else match.group(1)


def _session_completions(host: SessionCandidates, fragment: str) -> list[SimpleCompletion]:
    try:
        candidates = host.candidates(fragment)
    except Exception:  # a failing store must not break the completion request
        log.warning("dsh: listing sessions for @ completion failed", exc_info=True)
        return []
    completions = []
    for candidate in candidates or ():
        try:
            completions.append(SimpleCompletion(host_mention(candidate), type="session"))
        except Exception:
            log.warning("dsh: skipping a malformed session candidate %r", candidate, exc_info=True)
    return completions


def _variable_completions(host: object, fragment: str) -> list[SimpleCompletion]:
    list_variables = getattr(host, "variable_candidates", None)
    if list_variables is None:
        return []
    try:
        rows = list_variables(fragment, VARIABLE_LIMIT)
    except Exception:
        log.warning("dsh: listing variables for @ completion failed", exc_info=True)
        return []
    return [SimpleCompletion(row["mention"], type="variable") for row in rows or ()
            if isinstance(row, dict) and isinstance(row.get("mention"), str)]


def _file_completions(host: FileCandidates, fragment: str) -> list[SimpleCompletion]:
    try:
        paths = host.file_candidates(fragment, limit=FILE_LIMIT)
    except Exception:
        log.warning("dsh: listing files for @ completion failed", exc_info=True)
        return []
    return [SimpleCompletion("@" + path, type="path") for path in paths or () if isinstance(path, str) and path]


def mention_completions(context: CompletionContext, host: CompletionHost | None) -> SimpleMatcherResult:
    """Variables, sessions, then files, for the ``@fragment`` before the cursor; empty and non-suppressing
    elsewhere."""
    fragment = mention_fragment(context)
    if fragment is None or host is None:
        return {"completions": [], "suppress": False}
    completions = (_variable_completions(host, fragment) + _session_completions(host, fragment)
                   + _file_completions(host, fragment))
    if not completions:
        return {"completions": [], "suppress": False}
    return {
        "completions": completions,
        "matched_fragment": "@" + fragment,
        "suppress": True,
        "ordered": True,
    }


@context_matcher(identifier=MATCHER_ID, priority=10)
def dsh_matcher(context: CompletionContext) -> SimpleMatcherResult:
    """IPython v2 context matcher for ``@`` mentions in ``%%dsh`` cell bodies (never raises)."""
    try:
        if mention_fragment(context) is None:
            return {"completions": [], "suppress": False}
        getters = list(_installed)
        host = getters[0]() if getters else None
        return mention_completions(context, host)
    except Exception:
        log.warning("dsh: @ completion failed", exc_info=True)
        return {"completions": [], "suppress": False}


def install_completer(ip: InteractiveShell, host_getter: HostGetter) -> Callable[[], None]:
    """Register :func:`dsh_matcher` on ``ip.Completer``; returns a disposer that removes it again.

    ``host_getter()`` is called at completion time and returns the notebook host (or ``None`` when
    there is none yet). Installing again only replaces the getter, so the matcher appears once.
    """
    if not callable(host_getter):
        raise TypeError(f"install_completer needs a callable returning the host, got {type(host_getter).__name__}")
    completer = getattr(ip, "Completer", None)
    if completer is None or not hasattr(completer, "custom_matchers"):
        raise TypeError("install_completer needs an IPython shell with a Completer (got one without)")
    with _lock:
        _installed[:] = [host_getter]
        if dsh_matcher not in completer.custom_matchers:
            completer.custom_matchers.append(dsh_matcher)

    def dispose() -> None:
        with _lock:
            while dsh_matcher in completer.custom_matchers:
                completer.custom_matchers.remove(dsh_matcher)
            if _installed and _installed[0] is host_getter:
                _installed.clear()

    return dispose
