"""``sessions copy --from DIR --to postgres`` (and back): sessions moved between a JSONL folder and the
database event for event, with the images their tool results name."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..images import message_artifacts
from ..session import SessionError
from ..store.jsonl import JsonlStore
from ..store.postgres import PostgresStore
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from .output import escape, write
from .postgres import POSTGRES, dsn

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..session import SessionHeader
    from ..session.events import Event
    from ..store.base import SessionStore


def copy_sessions(source: SessionStore, dest: SessionStore, session_ids: list[str] | None = None) -> tuple[
        list[str], list[str]]:
    """Copy sessions event for event; returns ``(copied, skipped)`` ids (skipped: already at ``dest``)."""
    wanted = session_ids if session_ids is not None else sorted(h.id for h in source.list_headers())
    copied: list[str] = []
    skipped: list[str] = []
    for session_id in wanted:
        if dest.exists(session_id):
            skipped.append(session_id)
            continue
        original = source.load(session_id)
        with dest.create(original.header) as writer:
            writer.append(original.events)  # the stored events themselves: same seqs, times, ops and data
        _copy_artifacts(source, dest, original.header, original.events)
        copied.append(session_id)
    return copied, skipped


def _copy_artifacts(source: SessionStore, dest: SessionStore, header: SessionHeader, events: Iterable[Event]) -> None:
    """Carry the images the session's tool results name (artifacts), so the copy sends them as the source did;
    one that is missing at the source stays missing (the model then gets the image's description)."""
    names = dict.fromkeys(name for event in events if (message := event.message) is not None
                          for name in message_artifacts(message))
    for name in names:
        data = source.load_artifact(header, name)
        if data is not None:
            dest.save_artifact(header, name, data)


def _side(value: str, args: argparse.Namespace) -> SessionStore:
    if value == POSTGRES:
        return PostgresStore(dsn(args))
    return JsonlStore(Path(os.path.abspath(os.path.expanduser(value))))


def run_copy(args: argparse.Namespace, out: TextIO) -> int:
    """``sessions copy``; returns the exit code (raises :class:`CliError`)."""
    if (args.source == POSTGRES) == (args.dest == POSTGRES):
        raise CliError("copy goes between a session folder and postgres: --from DIR --to postgres, or "
                       "--from postgres --to DIR", EXIT_USAGE)
    if args.source != POSTGRES and not Path(os.path.expanduser(args.source)).is_dir():
        raise CliError(f"no session folder at {args.source}; give the .dsh/sessions folder", EXIT_USAGE)
    source, dest = _side(args.source, args), _side(args.dest, args)
    try:
        copied, skipped = copy_sessions(source, dest, args.session)
    except SessionError as exc:
        raise CliError(f"{exc}; the sessions copied before it are complete", EXIT_FAILED) from None
    where = dest.where if hasattr(dest, "where") else str(args.dest)
    write(out, f"copied {len(copied)} session(s) to {where}" +
          (f"; {len(skipped)} already there, left alone: {', '.join(escape(s) for s in skipped)}"
           if skipped else "") + "\n")
    return EXIT_OK
