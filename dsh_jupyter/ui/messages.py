"""Errors and notices in the notebook user's terms.

The core (references, models, sessions, the agent loop) words its errors for any host and carries stable
codes and details; this module turns them into one line a notebook user can act on: it names what they
typed (``--budget 16``, the mention ``@Sales Q3``, the session text they gave), puts a session's title
before its id, and ends with the next step. It never shows an internal class, function or setting the
user did not type, nor a traceback.

:func:`describe` is the one entry point (``magics.py`` and ``host.py`` print what it returns); the
per-family functions are public so tests can reach every case.

Deferred imports: the error types of the references, the session, the store, the agent and the models
are imported by the functions that describe them; this module loads at ``%load_ext``, those packages
when the first error of theirs is shown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: How many characters of a session id are shown after its title.
SHORT_ID = 8

#: What to do about a mention that cannot be used.
FIX_MENTION = "remove or re-pick this mention (type @ or press Tab to pick a session)"


@dataclass(frozen=True)
class Said:
    """What the user typed, so a message can name it.

    ``prompt`` is the cell's text as sent (mentions in it give their labels), ``options`` the options of
    the ``%%dsh`` line as typed (``{"--budget": "16"}``), ``session_id`` the session the prompt was for and
    ``title_of`` reads a session's title (``None`` when it has none or cannot be read).
    """

    prompt: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    session_id: str | None = None
    title_of: Callable[[str], str | None] | None = None

    def title(self, session_id: str) -> str | None:
        if self.title_of is None:
            return None
        try:
            title = self.title_of(session_id)
        except Exception:  # a title we cannot read only costs the name, never the message
            return None
        return title.strip() or None if isinstance(title, str) else None


# --- small words --------------------------------------------------------------------------------------------
def short_id(session_id: str) -> str:
    return session_id[:SHORT_ID]


def session_name(session_id: str, title: str | None = None) -> str:
    """``"Sales deep dive" (1a2b3c4d)``: the title first, then the short id; the id alone when untitled."""
    if title:
        return f"\u201c{_printable(title)}\u201d ({short_id(session_id)})"
    return f"session {short_id(session_id)}"


def _printable(text: str) -> str:
    """``text`` on one line, without control characters (labels and titles are whatever someone wrote)."""
    return " ".join("".join(c for c in text if c.isprintable() or c.isspace()).split())


def _mention(label: str) -> str:
    shown = _printable(label)
    return "@" + shown if shown else "@(no label)"


def _unescape_label(raw: str) -> str:
    return re.sub(r"\\(.)", r"\1", raw)


def _labels_in(prompt: str) -> list[tuple[str, str]]:
    """``(label, session id)`` of each mention in ``prompt``, in order (duplicates kept; none when one of them
    cannot be decoded)."""
    from ..references import parse_session_reference_text

    try:
        parsed = parse_session_reference_text(prompt)
    except Exception:
        return []
    return [(ref.label or ref.session_id, ref.session_id) for ref in parsed.references]


def _label_for(said: Said, session_id: str | None) -> str | None:
    if session_id is None:
        return None
    for label, sid in _labels_in(said.prompt):
        if sid == session_id:
            return label
    return None


def _label_of_uri(prompt: str, uri: str) -> str | None:
    """The label written before ``uri`` in ``@[label](uri)``, or ``None`` for a bare URI."""
    end = prompt.find("](" + uri)
    if end < 0:
        return None
    start = prompt.rfind("@[", 0, end)
    return _unescape_label(prompt[start + 2:end]) if start >= 0 else None


def _shown(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "\u2026"


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)


# --- references -------------------------------------------------------------------------------------------
def _referenced(said: Said, session_id: str, label: str | None = None) -> str:
    """``the mention @Label ("Title" (1a2b3c4d))``, or the session's name when no mention names it."""
    label = label if label is not None else _label_for(said, session_id)
    title = said.title(session_id)
    if label is None or label == session_id:
        return session_name(session_id, title)
    if label == title or not title:
        return f"the mention {_mention(label)} ({short_id(session_id)})"
    return f"the mention {_mention(label)} (\u201c{_printable(title)}\u201d, {short_id(session_id)})"


