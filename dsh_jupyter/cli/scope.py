"""Where a ``sessions`` command looks: the current folder's services, the store ``--store`` names (or every
store with ``--all``), and one session by id or unique id prefix within them.

Deferred imports: the services (and with them logging, threading and dataclasses) and the catalog load when
a scope is resolved, not for ``--help`` or ``--version``.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from .errors import EXIT_NOT_FOUND, EXIT_USAGE, CliError
from .output import escape, warn_errors

if TYPE_CHECKING:
    from ..catalog import Catalog, CatalogEntry
    from ..services import Services
    from ..sources import ForeignSessions


def services(option: str | None = None) -> Services:
    """The session services of the current folder (or of the store ``--store`` names), wired as the kernel's
    and the server's are (:mod:`dsh_jupyter.services`), with a private catalog and no background threads."""
    if option is not None and not option.strip():
        raise CliError("--store needs a folder path", EXIT_USAGE)
    from ..services import Services, ServiceSettings

    folder = os.path.abspath(os.path.expanduser(option)) if option is not None else ""
    return Services(ServiceSettings(cwd=os.getcwd(), sessions_dir=folder), index_in_background=False,
                    auto_index=False, shared_catalog=False)


def local_store(option: str | None) -> str:
    """The root of the current folder's store (or of ``--store DIR``); a usage error when there is none."""
    path = services(option).sessions_root()
    if not path.is_dir():
        hint = ("pass the store with --store DIR (the .dsh/sessions folder beside the notebooks), or use --all "
                "for every known store")
        raise CliError(f"no session store at {path}; {hint}", EXIT_USAGE)
    return str(path)


def scope(catalog: Catalog, args: argparse.Namespace) -> list[str] | None:
    """The store roots a command looks at (``None``: every known store), indexed and up to date."""
    if getattr(args, "all", False):
        here = services().sessions_root()
        if here.is_dir():
            catalog.register_store(here)  # the store of the current folder counts as known
        report = catalog.sync(budget=None)
        warn_errors(report.errors)
        return None
    root = local_store(args.store)
    name = catalog.register_store(root)
    report = catalog.sync([name], budget=None)
    warn_errors(report.errors)
    return [name]


def scope_or_none(catalog: Catalog, args: argparse.Namespace, foreign: ForeignSessions | None) -> list[str] | None:
    """:func:`scope`, except that with other tools' sessions to list a missing local store means "none of
    ours" (``[]``) instead of an error."""
    try:
        return scope(catalog, args)
    except CliError:
        if foreign is None or args.all:
            raise
        return []


def known_roots(catalog: Catalog) -> list[str]:
    """Every store root the catalog knows (nothing is indexed or read), the current folder's store first."""
    from ..catalog import store_root

    here = services().sessions_root()
    roots = [store_root(here)] if here.is_dir() else []
    return list(dict.fromkeys([*roots, *(s.root for s in catalog.stores() if not s.missing)]))


def require_session_text(text: str) -> str:
    """``text`` when it can name a session; an empty id or prefix is a usage error (it would match every id)."""
    if not text.strip():
        raise CliError("give a session id or the start of one (an empty id names no session); "
                       "'dsh-jupyter sessions list' shows them", EXIT_USAGE)
    return text


def resolve(catalog: Catalog, text: str, roots: list[str] | None) -> CatalogEntry:
    """One session by id or unique id prefix, within ``roots`` (``None``: anywhere)."""
    from ..catalog import store_root

    require_session_text(text)
    wanted = None if roots is None else {store_root(r) for r in roots}
    copies = [e for e in catalog.lookup(text) if wanted is None or e.store in wanted]
    if copies:
        return copies[0]
    matches = [e for e in catalog.find(text) if e.session_id != text]
    inside = []  # one entry per matching id: its copy in ``roots`` (the primary copy when anywhere)
    for match in matches:
        held = [e for e in catalog.lookup(match.session_id) if wanted is None or e.store in wanted]
        if held:
            inside.append(held[0])
    if len(inside) == 1:
        return inside[0]
    if len(inside) > 1:
        shown = ", ".join(escape(e.session_id) for e in inside[:5]) + (", …" if len(inside) > 5 else "")
        raise CliError(f"{escape(text)} is the start of several session ids ({shown}); give more of the id",
                       EXIT_NOT_FOUND)
    elsewhere = catalog.lookup(text) or matches
    if roots is not None and elsewhere:
        stores = sorted({e.store for e in elsewhere})
        raise CliError(f"session {escape(text)} is not in {roots[0]}, but the catalog has it in "
                       f"{', '.join(stores)}; use --all or --store DIR", EXIT_NOT_FOUND)
    where = "any known store" if roots is None else roots[0]
    raise CliError(f"no session {escape(text)} in {where}; list them with 'dsh-jupyter sessions list'"
                   + ("" if roots is None else " (or --all)"), EXIT_NOT_FOUND)
