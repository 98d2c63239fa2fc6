"""The request parameters of the REST API, read strictly: anything the API cannot use is a 400 that says why.

Tornado's own argument reader is lenient in ways that hide mistakes: it turns control characters into spaces,
keeps the last of repeated parameters, passes broken percent escapes through as text and ignores names it
does not know. Here the raw query string is read instead, and each of these is refused with a message in
the caller's terms (which parameter, what was wrong, what to send instead):

- a name the endpoint does not take (``token``, jupyter-server's own, is allowed and ignored, and so is a
  bare number without ``=``: the cache buster JupyterLab's ``ServerConnection`` appends to every GET);
- a parameter given more than once;
- a broken percent escape, or bytes that are not UTF-8;
- a control character (U+0000–U+001F, U+007F–U+009F) in a name or value;
- a value longer than the parameter allows; numbers that are not plain decimal digits, or out of range.

Messages quote at most :data:`QUOTE_CHARS` characters of what was sent.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from urllib.parse import unquote_to_bytes

from .errors import ApiError, bad_request

#: Query parameters every endpoint accepts and ignores (jupyter-server reads its token from here).
IGNORED = frozenset({"token"})
#: Longest value any parameter may have before it is even decoded (characters of the raw query string).
MAX_RAW_VALUE = 16_384
#: Default and largest number of candidates one request may ask for.
DEFAULT_CANDIDATE_LIMIT = 50
MAX_CANDIDATE_LIMIT = 1000
#: Longest accepted candidate query (characters).
MAX_QUERY_LENGTH = 1000
#: Longest accepted ``cwd`` (characters); a real folder path is far shorter (Linux allows 4096 bytes).
MAX_CWD_LENGTH = 4096
#: Longest accepted ``exclude`` (a session id: characters).
MAX_SESSION_ID_LENGTH = 512
#: Longest session reference payload in a path (characters): ids are short, a payload is about 4/3 of one.
MAX_PAYLOAD_LENGTH = 4096
#: Characters of a refused value quoted back in a message.
QUOTE_CHARS = 60

_BROKEN_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def quoted(text: str) -> str:
    """``text`` as a message quotes it: its repr, cut to :data:`QUOTE_CHARS` characters with the length said."""
    if len(text) <= QUOTE_CHARS:
        return repr(text)
    return f"{text[:QUOTE_CHARS]!r}… ({len(text):,} characters)"


def control_problem(name: str, text: str) -> ApiError | None:
    """The 400 for a control character in ``text`` (the value of ``name``), or ``None`` when it has none."""
    found = _CONTROL.search(text)
    if found is None:
        return None
    return bad_request(f"{name} holds the control character U+{ord(found.group()):04X} at position "
                       f"{found.start() + 1}; send plain text without control characters")


def _decoded(raw: str, what: str) -> str:
    """One percent-encoded part of the query string (``+`` is a space), strictly UTF-8."""
    if _BROKEN_ESCAPE.search(raw):
        raise bad_request(f"{what} has a broken percent escape ({quoted(raw)}); percent-encode it as "
                          "encodeURIComponent does")
    data = unquote_to_bytes(raw.replace("+", " "))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request(f"{what} is not valid UTF-8 text once percent-decoded; send UTF-8, percent-encoded "
                          "as encodeURIComponent does") from None


def query_parameters(raw_query: str, allowed: Collection[str], endpoint: str) -> dict[str, str]:
    """The parameters of the raw query string ``raw_query`` (as the request line carries it), checked.

    ``allowed`` names what the endpoint takes; ``endpoint`` is how a message names it."""
    found: dict[str, str] = {}
    counts: dict[str, int] = {}
    for piece in raw_query.split("&"):
        if not piece:
            continue
        raw_name, equals, raw_value = piece.partition("=")
        if not equals and raw_name.isdigit() and raw_name.isascii():
            continue  # JupyterLab's ServerConnection adds the time as a bare name to keep GETs out of caches
        name = _decoded(raw_name, "a parameter name")
        problem = control_problem("a parameter name", name)
        if problem is not None:
            raise problem
        if name in IGNORED:
            continue
        if name not in allowed:
            takes = ", ".join(sorted(allowed)) if allowed else "no parameters"
            raise bad_request(f"{endpoint} does not take the parameter {quoted(name)}; it takes {takes}")
        counts[name] = counts.get(name, 0) + 1
        if counts[name] > 1:
            raise bad_request(f"{name} was given more than once; give it once")
        if len(raw_value) > MAX_RAW_VALUE:
            raise bad_request(f"{name} is {len(raw_value):,} characters long, far more than any value it can take")
        value = _decoded(raw_value, f"the value of {name}")
        problem = control_problem(name, value)
        if problem is not None:
            raise problem
        found[name] = value
    return found


# -- the parameters themselves ----------------------------------------------------------------------------
def parse_limit(raw: str | None) -> int:
    """The ``limit`` query parameter: a positive integer up to :data:`MAX_CANDIDATE_LIMIT`."""
    if raw is None:
        return DEFAULT_CANDIDATE_LIMIT
    if not raw.isascii() or not raw.isdigit() or not raw.strip("0"):
        raise bad_request(f"limit must be a positive whole number (leave it out for {DEFAULT_CANDIDATE_LIMIT}), "
                          f"got {quoted(raw)}")
    digits = raw.lstrip("0")
    if len(digits) > len(str(MAX_CANDIDATE_LIMIT)) or int(digits) > MAX_CANDIDATE_LIMIT:
        shown = digits if len(digits) <= 12 else f"a {len(digits):,}-digit number"
        raise bad_request(f"limit must be at most {MAX_CANDIDATE_LIMIT}, got {shown}")
    return int(digits)


def parse_flag(name: str, raw: str | None) -> bool:
    """A boolean query parameter: absent, ``0``/``false``/``no`` or ``1``/``true``/``yes`` (any case)."""
    if raw is None or raw.lower() in ("", "0", "false", "no"):
        return False
    if raw.lower() in ("1", "true", "yes"):
        return True
    raise bad_request(f"{name} must be 1 or 0 (true or false), got {quoted(raw)}")


def parse_query(raw: str | None) -> str:
    """The ``query`` parameter (text typed after ``@``), at most :data:`MAX_QUERY_LENGTH` characters."""
    text = raw or ""
    return _plain_text("query", text, MAX_QUERY_LENGTH,
                       f"query must be at most {MAX_QUERY_LENGTH} characters, got {len(text):,}")


def parse_cwd(raw: str | None) -> str:
    """The ``cwd`` parameter (the notebook's folder relative to the server root), at most
    :data:`MAX_CWD_LENGTH` characters; where it leads is checked by ``sessions.resolve_folder``."""
    text = raw or ""
    return _plain_text("cwd", text, MAX_CWD_LENGTH, f"cwd must be at most {MAX_CWD_LENGTH} characters (a folder "
                                                    f"relative to the server root), got {len(text):,}")


def parse_exclude(raw: str | None) -> str | None:
    """The ``exclude`` parameter: the id of the session asking (the notebook's current one), left out of the
    answer because a session cannot reference itself; absent or empty: none."""
    if not raw:
        return None
    return _plain_text("exclude", raw, MAX_SESSION_ID_LENGTH,
                       f"exclude must be a session id of at most {MAX_SESSION_ID_LENGTH} characters, got "
                       f"{len(raw):,}; send the id of the notebook's current session, or leave exclude out")


def _plain_text(name: str, text: str, limit: int, too_long: str) -> str:
    """``text`` (the value of ``name``) when it is at most ``limit`` characters of plain text; else the 400
    ``too_long`` says, or the one naming its control character."""
    if len(text) > limit:
        raise bad_request(too_long)
    problem = control_problem(name, text)
    if problem is not None:
        raise problem
    return text


def check_payload(payload: str) -> None:
    """Refuse a session reference payload (the path segment) that cannot be one before it is decoded."""
    if len(payload) > MAX_PAYLOAD_LENGTH:
        raise bad_request(f"the session reference in the path is {len(payload):,} characters long, more than "
                          f"the {MAX_PAYLOAD_LENGTH} any session id needs; put the part after 'dsh-session:' of "
                          "the session's canonical URI in the path")
