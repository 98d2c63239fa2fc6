"""Checks that must meet the permission bits a user meets, whoever runs the tests (CI runs them as root).

Root may write into any folder, so a read-only folder proves nothing to a root process. :func:`as_nobody` runs a
check in a forked child that dropped to the ``nobody`` user (as root), or in this process (as anyone else, who
already meets the bits). The files the check touches must be reachable by that user: :func:`shared_tmp` makes a
short folder in ``/tmp`` every user may enter (pytest's ``tmp_path`` lives under a folder only its owner may
enter). Before forking, :func:`preload` imports what the checks use, so the child never needs a module file it
cannot read (the interpreter and the tree may live in root's home). A test that needs more than root's
usual rights (a tmpfs mount, a device node) calls :func:`lacks_privilege` when the run lacks them.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pkgutil
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

import dsh_jupyter

NOBODY = 65534

#: The subpackages of ``dsh_jupyter`` the checks use (the notebook host and the server stay out: slow to import).
PRELOADED = ("store", "session", "catalog", "references", "cli", "query", "tools", "_json", "ranking")


def preload(extra: Iterable[str] = ()) -> None:
    """Import the :data:`PRELOADED` subpackages, a few standard modules and ``extra`` (module names)."""
    for info in pkgutil.walk_packages(dsh_jupyter.__path__, "dsh_jupyter."):
        if info.name.split(".")[1] in PRELOADED:
            with contextlib.suppress(Exception):
                importlib.import_module(info.name)
    for name in ("sqlite3", "argparse", "datetime", "hashlib", "uuid", "json", "encodings.idna", "unicodedata",
                 *extra):
        importlib.import_module(name)


def as_nobody(check: Callable[[], Any], *, extra_modules: Iterable[str] = ()) -> Any:
    """Run ``check`` as a user without root's rights; returns what it returned (it must be JSON).

    As root: in a forked child that dropped to uid/gid 65534 (``extra_modules`` are imported first, with
    :func:`preload`); an exception in the child fails the test with its traceback. Otherwise: here."""
    if os.geteuid() != 0:
        return check()  # already a non-root user
    preload(extra_modules)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = {"ok": check()}
        except BaseException:
            result = {"error": traceback.format_exc()}
        with os.fdopen(write_fd, "w") as fh:
            fh.write(json.dumps(result))
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    result = json.loads(data)
    assert "error" not in result, result.get("error")
    return result["ok"]


def lacks_privilege(reason: str) -> NoReturn:
    """Skip a test that needs a privilege this run does not have (mounting a file system, making a device node).

    As root on a machine like CI's, both are available and the test runs; a container started without
    ``CAP_SYS_ADMIN`` or ``CAP_MKNOD`` cannot give them, and failing there would only say so about the machine."""
    pytest.skip(reason)


@contextlib.contextmanager
def shared_tmp(prefix: str = "dsh-h-") -> Iterator[Path]:
    """A short folder in /tmp (a socket path must stay under 108 bytes) every user may enter, removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