def _who(said: Said, details: Mapping[str, object], fallback: str, session_id: str | None = None) -> str:
    """The session an error's ``details`` name (``sessionId``, ``label``), in the user's words."""
    sid = details.get("sessionId", session_id)
    label = details.get("label")
    if not isinstance(sid, str):
        return fallback
    return _referenced(said, sid, label if isinstance(label, str) else None)


_SETTING_RULES = {
    "max_references": "choose 1, 2 or 3",
    "candidate_limit": "use a positive whole number",
    "max_reference_bytes": "use a positive number of bytes, or 0 for the automatic budget",
    "reference_context_fraction": "use a number between 0 and 1",
}


def reference_error_message(error: BaseException, said: Said | None = None) -> str:
    """One line for a reference error (switching on its ``code``, reading its ``details``)."""
    from ..references import errors as codes

    said = said or Said()
    code = getattr(error, "code", None)
    details: Mapping[str, object] = getattr(error, "details", None) or {}
    if isinstance(details.get("variable"), str) or "cell" in details:  # @variable, @cell: the words name it
        return str(error)
    if code == codes.SESSION_REFERENCE_INVALID_REFERENCE:
        uri = details.get("uri")
        if isinstance(uri, str):
            label = _label_of_uri(said.prompt, uri)
            where = (f"the mention {_mention(label)}" if label is not None
                     else f"the session link {_shown(uri, 40)!r}")
            return f"{where} does not point to a session: its link is damaged or was edited; {FIX_MENTION}"
        return f"a mention in the prompt cannot be read; {FIX_MENTION}"
    if code == codes.SESSION_REFERENCE_SELF_REFERENCE:
        who = _who(said, details, "a mention", said.session_id)
        return (f"{who} is the session this prompt goes to, and a session cannot reference itself; remove this "
                "mention, or send the prompt to a new session (%%dsh --new)")
    if code == codes.SESSION_REFERENCE_TOO_MANY:
        count, limit = details.get("count"), details.get("limit")
        labels = list(dict.fromkeys(label for label, _ in _labels_in(said.prompt)))
        listed = f" ({', '.join(_mention(label) for label in labels)})" if labels else ""
        if isinstance(count, int) and isinstance(limit, int):
            return (f"this prompt mentions {count} different sessions{listed} but at most {limit} can be referenced "
                    f"at once; remove {count - limit} of them")
        return f"this prompt mentions too many sessions{listed}; remove some of the mentions"
    if code == codes.SESSION_REFERENCE_READ_FAILED:
        cause = getattr(error, "cause", None)
        session_id = getattr(cause, "session_id", None)
        if isinstance(session_id, str):
            return (f"{_referenced(said, session_id)} points to a session that no longer exists or is in a folder "
                    f"this notebook does not know; {FIX_MENTION}")
        reason = f" ({_shown(str(cause), 160)})" if isinstance(cause, BaseException) and str(cause) else ""
        return f"a referenced session could not be read{reason}; try again, or {FIX_MENTION}"
    if code == codes.SESSION_REFERENCE_BUDGET_EXCEEDED:
        budget = details.get("budget")
        who = _who(said, details, "a referenced session")
        size = f"{_number(budget)} bytes" if isinstance(budget, int) else "the byte budget"
        if "--budget" in said.options:
            fix = (f"raise --budget (you gave {said.options['--budget']}; try --budget 65536), or leave it out "
                   "for the automatic budget")
        else:
            fix = "give a larger budget for this prompt (%%dsh --budget 65536), or reference less of it"
        return f"the snapshot of {who} cannot fit in {size}, even cut down to its last words; {fix}"
    if code == codes.SESSION_REFERENCE_CANCELLED:
        return "preparing the referenced sessions was interrupted"
    if code == codes.SESSION_REFERENCE_INVALID_CONFIG:
        setting = details.get("setting")
        if isinstance(setting, str):
            if setting == "max_reference_bytes" and "--budget" in said.options:
                return f"--budget takes a positive number of bytes, got {said.options['--budget']}"
            rule = _SETTING_RULES.get(setting, "check its value")
            value = details.get("value")
            return (f"%config DshMagics.{setting} = {value!r} cannot be used; {rule} "
                    f"(%dsh config shows every setting)")
        return "session mentions cannot be used here (no session references are set up); remove the mentions"
    return "a mention in the prompt cannot be used; " + FIX_MENTION


