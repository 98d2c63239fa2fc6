"""``dsh-jupyter postgres ...`` and ``dsh-jupyter sessions copy``: the PostgreSQL store from a shell.

``postgres init`` creates the schema and its row-level security policies (idempotent; run it once as the
database role that should own the tables). ``postgres list|search|show`` read with the DSN's role, so
they show exactly what that role may see; ``postgres share|unshare`` change who may read a session.
``sessions copy --from DIR --to postgres`` (and back) moves sessions between a JSONL folder and the
database, event for event. The DSN comes from ``--dsn`` or ``$DSH_POSTGRES_DSN`` and is only ever shown
without its password.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..session import SessionHeader
    from ..session.events import Event
    from .base import SessionStore
    from .postgres import PostgresStore

POSTGRES = "postgres"


def add_postgres_commands(groups: Any) -> None:
    """The ``postgres`` command group (``groups`` is the top-level subparsers action)."""
    group = groups.add_parser("postgres", help="the PostgreSQL session store: init, list, search, show, share",
                              description="Sessions in PostgreSQL (DshMagics.store = \"postgres\"), seen with the "
                                          "privileges of the DSN's database role.")
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND")

    def dsn(p: argparse.ArgumentParser) -> None:
        p.add_argument("--dsn", metavar="DSN", help="connection string (default: $DSH_POSTGRES_DSN)")

    p = commands.add_parser("init", help="create the session tables and their access policies (idempotent)",
                            description="Create the schema dsh, its tables and the row-level security policies "
                                        "that let each database role see only its own and shared sessions. Safe to "
                                        "run again. Run it as the role that should own the tables (not a user's).")
    dsn(p)
    p.add_argument("--grant", metavar="ROLE", default="PUBLIC",
                   help="the role (or group) allowed to use the tables (default PUBLIC; the policies still apply)")
    p = commands.add_parser("list", help="the sessions this role can see, newest first")
    dsn(p)
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N sessions")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = commands.add_parser("search", help="sessions whose id, folder or title contain QUERY (ranked as the @ "
                                           "picker ranks them)")
    p.add_argument("query", metavar="QUERY")
    dsn(p)
    p.add_argument("--body", action="store_true", help="also search your prompts and the assistant's answers")
    p.add_argument("--cwd", metavar="DIR", default=None, help="rank sessions of this folder first (default: here)")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N results (default 50)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = commands.add_parser("show", help="a session's header, owner, shares and conversation")
    p.add_argument("session", metavar="ID", help="a session id or a unique prefix of one")
    dsn(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--messages", type=int, default=20, metavar="N", help="show the last N messages (default 20)")
    p.add_argument("--chars", type=int, default=2000, metavar="N",
                   help="cut each message to N characters (default 2000)")
    for name, text in (("share", "let ROLE read a session of yours"), ("unshare", "stop sharing it with ROLE")):
        p = commands.add_parser(name, help=text)
        p.add_argument("session", metavar="ID", help="a session id or a unique prefix of one")
        p.add_argument("--with", dest="role", metavar="ROLE", required=True, help="the database role (or group)")
        dsn(p)


def add_copy_command(commands: Any) -> None:
    """``sessions copy`` (``commands`` is the ``sessions`` group's subparsers action)."""
    p = commands.add_parser(
        "copy", help="copy sessions between a JSONL folder and PostgreSQL, event for event",
        description="Copy sessions between a session folder (.dsh/sessions) and the PostgreSQL store, losslessly: "
                    "a copied session reads the same (same events, same surface). Sessions already at the "
                    "destination are left alone and reported.")
    p.add_argument("--from", dest="source", metavar="DIR|postgres", required=True, help="where to copy from")
    p.add_argument("--to", dest="dest", metavar="DIR|postgres", required=True, help="where to copy to")
    p.add_argument("--dsn", metavar="DSN", help="connection string (default: $DSH_POSTGRES_DSN)")
    p.add_argument("--session", action="append", metavar="ID", help="copy only this session (repeatable)")


class PostgresCliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _dsn(args: argparse.Namespace) -> str:
    value = (getattr(args, "dsn", None) or os.environ.get("DSH_POSTGRES_DSN", "")).strip()
    if not value:
        raise PostgresCliError("name the database: --dsn 'postgresql://ROLE@HOST/DB' or $DSH_POSTGRES_DSN", 2)
    return value


def _store(args: argparse.Namespace) -> PostgresStore:
    from .postgres import PostgresStore

    return PostgresStore(_dsn(args), create_schema=False)


def _resolve(store: PostgresStore, text: str) -> str:
    """A visible session id from an id or a unique id prefix."""
    ids = [h.id for h in store.list_headers()]
    if text in ids:
        return text
    prefixed = sorted(i for i in ids if i.startswith(text))
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        raise PostgresCliError(f"{_escape(text)} is the start of several session ids; give more of the id", 1)
    raise PostgresCliError(f"no session {_escape(text)} that this role can see in {store.where}; list them with "
                           "'dsh-jupyter postgres list'", 1)


def _escape(text: str) -> str:
    from ..cli import escape

    return escape(text)


def _line(session_id: str, created_at: int, title: str | None, cwd: str | None, mark: str = "") -> str:
    from ..cli import _when

    shown = _escape(title) if title is not None else "(untitled)"
    where = _escape(cwd) if cwd is not None else "(no cwd)"
    return f"{mark}{_when(created_at)}  {_escape(session_id)}  {shown}  [{where}]"


def run_postgres(args: argparse.Namespace, out: TextIO) -> int:
    """Run one ``postgres`` subcommand; returns the exit code (raises :class:`PostgresCliError`)."""
    from ..session import SessionError

    try:
        return _POSTGRES_COMMANDS[args.command](args, out)
    except (PermissionError, LookupError) as exc:
        raise PostgresCliError(str(exc), 1) from None
    except SessionError as exc:
        raise PostgresCliError(str(exc), 3) from None


def _init(args: argparse.Namespace, out: TextIO) -> int:
    import re

    from .postgres import PostgresStore
    from .postgres_schema import ensure_schema

    grant = args.grant
    if grant.upper() != "PUBLIC" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", grant):
        raise PostgresCliError(f"--grant takes a plain role name or PUBLIC, got {grant!r}", 2)
    store = PostgresStore(_dsn(args), create_schema=False)
    with store.connection(create=False) as conn:
        changed = ensure_schema(conn, grant_to="PUBLIC" if grant.upper() == "PUBLIC" else f'"{grant}"')
    out.write(("created the session tables and policies in " if changed else
               "the session tables and policies are already in place in ") + store.where + "\n")
    return 0


def _list(args: argparse.Namespace, out: TextIO) -> int:
    from ..catalog.postgres import PostgresCatalog

    store = _store(args)
    found = PostgresCatalog(store).search(None, None, "", args.limit or 1_000_000_000)
    found.sort(key=lambda f: (-int(f.header.created_at), f.header.id))
    if args.json:
        out.write(json.dumps([{"sessionId": f.header.id, "label": f.label, "cwd": f.header.cwd,
                               "createdAt": f.header.created_at} for f in found], ensure_ascii=False) + "\n")
        return 0
    if not found:
        out.write("no sessions\n")
    for f in found:
        out.write(_line(f.header.id, int(f.header.created_at), f.title, f.header.cwd) + "\n")
    return 0


def _search(args: argparse.Namespace, out: TextIO) -> int:
    from ..catalog.postgres import PostgresCatalog

    store = _store(args)
    cwd = os.path.abspath(args.cwd) if args.cwd is not None else os.getcwd()
    found = PostgresCatalog(store).search(None, cwd, args.query.lower(), args.limit, body=args.body)
    if args.json:
        out.write(json.dumps([{"sessionId": f.header.id, "label": f.label, "cwd": f.header.cwd,
                               "createdAt": f.header.created_at, "sameWorkspace": f.header.cwd == cwd}
                              for f in found], ensure_ascii=False) + "\n")
        return 0
    if not found:
        out.write("no session matches\n")
    for f in found:
        mark = "* " if f.header.cwd == cwd else "  "
        out.write(_line(f.header.id, int(f.header.created_at), f.title, f.header.cwd, mark) + "\n")
    return 0


def _show(args: argparse.Namespace, out: TextIO) -> int:
    """The header, then the last ``--messages`` messages, each cut to ``--chars`` (as ``sessions show``)."""
    from ..notebook.escape import escape_text
    from ..references.projection import PROJECTION_SKIPS
    from ..references.tail import conversation_json, conversation_lines, read_forward

    store = _store(args)
    session_id = _resolve(store, args.session)
    with store.stream_surface(session_id, skip_data=PROJECTION_SKIPS) as snapshot:  # a chunk of bodies at a time
        user, assistant, shown = read_forward(snapshot.events, max(args.messages, 0), max(args.chars, 1))
    title = store.read_title(session_id)
    record: dict[str, Any] = {
        "sessionId": session_id, "owner": store.owner(session_id), "sharedWith": store.shared_with(session_id),
        "title": title.get("title") if title else None, "cwd": snapshot.header.cwd,
        "createdAt": snapshot.header.created_at, "capturedThroughSeq": snapshot.captured_through_seq,
        "conversation": conversation_json(user + assistant, shown),
    }
    if args.json:
        out.write(json.dumps(record, ensure_ascii=False, indent=1) + "\n")
        return 0
    for key in ("sessionId", "owner", "sharedWith", "title", "cwd", "createdAt"):
        value = record[key]
        shown_value = ", ".join(value) if isinstance(value, list) else ("(none)" if value is None else str(value))
        out.write(f"{key:<11} {_escape(shown_value)}\n")
    out.write(f"{'messages':<11} {user + assistant:,} ({user:,} user, {assistant:,} assistant)\n")
    hint = "; --messages N shows more, 'dsh-jupyter sessions copy --from postgres' copies the whole session"
    for line in conversation_lines(user + assistant, shown, max(args.chars, 1), hint):
        out.write(escape_text(line) + "\n")
    return 0


def _share(args: argparse.Namespace, out: TextIO) -> int:
    store = _store(args)
    session_id = _resolve(store, args.session)
    if args.command == "share":
        changed = store.share(session_id, args.role)
        out.write(f"shared {_escape(session_id)} with {args.role}\n" if changed else
                  f"{_escape(session_id)} was already shared with {args.role}\n")
    else:
        changed = store.unshare(session_id, args.role)
        out.write(f"{_escape(session_id)} is no longer shared with {args.role}\n" if changed else
                  f"{_escape(session_id)} was not shared with {args.role}\n")
    return 0


_POSTGRES_COMMANDS = {"init": _init, "list": _list, "search": _search, "show": _show, "share": _share,
                      "unshare": _share}


# -- copy ------------------------------------------------------------------------------------------------------
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
    from ..images import message_artifacts

    names = dict.fromkeys(name for event in events if (message := event.message) is not None
                          for name in message_artifacts(message))
    for name in names:
        data = source.load_artifact(header, name)
        if data is not None:
            dest.save_artifact(header, name, data)


def _side(value: str, args: argparse.Namespace) -> SessionStore:
    from .jsonl import JsonlStore
    from .postgres import PostgresStore

    if value == POSTGRES:
        return PostgresStore(_dsn(args))
    folder = Path(os.path.abspath(os.path.expanduser(value)))
    return JsonlStore(folder)


def run_copy(args: argparse.Namespace, out: TextIO) -> int:
    from ..session import SessionError

    if (args.source == POSTGRES) == (args.dest == POSTGRES):
        raise PostgresCliError("copy goes between a session folder and postgres: --from DIR --to postgres, or "
                               "--from postgres --to DIR", 2)
    if args.source != POSTGRES and not Path(os.path.expanduser(args.source)).is_dir():
        raise PostgresCliError(f"no session folder at {args.source}; give the .dsh/sessions folder", 2)
    source, dest = _side(args.source, args), _side(args.dest, args)
    try:
        copied, skipped = copy_sessions(source, dest, args.session)
    except SessionError as exc:
        raise PostgresCliError(f"{exc}; the sessions copied before it are complete", 3) from None
    where = dest.where if hasattr(dest, "where") else str(args.dest)
    out.write(f"copied {len(copied)} session(s) to {where}" +
              (f"; {len(skipped)} already there, left alone: {', '.join(_escape(s) for s in skipped)}"
               if skipped else "") + "\n")
    return 0


__all__ = ["add_copy_command", "add_postgres_commands", "copy_sessions", "run_copy", "run_postgres"]
