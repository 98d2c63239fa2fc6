"""Secrets masked by value, as CI systems mask them, before text leaves the process.

What counts as a secret:

* the value of every environment variable whose name looks like a credential
  (:func:`is_credential_name`: ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``CREDENTIAL`` anywhere in the
  name; ``PASS``/``PASSWD``/``PASSPHRASE`` and ``PWD`` ending a word; ``AUTH`` starting or ending a word),
  except a few well-known names that hold no secret (``PWD``, ``OLDPWD``, ``SSH_AUTH_SOCK``);
* the password inside any URL in any variable's value (``scheme://user:password@host``);
* the value of every variable named with :meth:`SecretMasker.watch_name` (the model provider's key
  variable, whatever its name);

but never a value that names an existing file or folder (that is a location, not a secret).

Each value of at least :data:`MIN_SECRET_LENGTH` characters is replaced by :data:`MASK` wherever it
appears, also in its JSON-escaped, ``repr``-escaped and URL-percent-encoded spellings, and each line of a
multi-line value on its own. Independently of the environment, the password part of any
``scheme://user:password@`` in masked text is replaced too. A value once seen stays masked for the life of
the process (a key unset mid-session may still sit in ``/proc/<pid>/environ``).

This is a best-effort guard, not a sandbox: a value that is encoded (base64, hex, reversed) or printed in
pieces is not recognised, and a tool can still read the values; only what comes back is masked.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import fields, is_dataclass, replace
from typing import AnyStr, TypeVar
from urllib.parse import quote, unquote

#: What every masked value becomes.
MASK = "[masked]"
#: Shorter values are never masked (a variable holding ``1`` or ``yes`` would otherwise blank every ``1``).
MIN_SECRET_LENGTH = 6

#: How stale the environment may be for :meth:`SecretMasker.mask_encoded` (log lines), in seconds.
ENCODED_RECHECK_SECONDS = 0.1

#: Names that match a credential word but hold no secret (the working directories, the ssh agent socket).
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK"})

_ANYWHERE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL")
_WORD = re.compile(r"[A-Z0-9]+")
_WORD_RULES = re.compile(
    r".*(?:PASS|PASSWD|PASSPHRASE|PWD)"  # MYSQL_PWD, PGPASS, SMTP_PASS, GPG_PASSPHRASE
    r"|AUTH(?!OR).*|AUTHORI[ZS].*|.*AUTH"  # AUTH, AUTH_HEADER, AUTHORIZATION, OAUTH; never GIT_AUTHOR_NAME
)
#: Longest scheme read back from a ``://``, and the longest ``user:password@`` after it (see the patterns below).
_SCHEME_SPAN = 32
_URL_SPAN = 256 + 1 + 512 + 1
#: What follows ``scheme://`` in a URL with a password: group 1 is ``user:``, group 2 the password. Lengths
#: are bounded and every search starts at a ``://``, so a long line cannot make masking slow.
_AFTER_SCHEME = re.compile(r"([^\s:/?#@]{0,256}:)([^\s/?#]{1,512})(?=@)")
#: A scheme is a letter then up to 31 letters, digits, ``+``, ``.`` or ``-``; read backwards from ``://``.
_SCHEME_REVERSED = re.compile(r"[A-Za-z0-9+.-]{1,32}")
_LETTER = re.compile(r"[A-Za-z]")
#: The same shapes in encoded JSON (bytes; escapes and UTF-8 make them longer), used only to detect.
_AFTER_SCHEME_JSON = re.compile(rb"([^\s:/?#@]{0,2048}:)([^\s/?#]{1,4096})(?=@)")
_SCHEME_REVERSED_JSON = re.compile(rb"[A-Za-z0-9+.-]{1,32}")
_LETTER_JSON = re.compile(rb"[A-Za-z]")

T = TypeVar("T")


def is_credential_name(name: str) -> bool:
    """True when an environment variable's name looks like it holds a credential (any case)."""
    upper = name.upper()
    if upper in NOT_SECRET_NAMES:
        return False
    if _ANYWHERE.search(upper):
        return True
    return any(_WORD_RULES.fullmatch(word) for word in _WORD.findall(upper))


