"""Where sessions live on disk: the store root, one folder per session, and the path encodings.

``encode_segment`` turns any session id into one safe path component (injective and reversible), and
``project_key`` turns a working directory into a readable, lossy bucket name. Both work on UTF-16 code
units, like the reference harness: an astral character is two code units and so two ``~XXXX`` escapes,
and a lone surrogate is escaped like any other unit.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._json import js_string
from .errors import LogAccessError, LogPermissionError

#: File name of a session's log inside its folder.
LOG_NAME = "session.jsonl"

#: File name of the writer lock inside a session folder (JSONL backend).
LOCK_NAME = "session.lock"

#: Most file systems cap one path component at 255 bytes.
MAX_SEGMENT = 255

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ESCAPE = re.compile(r"~([0-9A-F]{4})")
_SEPARATOR_RUN = re.compile(r"[/\\:]+")
_PROJECT_SLUG_MAX = 251
# A long id keeps a readable prefix of its encoding, then ``~~`` and a digest. ``~~`` never occurs in
# an encoding (every ``~`` there starts a ``~XXXX`` escape), so hashed names cannot collide with plain ones.
_HASHED_PREFIX = 180


def _utf16_units(value: str) -> list[int]:
    """The UTF-16 code units of ``value`` (astral characters become surrogate pairs)."""
    units: list[int] = []
    for char in value:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units.append(0xD800 + (code >> 10))
            units.append(0xDC00 + (code & 0x3FF))
        else:
            units.append(code)
    return units


def _escape_units(value: str, keep: frozenset[str]) -> str:
    parts: list[str] = []
    for char in value:
        if char in keep:
            parts.append(char)
        else:
            parts.extend(f"~{unit:04X}" for unit in _utf16_units(char))
    return "".join(parts)


def encode_segment(session_id: str) -> str:
    """Encode a session id as one traversal-safe path component.

    ``[A-Za-z0-9._-]`` stay as they are; every other UTF-16 code unit (``~``, ``/``, NUL, lone
    surrogates, non-ASCII) becomes ``~XXXX`` in uppercase hex. ``.`` and ``..`` are escaped whole so the
    result never names the current or parent folder. Raises :class:`ValueError` for an empty id.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"a session id must be a string, got {type(session_id).__name__}")
    if session_id == "":
        raise ValueError("cannot encode an empty session id as a path segment")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    return _escape_units(session_id, _SAFE)


def decode_segment(segment: str) -> str:
    """Invert :func:`encode_segment`. Raises :class:`ValueError` for text it could not have produced."""
    if segment == "~002E":
        return "."
    if segment == "~002E~002E":
        return ".."
    chars: list[str] = []
    pos = 0
    while pos < len(segment):
        char = segment[pos]
        if char == "~":
            match = _ESCAPE.match(segment, pos)
            if match is None:
                raise ValueError(f"{segment!r} is not an encoded session id: bad escape at offset {pos}")
            chars.append(chr(int(match.group(1), 16)))
            pos = match.end()
        elif char in _SAFE:
            chars.append(char)
            pos += 1
        else:
            raise ValueError(f"{segment!r} is not an encoded session id: {char!r} at offset {pos} is never written")
    decoded = js_string("".join(chars))
    if decoded == "" or encode_segment(decoded) != segment:
        raise ValueError(f"{segment!r} is not the canonical encoding of any session id")
    return decoded


def session_folder_name(session_id: str) -> str:
    """The folder name of one session: :func:`encode_segment` when it fits in a path component.

    An id whose encoding is longer than 255 characters keeps the first 180 characters of its encoding,
    then ``~~`` and the SHA-256 of its UTF-16 code units. The name is still unique per id, but not
    reversible; the store reads ids from log headers, never from folder names.
    """
    encoded = encode_segment(session_id)
    if len(encoded) <= MAX_SEGMENT:
        return encoded
    digest = hashlib.sha256(js_string(session_id).encode("utf-16-le", "surrogatepass")).hexdigest()
    return f"{encoded[:_HASHED_PREFIX]}~~{digest}"


def project_key(cwd: str) -> str:
    """A readable bucket name for a working directory, ``--<slug>--`` (at most 255 characters).

    Runs of ``/``, ``\\`` and ``:`` become one ``-``; ``[A-Za-z0-9._-]`` stay; every other UTF-16 code unit
    becomes ``~XXXX``; leading ``-`` are stripped; an empty slug becomes ``root``; the slug is cut to 251
    characters (the cut may split an escape). Lossy: ``/a/b-c`` and ``/a-b/c`` share a key.
    """
    if not isinstance(cwd, str):
        raise TypeError(f"a project path must be a string, got {type(cwd).__name__}")
    if cwd == "":
        raise ValueError("cannot encode an empty project path")
    slug = _escape_units(_SEPARATOR_RUN.sub("-", cwd), _SAFE).lstrip("-")
    if not slug:
        slug = "root"
    return f"--{slug[:_PROJECT_SLUG_MAX]}--"


def default_sessions_dir(cwd: str | os.PathLike[str] | None = None) -> Path:
    """The default JSONL store root, always absolute.

    A non-blank ``$DSH_SESSIONS_DIR`` wins (``~`` expanded; a relative value is taken relative to
    ``cwd``); otherwise ``<cwd>/.dsh/sessions``, where ``cwd`` defaults to the process working directory
    (in a kernel, the notebook's folder).
    """
    base = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    configured = os.environ.get("DSH_SESSIONS_DIR", "")
    if configured.strip():
        return Path(os.path.abspath(os.path.join(base, os.path.expanduser(configured))))
    return Path(base, ".dsh", "sessions")


@dataclass(frozen=True)
class UnreadableEntry:
    """A store entry a listing left out: its ``path`` and, in plain words without the path, ``reason``."""

    path: Path
    reason: str

    @property
    def message(self) -> str:
        """The warning a listing logs for it (naming the entry)."""
        return f"skipped {self.path}: {self.reason}"


def list_session_folders(root: str | os.PathLike[str]) -> tuple[list[tuple[str, Path]], list[UnreadableEntry]]:
    """The session folders directly under a store root, without following links.

    Returns ``(folders, skipped)``: ``(folder name, log path)`` for every real folder (its log may be
    missing or unsafe: opening it is the reader's job), and an :class:`UnreadableEntry` for every entry that
    is a symbolic link (a link is never followed, so a store cannot lead a reader out of itself). Plain
    files and other entries beside the folders are not sessions and are ignored. A missing root is an
    empty store; a root this user cannot list raises
    :class:`~dsh_jupyter.store.errors.LogPermissionError`.
    """
    text = os.fspath(root)
    try:
        with os.scandir(text) as scan:
            entries = list(scan)
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    except PermissionError:
        raise LogPermissionError(text, "(the session store) cannot be listed by this user (permission denied)",
                                 "ask the owner for read access, or use a store of your own") from None
    except OSError as exc:
        raise LogAccessError(text, f"(the session store) cannot be listed ({exc.strerror or exc})") from None
    folders: list[tuple[str, Path]] = []
    skipped: list[UnreadableEntry] = []
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            if entry.is_symlink():
                skipped.append(UnreadableEntry(Path(entry.path), "the session folder is a symbolic link, and links in "
                                               "a store are never followed; replace it with the folder itself"))
            elif entry.is_dir(follow_symlinks=False):
                folders.append((entry.name, Path(entry.path, LOG_NAME)))
        except OSError as exc:  # pragma: no cover - d_type is known on local file systems
            skipped.append(UnreadableEntry(Path(entry.path), f"it cannot be examined ({exc.strerror or exc})"))
    return folders, skipped
