"""``sessions list|search|locate|reindex``: the catalog's view of the stores, as text or JSON.

Deferred imports: the catalog, the store and the ranking load when a command runs, not for ``--help``.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, TextIO

from .errors import EXIT_OK
from .foreign import foreign, foreign_json, foreign_line, merged
from .output import cost_cell, escape, print_json, say, warn_errors, when, write
from .scope import known_roots, local_store, require_session_text, resolve, scope, scope_or_none

if TYPE_CHECKING:
    from ..catalog import Catalog, CatalogEntry


def entry_line(entry: CatalogEntry, *, mark: str = "") -> str:
    """One session as a ``list``/``search`` line: created, id, user/assistant counts, cost (blank when no model call
    had a known cost), title, (notebook), [cwd]."""
    counts = f"{entry.user_messages}/{entry.assistant_messages}"
    cwd = escape(entry.cwd) if entry.cwd is not None else "(no cwd)"
    label = escape(entry.label)
    from ..session.header import notebook_label

    shown = label if entry.title is not None else "(untitled)"
    notebook = notebook_label(entry.notebook)
    if notebook is not None:
        shown += f"  ({escape(notebook)})"
    cost = cost_cell(entry.spend.text())
    return f"{mark}{when(entry.created_at)}  {escape(entry.session_id)}  {counts:>7}  {cost}  {shown}  [{cwd}]"


def cmd_list(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    from ..catalog import CatalogEntry

    others = foreign(args)
    roots = scope_or_none(catalog, args, others)
    ours = catalog.sessions(roots, limit=args.limit) if roots != [] else []
    rows = merged(ours, others.headers() if others is not None else [],
                  lambda e: (-e.created_at, e.session_id), lambda h: (-h.created_at, h.session_id), args.limit)
    if args.json:
        print_json([e.to_json() if isinstance(e, CatalogEntry) else foreign_json(e) for e in rows], out)
        return EXIT_OK
    if not rows:
        write(out, "no sessions\n")
        return EXIT_OK
    write(out, "created           id  user/assistant messages  cost  title  (notebook)  [cwd]\n")
    for row in rows:
        write(out, (entry_line(row) if isinstance(row, CatalogEntry) else foreign_line(row)) + "\n")
    return EXIT_OK


def cmd_search(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    from ..catalog import CatalogEntry
    from ..ranking import workspace_rank

    others = foreign(args)
    roots = scope_or_none(catalog, args, others)
    cwd = os.path.abspath(args.cwd) if args.cwd is not None else os.getcwd()
    entries = (catalog.candidates("\x00dsh-cli", cwd, args.query, args.limit, body=args.body, roots=roots)
               if roots != [] else [])
    if roots != [] and not catalog.last_query_complete:
        say("warning: the catalog was not available; the results come from reading the logs and may be "
            "incomplete")
    rows = merged(entries, others.matching(args.query.lower(), cwd) if others is not None else [],
                  lambda e: e.order_key(cwd), lambda h: (workspace_rank(h.cwd, cwd), -h.created_at, h.session_id),
                  args.limit)
    if args.json:
        print_json([{**(e.to_json() if isinstance(e, CatalogEntry) else foreign_json(e)),
                     "sameWorkspace": e.cwd is not None and e.cwd == cwd} for e in rows], out)
        return EXIT_OK
    if not rows:
        write(out, "no session matches\n")
        return EXIT_OK
    for row in rows:
        mark = "* " if row.cwd == cwd else "  "
        write(out, (entry_line(row, mark=mark) if isinstance(row, CatalogEntry) else foreign_line(row, mark=mark))
              + "\n")
    return EXIT_OK


def _direct(root: str, session_id: str) -> str | None:
    """The log path of ``session_id`` in the store at ``root`` by a direct lookup (its folder is computed
    from the id; only that one header is read), or ``None`` when that store does not hold it."""
    from ..session import SessionError
    from ..store import JsonlStore

    store = JsonlStore(root)
    try:
        store.header(session_id)
    except (SessionError, OSError):
        return None
    return str(store.log_path(session_id))


def cmd_locate(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """A whole id is a direct lookup (compute its folder, read that one header); an id prefix, or an id
    no store holds under its own folder, is resolved through the catalog."""
    from ..catalog import store_root

    require_session_text(args.session)
    roots = known_roots(catalog) if args.all else [store_root(local_store(args.store))]
    found = [(root, path) for root in roots if (path := _direct(root, args.session)) is not None]
    if found:
        root, path = found[0]
        if args.json:
            if not args.all:  # copies elsewhere, each a direct lookup too
                found += [(r, p) for r in known_roots(catalog) if r != root and (p := _direct(r, args.session))]
            print_json({"sessionId": args.session, "path": path, "store": root, "copies": [p for _, p in found]},
                       out)
            return EXIT_OK
        write(out, escape(path) + "\n")
        return EXIT_OK
    entry = resolve(catalog, args.session, scope(catalog, args))
    if args.json:
        copies = [e.path for e in catalog.lookup(entry.session_id)]
        print_json({"sessionId": entry.session_id, "path": entry.path, "store": entry.store, "copies": copies}, out)
        return EXIT_OK
    write(out, escape(entry.path) + "\n")
    return EXIT_OK


def cmd_reindex(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    roots = None if args.all else [local_store(args.store)]
    report = catalog.reindex(roots)
    warn_errors(report.errors)
    if args.json:
        print_json(report.to_json(), out)
        return EXIT_OK
    write(out, f"reindexed {report.stores} store(s): {report.indexed} sessions in {report.seconds:.2f} s\n")
    return EXIT_OK