def _url_matches(text: AnyStr, separator: AnyStr, scheme: re.Pattern[AnyStr], letter: re.Pattern[AnyStr],
                 after: re.Pattern[AnyStr], start: int = 0, end: int | None = None) -> Iterator[re.Match[AnyStr]]:
    """Each ``scheme://user:password@`` in ``text`` whose ``://`` starts in ``[start, end)``, found from its
    ``://`` (no backtracking search)."""
    position = text.find(separator, start)
    while position != -1 and (end is None or position < end):
        run = scheme.match(text[max(0, position - _SCHEME_SPAN):position][::-1])
        if run is not None and letter.search(run.group(0)) is not None:
            match = after.match(text, position + 3)
            if match is not None:
                yield match
        position = text.find(separator, position + 3)


def url_passwords(value: str) -> list[str]:
    """The passwords of every ``scheme://user:password@host`` in ``value``."""
    return [match.group(2) for match in _url_matches(value, "://", _SCHEME_REVERSED, _LETTER, _AFTER_SCHEME)]


def _mask_urls(text: str) -> str:
    if "://" not in text:
        return text
    pieces: list[str] = []
    done = 0
    for match in _url_matches(text, "://", _SCHEME_REVERSED, _LETTER, _AFTER_SCHEME):
        pieces += [text[done:match.start(2)], MASK]
        done = match.end(2)
    return "".join(pieces) + text[done:] if pieces else text


def _holds_url_password(encoded: bytes) -> bool:
    found = _url_matches(encoded, b"://", _SCHEME_REVERSED_JSON, _LETTER_JSON, _AFTER_SCHEME_JSON)
    return next(found, None) is not None


def spellings(value: str, min_length: int = MIN_SECRET_LENGTH) -> set[str]:
    """The forms of one secret value that get masked: itself (stripped too), each line, escapes, encodings."""
    found: set[str] = set()
    candidates = {value, value.strip(), *value.splitlines()}
    for raw in list(candidates):
        candidate = raw.strip()
        if not candidate:
            continue
        candidates.update({
            candidate,
            json.dumps(candidate)[1:-1],
            json.dumps(candidate, ensure_ascii=False)[1:-1],
            repr(candidate)[1:-1],
            quote(candidate, safe=""),
            unquote(candidate),
        })
    for candidate in candidates:
        if len(candidate) >= min_length and candidate not in MASK:
            found.add(candidate)
    return found


def is_location(value: str) -> bool:
    """True when ``value`` is the absolute path of an existing file or folder."""
    if not value.startswith(("/", "~")) or "\n" in value or "\0" in value:
        return False
    try:
        return os.path.exists(os.path.expanduser(value))
    except (OSError, ValueError):
        return False


def secret_values(env: Mapping[str, str], names: Iterable[str] = (),
                  min_length: int = MIN_SECRET_LENGTH) -> set[str]:
    """Every spelling to mask for the environment ``env`` (``names``: variables to mask whatever they are called).

    A credential variable whose value names an existing file or folder (``SSL_KEY_FILE``,
    ``GOOGLE_APPLICATION_CREDENTIALS``) holds a location, not a secret: masking it would blank that path in
    every output (and, through :meth:`SecretMasker.is_secret_variable`, drop ``HOME`` when the path is the
    home folder) while protecting nothing.
    """
    watched = {name.upper() for name in names}
    found: set[str] = set()
    for name, value in env.items():
        if not isinstance(value, str) or not value:
            continue
        if (name.upper() in watched or is_credential_name(name)) and not is_location(value):
            found |= spellings(value, min_length)
        if "://" in value:
            for password in url_passwords(value):
                found |= spellings(password, min_length)
    return found


def _initial_environment() -> dict[str, str]:
    """The environment this process started with (Linux ``/proc/self/environ``; empty elsewhere)."""
    try:
        with open("/proc/self/environ", "rb") as handle:
            data = handle.read(4 * 1024 * 1024)
    except OSError:
        return {}
    pairs: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            pairs[os.fsdecode(name)] = os.fsdecode(value)
    return pairs


def _json_spelling(value: str) -> bytes:
    """How ``value`` appears inside an encoded JSON string (escapes are per character, so this is exact)."""
    return json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")