# --- models -------------------------------------------------------------------------------------------------
_MODEL_LEADS = {
    "auth": "the model refused the key",
    "rate_limit": "the model is busy",
    "server": "the model could not answer",
    "bad_request": "the model refused the request",
    "bad_stream": "the model's answer broke off",
    "config": "the model cannot be used",
}

#: Keyword-argument spellings of the core's messages, as a notebook user sets them.
_NOTEBOOK_TERMS = (
    ("base_url=<OpenAI-compatible endpoint>", "%config DshMagics.base_url = '<OpenAI-compatible endpoint>'"),
    ("give base_url= for", "set %config DshMagics.base_url for"),
    ("with base_url= for", "with %config DshMagics.base_url for"),
    ("base_url=", "%config DshMagics.base_url"),
    ("api_key_env=", "%config DshMagics.api_key_env"),
    ("n_ctx", "the context window (%config DshMagics.context_window)"),
)


def notebook_terms(text: str) -> str:
    """The core's keyword spellings (``base_url=``) as the notebook setting a user would type."""
    for core, notebook in _NOTEBOOK_TERMS:
        text = text.replace(core, notebook)
    return text


def model_error_message(error: BaseException, said: Said | None = None) -> str:
    """One line for a model error, by its ``kind``; names ``--model`` when the user typed it."""
    said = said or Said()
    kind = getattr(error, "kind", None)
    if kind == "cancelled":
        return "the model call was stopped"
    text = notebook_terms(str(getattr(error, "message", None) or error).strip().rstrip("."))
    typed = said.options.get("--model")
    if typed is not None and kind == "config":
        return text if repr(typed) in text else f"--model {typed}: {text}"
    lead = _MODEL_LEADS.get(kind or "", "the model failed")
    if text.lower().startswith(lead.lower()):
        return text
    return f"{lead}: {text}"


# --- sessions and stores ------------------------------------------------------------------------------------
def session_error_message(error: BaseException, said: Said | None = None, session_id: str | None = None) -> str:
    """One line for a session or store error (not found, locked, damaged, not saved)."""
    from ..session import SessionCorruptError, SessionLockedError, SessionNotFoundError
    from ..store.errors import SessionExistsError, SessionWriteError

    said = said or Said()
    sid = getattr(error, "session_id", None) or session_id
    name = session_name(sid, said.title(sid)) if isinstance(sid, str) else "the session"
    if isinstance(error, SessionNotFoundError):
        return f"there is no {name} here; list the sessions with %dsh sessions"
    if isinstance(error, SessionLockedError):
        return (f"{name} is open in another kernel or notebook, which is writing to it; finish there (or restart "
                "that kernel) and try again, or start a new session with %dsh new")
    if isinstance(error, SessionCorruptError):
        where = getattr(error, "path", None)
        line = getattr(error, "line", None)
        at = f" at {where}" + (f", line {line}" if line else "") if where else ""
        return (f"the log of {name} is damaged{at}, so it cannot be continued; it can still be referenced up to the "
                "damage; start a new session with %dsh new")
    if isinstance(error, SessionExistsError):
        return "another kernel created a session with the same id at the same moment; run the cell again"
    if isinstance(error, SessionWriteError):
        return (f"{name} could not be saved ({_shown(str(error), 160)}); nothing already saved was lost; free disk "
                "space or fix the folder, then run the cell again")
    from ..store.postgres import PostgresStoreError

    if isinstance(error, PostgresStoreError):  # written for the user already: the setting to check comes last
        return f"{name} cannot be used: {_shown(str(error), 600)}"
    return f"{name} cannot be used: {_shown(str(error), 200)}"


