"""``sessions export``: one session, or every session of a store, written into a folder as Markdown, HTML
or a re-runnable notebook (streamed one event at a time, :func:`dsh_jupyter.ui.export.export_stored`).

Deferred imports: the store, the session errors and the exporter (nbformat) load when the command runs,
not for ``--help``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from .output import escape, megabytes, say, write
from .scope import resolve, scope

if TYPE_CHECKING:
    from ..catalog import Catalog

#: Logs from this size on are announced on stderr before they are exported (that takes a while).
LARGE_LOG = 32 << 20


def cmd_export(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """Each session is streamed to its file one event at a time (:func:`dsh_jupyter.ui.export.export_stored`)."""
    from ..session import SessionError
    from ..store import JsonlStore
    from ..ui.export import ExportError, export_name, export_stored

    if args.every_session == (args.session is not None):
        raise CliError("give either a session ID or --all (every session of the store)" if args.every_session
                       else "give the session ID to export, or --all for every session of the store", EXIT_USAGE)
    folder = Path(os.path.abspath(os.path.expanduser(args.folder)))
    roots = scope(catalog, args) if args.every_session or args.store is not None else None
    entries = catalog.sessions(roots) if args.every_session else [resolve(catalog, args.session, roots)]
    if not entries:
        write(out, "no sessions to export\n")
        return EXIT_OK
    _export_folder(folder, args.folder)
    failed = 0
    for entry in entries:
        if entry.size >= LARGE_LOG:  # say what is going on before a long, quiet write
            say(f"exporting session {escape(entry.session_id)} ({megabytes(entry.size)} of log) into "
                f"{escape(str(folder))} …")
        try:
            path, tally = export_stored(JsonlStore(entry.store), entry.session_id, args.to,
                                        folder / export_name(entry.session_id, args.to), overwrite=args.force,
                                        title=entry.title)
        except (ExportError, SessionError, OSError) as exc:
            say(f"cannot export session {escape(entry.session_id)}: {escape(str(exc))}")
            failed += 1
            continue
        if tally.cut_texts or tally.cut_outputs:
            say(f"{escape(str(path))}: {tally.summary()}")
        write(out, f"{escape(str(path))}\n")
    return EXIT_FAILED if failed else EXIT_OK


def _export_folder(folder: Path, typed: str) -> None:
    """Make the export folder (when missing) and check that files can be written into it."""
    if folder.exists() and not folder.is_dir():
        raise CliError(f"{escape(typed)} is a file, not a folder; give the folder the exports should go into",
                       EXIT_USAGE)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create the folder {escape(str(folder))}: {exc.strerror or exc}; choose another "
                       "FOLDER") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CliError(f"cannot write into the folder {escape(str(folder))} (permission denied); choose another "
                       "FOLDER")
