"""``sessions show``: a session's header lines, then the last messages of its conversation (ours read from
the log's end; another tool's read forward).

Deferred imports: the store, its scanner and window and the reference readers load when the command runs,
not for ``--help``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from .errors import EXIT_NOT_FOUND, EXIT_OK, CliError
from .foreign import foreign, foreign_json
from .output import cost_row, escape, megabytes, print_json, when, write
from .scope import resolve, scope

if TYPE_CHECKING:
    from ..catalog import Catalog, CatalogEntry
    from ..conversation.spend import Spend
    from ..references.tail import Shown
    from ..sources import ForeignSessions
    from ..store import JsonlStore


def cmd_show(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """The header comes from the catalog (printed before the log is read); the conversation is read from the
    log's end, one event at a time (:func:`dsh_jupyter.references.tail.last_messages`), so a session of any
    size answers in about the time its last messages take."""
    from ..conversation.spend import Spend
    from ..references.projection import PROJECTION_SKIPS
    from ..references.tail import conversation_json, last_messages, read_forward
    from ..session import SessionError
    from ..store import JsonlStore
    from ..store.scan import STREAM_SURFACE

    others = foreign(args)
    if others is not None:
        done = _show_foreign(others, args, out)
        if done is not None:
            return done
    roots = scope(catalog, args)
    entry = resolve(catalog, args.session, roots)
    counted = entry.indexed and entry.readable  # the catalog has just indexed the log: its counts are current
    rows = [
        ("session", escape(entry.session_id)),
        ("title", escape(entry.title) if entry.title is not None else "(none)"),
        ("store", escape(entry.store)),
        ("log", escape(entry.path)),
        ("cwd", escape(entry.cwd) if entry.cwd is not None else "(none)"),
        ("created", f"{when(entry.created_at)} ({entry.created_at})"),
    ]
    if entry.notebook:
        rows.append(("notebook", escape(entry.notebook)))
    store = JsonlStore(entry.store)
    try:
        turns = _turn_costs(store, entry)
    except (SessionError, OSError) as exc:
        raise CliError(f"cannot read session {escape(entry.session_id)} at {entry.path}: {exc}") from exc
    total = entry.spend if turns is None else sum((spend for _, spend in turns), start=Spend())
    if total.known:
        rows.append(("cost", cost_row(total, turns, entry.size)))
    if counted and not args.json:
        _write_rows(out, rows, entry, entry.user_messages, entry.assistant_messages)
    skip = frozenset(PROJECTION_SKIPS | {STREAM_SURFACE})
    try:
        windowed = _last_of_big_log(store, entry, skip, args) if counted else None
        if windowed is not None:  # a big log whose counts the catalog knows: only its end is folded
            captured, shown = windowed
            user, assistant = entry.user_messages, entry.assistant_messages
        else:
            snapshot = store.read_surface(entry.session_id, skip_data=skip)
            captured = snapshot.captured_through_seq
            if counted:  # only the last messages are decoded, read from the end
                user, assistant = entry.user_messages, entry.assistant_messages
                shown = last_messages(snapshot.events, args.messages, args.chars)
            else:
                user, assistant, shown = read_forward(snapshot.events, args.messages, args.chars)
                surface = len(snapshot.events)
    except (SessionError, OSError) as exc:
        raise CliError(f"cannot read session {escape(entry.session_id)} at {entry.path}: {exc}") from exc
    if args.json:
        record = entry.to_json()
        cost = total.to_json()
        if cost is not None:
            record["cost"] = cost
        if turns is not None and total.known:
            record["turnCosts"] = [{"turn": turn, **known} for turn, spend in turns
                                   if (known := spend.to_json()) is not None]
        record["capturedThroughSeq"] = captured
        record["conversation"] = conversation_json(user + assistant, shown)
        print_json(record, out)
        return EXIT_OK
    if not counted:
        _write_rows(out, rows, entry, user, assistant, surface=surface, events=0 if captured is None else captured + 1)
    _write_conversation(out, user + assistant, shown, args.chars, entry.session_id, entry.size)
    return EXIT_OK


def _turn_costs(store: JsonlStore, entry: CatalogEntry) -> list[tuple[int | None, Spend]] | None:
    """Each turn's cost in log order (every model call of the log, compacted ones too), or ``None`` for a log
    over :data:`~dsh_jupyter.store.window.FULL_READ_BYTES` (then only the catalog's total is shown). Lines that
    are not assistant messages are never decoded."""
    from ..conversation.spend import spend_by_turn, usages_in_file
    from ..store.window import FULL_READ_BYTES

    fh, _ = store._open_log(entry.session_id)
    with fh:
        if os.fstat(fh.fileno()).st_size > FULL_READ_BYTES:
            return None
        return list(spend_by_turn(usages_in_file(fh)))


def _last_of_big_log(store: JsonlStore, entry: CatalogEntry, skip: frozenset[str],
                     args: argparse.Namespace) -> tuple[int | None, list[Shown]] | None:
    """``(captured through seq, the last messages)`` of a log over :data:`~dsh_jupyter.store.window.FULL_READ_BYTES`
    from its last megabytes alone (:func:`~dsh_jupyter.store.window.fold_window`); ``None`` for a smaller log,
    or one whose end does not stand alone (then the whole log is read)."""
    from ..references.tail import last_messages
    from ..store.scan import read_header
    from ..store.window import FULL_READ_BYTES, fold_window

    fh, path = store._open_log(entry.session_id)
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= FULL_READ_BYTES:
            return None
        header, header_bytes = read_header(fh, str(path))
        window = fold_window(fh, str(path), header, header_bytes, size, skip)
        if window is None:
            return None
        scan = window[0]
        shown = last_messages(scan.surface, args.messages, args.chars)
        if len(shown) < args.messages and entry.user_messages + entry.assistant_messages > len(shown):
            return None  # the window holds fewer messages than asked for: read them all
        return scan.last_seq, shown


def _write_rows(out: TextIO, rows: list[tuple[str, str]], entry: CatalogEntry, user: int, assistant: int, *,
                surface: int | None = None, events: int | None = None) -> None:
    """``show``'s header lines, flushed at once (the conversation may take a moment longer)."""
    surface = entry.surface if surface is None else surface
    events = entry.events if events is None else events
    rows = [*rows, ("messages", f"{_messages_row(user, assistant)}; {surface:,} on the surface; {events:,} events "
                                "in the log"),
            ("size", f"{entry.size:,} bytes ({megabytes(entry.size)})")]
    for key, value in rows:
        write(out, f"{key:<9} {value}\n")
    out.flush()


def _messages_row(user: int, assistant: int) -> str:
    return f"{user + assistant:,} in the conversation ({user:,} user, {assistant:,} assistant)"


def _write_conversation(out: TextIO, total: int, shown: Sequence[Shown], chars: int, session_id: str,
                        log_bytes: int | None) -> None:
    """``show``'s conversation (:func:`dsh_jupyter.references.tail.conversation_lines`)."""
    from ..references.tail import conversation_lines

    size = f" (the log is {megabytes(log_bytes)})" if log_bytes else ""
    hint = (f"{size}; --messages N shows more, 'dsh-jupyter sessions export {escape(session_id)} FOLDER --to md' "
            "writes all of them")
    for line in conversation_lines(total, shown, chars, hint):
        write(out, line + "\n")


def _show_foreign(others: ForeignSessions, args: argparse.Namespace, out: TextIO) -> int | None:
    """``show`` of another tool's session (its full id, or a unique prefix of one); ``None`` when it is not one."""
    from ..references.tail import conversation_json, read_forward

    if not others.owns(args.session):
        return None
    matches = [h for h in others.headers() if h.session_id.startswith(args.session)]
    exact = [h for h in matches if h.session_id == args.session]
    if len(exact or matches) != 1:
        what = "matches several sessions; give more of the id" if matches else "is not on this machine"
        raise CliError(f"session {escape(args.session)} {what}; list them with 'dsh-jupyter sessions list'",
                       EXIT_NOT_FOUND)
    header = (exact or matches)[0]
    snapshot = others.read_surface(header.session_id)
    user, assistant, shown = read_forward(snapshot.events, args.messages, args.chars)
    if args.json:
        record = foreign_json(header)
        record["conversation"] = conversation_json(user + assistant, shown)
        print_json(record, out)
        return EXIT_OK
    rows = [("session", escape(header.session_id)), ("tool", f"{header.tool} (read-only)"),
            ("title", escape(header.title) if header.title is not None else "(none)"), ("log", escape(header.path)),
            ("cwd", escape(header.cwd) if header.cwd is not None else "(none)"),
            ("created", f"{when(header.created_at)} ({header.created_at})"),
            ("messages", _messages_row(user, assistant))]
    for key, value in rows:
        write(out, f"{key:<9} {value}\n")
    _write_conversation(out, user + assistant, shown, args.chars, header.session_id, None)
    return EXIT_OK
