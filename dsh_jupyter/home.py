"""Where the harness keeps user-level state: the ``DSH_HOME`` directory and its precedence."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Used when neither explicit configuration nor a non-blank ``$DSH_HOME`` names a home.
DEFAULT_DSH_HOME = "~/.dsh"


def _home_directory(env: Mapping[str, str]) -> str:
    home = env.get("HOME")
    if home and home.strip():
        return home
    return str(Path.home())


def expand_home(path: str, env: Mapping[str, str] = os.environ) -> str:
    """Expand a leading ``~``, ``~/`` or ``~\\`` to the user's home directory and make the path absolute.

    Only a bare leading tilde is expanded (``~alice/x`` is left as a relative name). The result is
    absolute but symlinks are not resolved, like Node's ``path.resolve``.
    """
    if path == "~":
        path = _home_directory(env)
    elif path.startswith(("~/", "~\\")):
        path = os.path.join(_home_directory(env), path[2:])
    return os.path.abspath(path)


def resolve_dsh_home(explicit: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] = os.environ) -> Path:
    """The absolute harness home.

    Precedence: ``explicit`` configuration, else ``$DSH_HOME`` when it is not empty or whitespace,
    else ``~/.dsh``. A blank explicit value is refused rather than silently meaning the current directory.
    """
    if explicit is not None:
        text = os.fspath(explicit)
        if not text.strip():
            raise ValueError(
                "the configured dsh home is blank; give a directory path, or leave it unset to use "
                "$DSH_HOME or ~/.dsh"
            )
        return Path(expand_home(text, env))
    ambient = env.get("DSH_HOME")
    if ambient is not None and ambient.strip():
        return Path(expand_home(ambient, env))
    return Path(expand_home(DEFAULT_DSH_HOME, env))