def _mask(text: str, ordered: tuple[str, ...]) -> str:
    for value in ordered:  # longest first, so a longer spelling is never cut by a shorter one
        if value in text:
            text = text.replace(value, MASK)
    return _mask_urls(text)


def _walk(value: object, ordered: tuple[str, ...]) -> object:
    if isinstance(value, str):
        return _mask(value, ordered)
    if isinstance(value, dict):
        return {_walk(k, ordered): _walk(v, ordered) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, ordered) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, ordered) for v in value)
    return value


class SecretMasker:
    """Replaces secret values with :data:`MASK` in text and in nested JSON-like data.

    ``env`` defaults to ``os.environ``, re-read whenever it changed since the last call (a comparison of
    the environment's own mapping, cheap when nothing changed). With the default environment the values
    the process started with are included too.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, min_length: int = MIN_SECRET_LENGTH) -> None:
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._min_length = min_length
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._extra: set[str] = set()
        self._values: set[str] = set()
        self._seen: object = None
        self._ordered: tuple[str, ...] = ()
        self._encoded: tuple[bytes, ...] = ()
        self._checked = 0.0
        self._started = env is not None  # a given mapping has no start-up environment to add

    # -- what is secret ----------------------------------------------------------------------------
    def watch_name(self, name: str | None) -> None:
        """Mask the value of variable ``name`` whatever it is called (e.g. the model's ``api_key_env``)."""
        if isinstance(name, str) and name.strip() and name.upper() not in self._names:
            with self._lock:
                self._names.add(name.upper())
                self._seen = None

    def add_value(self, value: str | None) -> None:
        """Mask ``value`` itself (a key that never was in the environment)."""
        if isinstance(value, str) and value:
            with self._lock:
                self._extra |= spellings(value, self._min_length)
                self._seen = None

    def is_secret_variable(self, name: str, value: str) -> bool:
        """True when a child process must not inherit ``name=value``: a credential-looking or watched
        name, a URL with a password, or a value that contains a known secret."""
        if is_credential_name(name) or name.upper() in self._names or url_passwords(value):
            return True
        return self.mask_text(value) != value

    def values(self) -> frozenset[str]:
        """Every spelling currently masked."""
        self._refresh()
        return frozenset(self._values)

    def _current(self) -> Mapping[bytes, bytes] | Mapping[str, str]:
        data = getattr(self._env, "_data", None)  # os.environ keeps its raw mapping here: comparing it is cheap
        return data if isinstance(data, dict) else dict(self._env)

    def _refresh(self, max_age: float = 0.0) -> tuple[str, ...]:
        """The spellings to mask, longest first, rebuilt when the environment changed.

        ``max_age`` > 0 skips the comparison when the environment was compared that recently.
        """
        now = time.monotonic()
        if max_age and self._seen is not None and now - self._checked < max_age:
            return self._ordered
        current = self._current()
        self._checked = now
        if self._seen is not None and self._seen == current:
            return self._ordered
        with self._lock:
            snapshot = dict(current)
            found = secret_values(self._env, self._names, self._min_length)
            if not self._started:
                self._started = True
                found |= secret_values(_initial_environment(), self._names, self._min_length)
            self._values |= found | self._extra
            self._ordered = tuple(sorted(self._values, key=lambda v: (-len(v), v)))
            self._encoded = tuple({_json_spelling(v) for v in self._ordered})
            self._seen = snapshot
            return self._ordered

    # -- masking -----------------------------------------------------------------------------------
    def mask_text(self, text: str) -> str:
        """``text`` with every secret value (and every URL password) replaced by :data:`MASK`."""
        return _mask(text, self._refresh())

    def mask_data(self, value: T) -> T:
        """A copy of JSON-like ``value`` (dicts, lists, tuples, strings) with every string masked.

        Keys are masked as well; anything else (numbers, ``None``, other objects) is kept as is.
        """
        return _walk(value, self._refresh())  # type: ignore[return-value]

    def mask_encoded(self, value: T, encode: Callable[[T], bytes]) -> bytes:
        """``encode(value)`` (a JSON encoder) with every string of ``value`` masked, fast when nothing is secret.

        The encoded bytes are searched first (for each secret as JSON writes it, and for URL passwords);
        only when something is found is ``value`` masked and encoded again. This is the hot path of every
        log line, so the environment is compared at most every :data:`ENCODED_RECHECK_SECONDS` here (every
        other method compares it on each call, and every turn starts with one of them).
        """
        encoded = encode(value)
        return encode(self.mask_data(value)) if self.holds_encoded(encoded) else encoded

    def holds_encoded(self, encoded: bytes) -> bool:
        """Whether JSON text (UTF-8 bytes, as a JSON encoder wrote them) holds a secret or a URL password: a
        byte search, far cheaper than masking a large value to find out (the environment is compared at most
        every :data:`ENCODED_RECHECK_SECONDS`)."""
        self._refresh(ENCODED_RECHECK_SECONDS)
        return any(secret in encoded for secret in self._encoded) or _holds_url_password(encoded)

    def mask_bytes(self, data: bytes) -> bytes:
        """``data`` (any bytes, UTF-8 or not) with every secret masked as :meth:`mask_text` masks text; bytes that
        are not UTF-8 pass through unchanged."""
        text = data.decode("utf-8", "surrogateescape")
        masked = self.mask_text(text)
        return data if masked == text else masked.encode("utf-8", "surrogateescape")

    def safe_cut(self, text: str, cut: int) -> int:
        """The largest position ``<= cut`` at which ``text`` can be split without cutting a secret in two.

        A position is unsafe when a secret's spelling starts before it and ends after it, or when it falls
        inside a ``scheme://user:password@`` that :meth:`mask_text` would mask (the scheme included). Only
        what ``text`` holds is considered, so ``text`` must reach at least :meth:`lookahead` characters past
        ``cut`` for the answer to hold whatever comes next."""
        ordered = self._refresh()
        while cut > 0:
            earliest = cut
            for value in ordered:
                found = text.find(value, max(0, cut - len(value) + 1), cut + len(value) - 1)
                if found != -1 and found < earliest:
                    earliest = found
            for match in _url_matches(text, "://", _SCHEME_REVERSED, _LETTER, _AFTER_SCHEME,
                                      max(0, cut - _URL_SPAN - 3), cut + _SCHEME_SPAN):
                start = max(0, match.start(1) - 3 - _SCHEME_SPAN)
                if start < cut <= match.end(2):  # the ``@`` after the password must travel with it
                    earliest = min(earliest, start)
            if earliest == cut:
                return cut
            cut = earliest
        return 0

    def lookahead(self) -> int:
        """How many characters past a cut :meth:`safe_cut` must see: the longest secret spelling or the
        longest URL password shape, whichever is longer."""
        ordered = self._refresh()
        return max(len(ordered[0]) if ordered else 0, _URL_SPAN + _SCHEME_SPAN + 3)

    def mask_fields(self, record: T) -> T:
        """A dataclass instance (a tool result, an agent event) with every field masked like
        :meth:`mask_data`; the same object when nothing changed. Anything else is returned as is."""
        if not is_dataclass(record) or isinstance(record, type):
            return record
        ordered = self._refresh()
        changes: dict[str, object] = {}
        for item in fields(record):
            value = getattr(record, item.name)
            masked = _walk(value, ordered)
            if masked != value:
                changes[item.name] = masked
        return replace(record, **changes) if changes else record


#: How many ``long_line`` lengths :class:`MaskedStream` holds at most when no safe cut can be found.
_MAX_HELD = 16


class MaskedStream:
    """A byte stream (a command's output) masked on its way to a file: :meth:`feed` it each piece as it comes
    and write what it gives back, then write what :meth:`finish` gives back.

    Complete lines are given back at once (a secret's spelling never holds a line break, except a multi-line
    value, each of whose lines is a spelling of its own), unless a secret seen whole spans the line break.
    A line that grows past ``long_line`` bytes is given back in parts, each ending where no secret can be cut
    in two (:meth:`SecretMasker.safe_cut`); what a secret could still span stays held until more arrives. So
    the file never holds a secret's spelling, however the output is cut into pieces, and memory stays
    bounded by ``long_line`` plus what a secret can span (a line that is one unbroken run of overlapping
    secrets is cut after 16 ``long_line`` lengths). Bytes that are not UTF-8 pass through unchanged.
    """

    def __init__(self, masker: SecretMasker | None = None, *, long_line: int = 64 * 1024) -> None:
        self._masker = masker if masker is not None else _DEFAULT
        self._long_line = long_line
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        """The masked bytes that can be written now (possibly none) after ``chunk``."""
        self._pending += chunk
        if b"\n" not in chunk and len(self._pending) <= self._long_line:
            return b""
        text = self._pending.decode("utf-8", "surrogateescape")
        cut = text.rfind("\n") + 1
        if len(text) > self._long_line:
            cut = max(cut, len(text) - self._masker.lookahead())
        cut = self._masker.safe_cut(text, cut)
        if cut <= 0:
            if len(self._pending) <= _MAX_HELD * self._long_line:
                return b""
            cut = len(text)  # a run of overlapping secrets this long: masked as it stands, memory stays bounded
        del self._pending[:len(text[:cut].encode("utf-8", "surrogateescape"))]
        return self._masker.mask_text(text[:cut]).encode("utf-8", "surrogateescape")

    def finish(self) -> bytes:
        """Everything still held, masked (the stream ended)."""
        rest, self._pending = bytes(self._pending), bytearray()
        return self._masker.mask_bytes(rest) if rest else b""


_DEFAULT = SecretMasker()


def default_masker() -> SecretMasker:
    """The process-wide masker over ``os.environ`` that every choke point uses."""
    return _DEFAULT


def mask_text(text: str) -> str:
    """:meth:`SecretMasker.mask_text` of the process-wide masker."""
    return _DEFAULT.mask_text(text)


def mask_data(value: T) -> T:
    """:meth:`SecretMasker.mask_data` of the process-wide masker."""
    return _DEFAULT.mask_data(value)


def mask_encoded(value: T, encode: Callable[[T], bytes]) -> bytes:
    """:meth:`SecretMasker.mask_encoded` of the process-wide masker."""
    return _DEFAULT.mask_encoded(value, encode)


def mask_bytes(data: bytes) -> bytes:
    """:meth:`SecretMasker.mask_bytes` of the process-wide masker."""
    return _DEFAULT.mask_bytes(data)


def holds_encoded(encoded: bytes) -> bool:
    """:meth:`SecretMasker.holds_encoded` of the process-wide masker."""
    return _DEFAULT.holds_encoded(encoded)


def mask_fields(record: T) -> T:
    """:meth:`SecretMasker.mask_fields` of the process-wide masker."""
    return _DEFAULT.mask_fields(record)


def restore_masked_lines(text: str, sources: Iterable[str]) -> tuple[str, list[int]]:
    """``text``, written by someone shown only masked copies of ``sources`` (the agent writing a cell it read),
    with each line that holds :data:`MASK` given back the line of ``sources`` that masks to it (the first one,
    so list the likeliest source first); and the numbers (from 1) of the lines holding ``MASK`` that no line
    masks to. A line that holds ``MASK`` literally in ``sources`` stays as it is."""
    if MASK not in text:
        return text, []
    unmasked: dict[str, str] = {}
    literal: set[str] = set()
    for source in sources:
        for line in source.split("\n"):
            if MASK in line:
                literal.add(line)
            masked = mask_text(line)
            if masked != line:
                unmasked.setdefault(masked, line)
    lines = text.split("\n")
    missing: list[int] = []
    for number, line in enumerate(lines, start=1):
        if MASK not in line or line in literal:
            continue
        if line in unmasked:
            lines[number - 1] = unmasked[line]
        else:
            missing.append(number)
    return "\n".join(lines), missing


def watch_name(name: str | None) -> None:
    """:meth:`SecretMasker.watch_name` of the process-wide masker."""
    _DEFAULT.watch_name(name)


def watch_model(model: object) -> None:
    """Mask the key of a model provider: the variable it reads (``api_key_env``), whatever its name."""
    _DEFAULT.watch_name(getattr(model, "api_key_env", None))


__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "NOT_SECRET_NAMES",
    "MaskedStream",
    "SecretMasker",
    "default_masker",
    "holds_encoded",
    "is_credential_name",
    "is_location",
    "mask_bytes",
    "mask_data",
    "mask_encoded",
    "mask_fields",
    "mask_text",
    "restore_masked_lines",
    "secret_values",
    "spellings",
    "url_passwords",
    "watch_model",
    "watch_name",
]