# --- hooks, arguments, interpolation ------------------------------------------------------------------------
def blocked_message(reason: str | None) -> str:
    """A prompt a hook refused."""
    why = (reason or "").strip().rstrip(".") or "no reason given"
    return f"the prompt was blocked by a hook ({why}); nothing was written"


_ARGUMENT = re.compile(r"^argument (?:-\w/)?(?P<option>--[\w-]+): (?P<problem>.*)$", re.S)
_INVALID_VALUE = re.compile(r"^invalid (?P<type>\w+) value: (?P<value>.*)$")
_INVALID_CHOICE = re.compile(r"^invalid choice: (?P<value>'[^']*') \(choose from (?P<choices>.*)\)$")
_TYPE_WORDS = {"int": "a whole number", "float": "a number"}


def usage_message(line: str, problem: str, magic: str = "%%dsh") -> str:
    """``'%%dsh --budget x': --budget takes a whole number, got 'x'; see %%dsh?`` from argparse's words."""
    typed = " ".join(f"{magic} {line.strip()}".split())
    text = problem.strip()
    match = _ARGUMENT.match(text)
    if match is not None:
        option, detail = match["option"], match["problem"]
        value = _INVALID_VALUE.match(detail)
        choice = _INVALID_CHOICE.match(detail)
        if value is not None:
            text = f"{option} takes {_TYPE_WORDS.get(value['type'], 'another kind of value')}, got {value['value']}"
        elif choice is not None:
            options = " or ".join(c.strip().strip("'") for c in choice["choices"].split(","))
            text = f"{option} takes {options}, got {choice['value']}"
        elif detail.startswith("expected one argument"):
            text = f"{option} needs a value after it"
        else:
            text = f"{option}: {detail}"
    return f"{typed!r}: {text}; see {magic}?"


@dataclass(frozen=True)
class KeptField:
    """A ``{field}`` interpolation left as written, and why."""

    written: str
    reason: str


def interpolation_notice(kept: Sequence[KeptField]) -> str | None:
    """One line naming each ``{name}`` kept as written (``None`` when every name was filled in)."""
    if not kept:
        return None
    unique = list(dict.fromkeys(kept))
    missing = [k for k in unique if k.reason == NO_VARIABLE]
    others = [k for k in unique if k.reason != NO_VARIABLE]
    parts: list[str] = []
    if missing:
        names = ", ".join(f"`{k.written}`" for k in missing)
        parts.append(f"{names} {'was' if len(missing) == 1 else 'were'} kept as written: no variable of "
                     f"{'that name' if len(missing) == 1 else 'those names'}")
    for k in others:
        parts.append(f"`{k.written}` was kept as written: {k.reason}")
    return "; ".join(parts) + " (use --no-interpolate to keep braces)"


#: The reason of a ``{name}`` whose name is not a notebook variable.
NO_VARIABLE = "no variable of that name"


# --- the one entry point ------------------------------------------------------------------------------------
def describe(error: BaseException, said: Said | None = None) -> str:
    """One line for any error a ``%%dsh`` or ``%dsh`` command can meet, in the user's terms."""
    from ..agent.config import AgentBusyError, AgentIdleError
    from ..models.base import ModelError
    from ..references import SessionReferenceError
    from ..session import SessionError

    said = said or Said()
    if isinstance(error, SessionReferenceError):
        return reference_error_message(error, said)
    if isinstance(error, ModelError):
        return model_error_message(error, said)
    if isinstance(error, SessionError):
        return session_error_message(error, said, said.session_id)
    if isinstance(error, AgentBusyError):
        return "a turn is still running in this session; wait for it (%dsh wait) or stop it (%dsh stop) first"
    if isinstance(error, AgentIdleError):
        return "no turn is running; run the prompt as a new %%dsh cell"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    if isinstance(error, TimeoutError):
        return "this took too long and was stopped; try again"
    text = str(error).strip()
    log.debug("unexpected error in a dsh command", exc_info=error)
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror.lower()}{where}; check the folder and try again"
    if text:
        return notebook_terms(text)
    return "something went wrong and nothing more is known; try again, or restart the kernel if it persists"
