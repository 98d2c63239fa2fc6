"""``dsh-jupyter postgres init|list|search|show|share|unshare``: the PostgreSQL store from a shell.

``postgres init`` creates the schema and its row-level security policies (idempotent; run it once as the
database role that should own the tables). ``postgres list|search|show`` read with the DSN's role, so
they show exactly what that role may see; ``postgres share|unshare`` change who may read a session. The DSN
comes from ``--dsn`` or ``$DSH_POSTGRES_DSN`` and is only ever shown without its password. No catalog is
involved: the database answers.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from typing import Any, TextIO

from ..catalog.postgres import Found, PostgresCatalog
from ..conversation.spend import Spend, spend_by_turn
from ..references.projection import PROJECTION_SKIPS
from ..references.tail import conversation_json, conversation_lines, read_forward
from ..session import SessionError
from ..store.postgres import PostgresStore
from ..store.postgres_schema import ensure_schema
from .errors import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError
from .output import cost_cell, cost_row, escape, print_json, when, write

#: The name that stands for the database where a folder could be given (``sessions copy --from/--to``).
POSTGRES = "postgres"
_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def dsn(args: argparse.Namespace) -> str:
    """The connection string of ``--dsn`` or ``$DSH_POSTGRES_DSN``; a usage error when neither is given."""
    value = (getattr(args, "dsn", None) or os.environ.get("DSH_POSTGRES_DSN", "")).strip()
    if not value:
        raise CliError("name the database: --dsn 'postgresql://ROLE@HOST/DB' or $DSH_POSTGRES_DSN", EXIT_USAGE)
    return value


def run_postgres(args: argparse.Namespace, out: TextIO) -> int:
    """Run one ``postgres`` subcommand; returns the exit code (raises :class:`CliError`)."""
    try:
        return _COMMANDS[args.command](args, out)
    except (PermissionError, LookupError) as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from None
    except SessionError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


def _store(args: argparse.Namespace) -> PostgresStore:
    return PostgresStore(dsn(args), create_schema=False)


def _resolve(store: PostgresStore, text: str) -> str:
    """A visible session id from an id or a unique id prefix."""
    ids = [h.id for h in store.list_headers()]
    if text in ids:
        return text
    prefixed = sorted(i for i in ids if i.startswith(text))
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        raise CliError(f"{escape(text)} is the start of several session ids; give more of the id", EXIT_NOT_FOUND)
    raise CliError(f"no session {escape(text)} that this role can see in {store.where}; list them with "
                   "'dsh-jupyter postgres list'", EXIT_NOT_FOUND)


def _line(found: Found, mark: str = "") -> str:
    """One session as a ``list``/``search`` line: created, id, cost (blank when unknown), title, [cwd]."""
    header = found.header
    shown = escape(found.title) if found.title is not None else "(untitled)"
    where = escape(header.cwd) if header.cwd is not None else "(no cwd)"
    return (f"{mark}{when(int(header.created_at))}  {escape(header.id)}  {cost_cell(found.spend.text())}  {shown}"
            f"  [{where}]")


def _json(found: Found) -> dict[str, Any]:
    record: dict[str, Any] = {"sessionId": found.header.id, "label": found.label, "cwd": found.header.cwd,
                              "createdAt": found.header.created_at}
    cost = found.spend.to_json()
    if cost is not None:
        record["cost"] = cost
    return record


def _init(args: argparse.Namespace, out: TextIO) -> int:
    grant = args.grant
    if grant.upper() != "PUBLIC" and not _ROLE_NAME.fullmatch(grant):
        raise CliError(f"--grant takes a plain role name or PUBLIC, got {grant!r}", EXIT_USAGE)
    store = PostgresStore(dsn(args), create_schema=False)
    with store.connection(create=False) as conn:
        changed = ensure_schema(conn, grant_to="PUBLIC" if grant.upper() == "PUBLIC" else f'"{grant}"')
    write(out, ("created the session tables and policies in " if changed else
                "the session tables and policies are already in place in ") + store.where + "\n")
    return EXIT_OK


def _list(args: argparse.Namespace, out: TextIO) -> int:
    store = _store(args)
    found = PostgresCatalog(store).search(None, None, "", args.limit or 1_000_000_000)
    found.sort(key=lambda f: (-int(f.header.created_at), f.header.id))
    if args.json:
        print_json([_json(f) for f in found], out, indent=None)
        return EXIT_OK
    if not found:
        write(out, "no sessions\n")
    for f in found:
        write(out, _line(f) + "\n")
    return EXIT_OK


def _search(args: argparse.Namespace, out: TextIO) -> int:
    store = _store(args)
    cwd = os.path.abspath(args.cwd) if args.cwd is not None else os.getcwd()
    found = PostgresCatalog(store).search(None, cwd, args.query.lower(), args.limit, body=args.body)
    if args.json:
        print_json([{**_json(f), "sameWorkspace": f.header.cwd == cwd} for f in found], out, indent=None)
        return EXIT_OK
    if not found:
        write(out, "no session matches\n")
    for f in found:
        mark = "* " if f.header.cwd == cwd else "  "
        write(out, _line(f, mark) + "\n")
    return EXIT_OK


def _show(args: argparse.Namespace, out: TextIO) -> int:
    """The header, then the last ``--messages`` messages, each cut to ``--chars`` (as ``sessions show``)."""
    store = _store(args)
    session_id = _resolve(store, args.session)
    with store.stream_surface(session_id, skip_data=PROJECTION_SKIPS) as snapshot:  # a chunk of bodies at a time
        user, assistant, shown = read_forward(snapshot.events, max(args.messages, 0), max(args.chars, 1))
    title = store.read_title(session_id)
    turns = list(spend_by_turn(store.model_calls(session_id)))
    total = sum((spend for _, spend in turns), start=Spend())
    record: dict[str, Any] = {
        "sessionId": session_id, "owner": store.owner(session_id), "sharedWith": store.shared_with(session_id),
        "title": title.get("title") if title else None, "cwd": snapshot.header.cwd,
        "createdAt": snapshot.header.created_at, "capturedThroughSeq": snapshot.captured_through_seq,
        "conversation": conversation_json(user + assistant, shown),
    }
    if total.known:
        record["cost"] = total.to_json()
        record["turnCosts"] = [{"turn": turn, **known} for turn, spend in turns
                               if (known := spend.to_json()) is not None]
    if args.json:
        print_json(record, out)
        return EXIT_OK
    for key in ("sessionId", "owner", "sharedWith", "title", "cwd", "createdAt"):
        value = record[key]
        shown_value = ", ".join(value) if isinstance(value, list) else ("(none)" if value is None else str(value))
        write(out, f"{key:<11} {escape(shown_value)}\n")
    write(out, f"{'messages':<11} {user + assistant:,} ({user:,} user, {assistant:,} assistant)\n")
    if total.known:
        write(out, f"{'cost':<11} {cost_row(total, turns)}\n")
    hint = "; --messages N shows more, 'dsh-jupyter sessions copy --from postgres' copies the whole session"
    for line in conversation_lines(user + assistant, shown, max(args.chars, 1), hint):
        write(out, line + "\n")
    return EXIT_OK


def _share(args: argparse.Namespace, out: TextIO) -> int:
    store = _store(args)
    session_id = _resolve(store, args.session)
    if args.command == "share":
        changed = store.share(session_id, args.role)
        write(out, f"shared {escape(session_id)} with {args.role}\n" if changed else
              f"{escape(session_id)} was already shared with {args.role}\n")
    else:
        changed = store.unshare(session_id, args.role)
        write(out, f"{escape(session_id)} is no longer shared with {args.role}\n" if changed else
              f"{escape(session_id)} was not shared with {args.role}\n")
    return EXIT_OK


_COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], int]] = {
    "init": _init, "list": _list, "search": _search, "show": _show, "share": _share, "unshare": _share}
