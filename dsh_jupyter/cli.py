"""The ``dsh-jupyter`` command: find, inspect and locate sessions from a shell (through the session catalog).

``dsh-jupyter sessions list|search|show|locate|scan|export|reindex``; ``dsh-jupyter sessions COMMAND --help``
explains each. Sessions come from one store, ``--store DIR`` (default: ``./.dsh/sessions``, or
``$DSH_SESSIONS_DIR``), or from every store the catalog knows with ``--all``.

Exit codes: 0 done (a search that matches nothing is still 0), 1 the session asked for was not found (or
the id prefix is ambiguous), 2 bad arguments (argparse's own code too), 3 the catalog or a log could not be
read.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from .services import Services, ServiceSettings

if TYPE_CHECKING:
    from .catalog import Catalog, CatalogEntry
    from .references.tail import Shown
    from .sources import ForeignHeader, ForeignSessions

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_FAILED = 3

#: Folders never entered while looking for stores (``scan``).
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", ".git", ".hg", ".venv", "venv", "site-packages", ".tox",
                        ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints"})
_MAX_SCAN_DIRS = 50_000
#: Logs from this size on are announced on stderr before they are exported (that takes a while).
_LARGE_LOG = 32 << 20
# DEL and C1 controls survive ``json.dumps(ensure_ascii=False)``; inside JSON strings they become \uXXXX.
_JSON_CONTROLS = re.compile("[\x7f-\x9f]")


class CliError(Exception):
    """A failure to report on stderr with an exit code (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def escape(text: str) -> str:
    """Terminal control characters (line feed included) as literal ``\\xNN``: one field, one line.

    The notebook's rule (:func:`dsh_jupyter.notebook.escape.escape_controls`), so a terminal and a cell
    show the same text."""
    from .notebook.escape import escape_controls

    return escape_controls(text)


def _text(text: str) -> str:
    """A multi-line text for the terminal: line feeds and tabs kept, every other control as ``\\xNN``."""
    from .notebook.escape import escape_text

    return escape_text(text)


def _write(out: TextIO, text: str) -> None:
    """Everything the command prints on stdout goes through here (terminal controls escaped)."""
    out.write(_text(text))


def _say(message: str) -> None:
    """A message on stderr (``dsh-jupyter: ...``), terminal controls escaped."""
    print(f"dsh-jupyter: {_text(message)}", file=sys.stderr)


def _when(ms: int) -> str:
    try:
        return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return str(ms)


# ---------------------------------------------------------------------------------------------- arguments
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="dsh-jupyter",
        description="Find, inspect and locate dsh-jupyter sessions (the JSONL logs beside your notebooks).",
        epilog="Sessions are indexed in the catalog at $DSH_HOME/catalog.sqlite (default ~/.dsh); it is rebuilt "
               "from the logs whenever needed. Exit codes: 0 ok, 1 not found, 2 bad arguments, 3 read failure.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND")
    sessions = groups.add_parser("sessions", help="list, search, show, locate, export and index sessions",
                                 description="List, search, show, locate, export and index sessions.")
    commands = sessions.add_subparsers(dest="command", metavar="SUBCOMMAND")

    def scoped(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group()
        where.add_argument("--store", metavar="DIR",
                           help="the session store to use (default: ./.dsh/sessions, or $DSH_SESSIONS_DIR)")
        where.add_argument("--all", action="store_true",
                           help="every store the catalog knows (and the current folder's store)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

    def foreign(p: argparse.ArgumentParser) -> None:
        p.add_argument("--no-foreign", action="store_true",
                       help="leave out other tools' sessions (Claude Code, Codex), which are read-only and listed "
                            "unless --store is given or $DSH_FOREIGN_SESSIONS is 0")

    p = commands.add_parser("list", help="sessions, newest first",
                            description="List sessions, newest first (creation time, then id).")
    scoped(p)
    p.add_argument("--limit", type=_positive, default=None, metavar="N", help="at most N sessions")
    foreign(p)
    p = commands.add_parser(
        "search", help="sessions whose id, folder or title contain QUERY (ranked as the @ picker ranks them)",
        description="Sessions whose id, working folder or latest title contain QUERY (case-insensitive), "
                    "ranked like the notebook's @ picker: sessions started in --cwd first, then sessions without "
                    "a folder, then the rest, newest first.")
    p.add_argument("query", metavar="QUERY", help="text to look for (an empty string lists everything)")
    scoped(p)
    p.add_argument("--body", action="store_true",
                   help="also search message bodies (your prompts and the assistant's answers; every word must "
                        "occur, the last one as a prefix; tool output and reasoning are never searched)")
    p.add_argument("--cwd", metavar="DIR", default=None, help="rank sessions of this folder first (default: here)")
    p.add_argument("--limit", type=_positive, default=50, metavar="N", help="at most N results (default 50)")
    foreign(p)
    p = commands.add_parser("show", help="a session's header, title, counts and conversation",
                            description="Print a session's header, title, message counts and the conversation a "
                                        "reference would carry (user and assistant text), newest messages last.")
    p.add_argument("session", metavar="ID", help="a session id or a unique prefix of one")
    scoped(p)
    p.add_argument("--messages", type=_non_negative, default=20, metavar="N",
                   help="show the last N messages (default 20; 0 for none)")
    p.add_argument("--chars", type=_positive, default=2000, metavar="N",
                   help="cut each message to N characters (default 2000)")
    foreign(p)
    p = commands.add_parser("locate", help="print the path of a session's JSONL log",
                            description="Print the path of a session's JSONL log (for pandas.read_json(path, "
                                        "lines=True), an editor, or a copy).")
    p.add_argument("session", metavar="ID", help="a session id or a unique prefix of one")
    scoped(p)
    p = commands.add_parser(
        "scan", help="find session stores under folders and index them",
        description="Find session stores (.dsh/sessions folders, or a folder that itself holds session logs) "
                    "under each PATH, make them known to the catalog and index their new or changed logs. Use "
                    "it after copying or unzipping someone's notebooks with their sessions.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="folders to search (default: the current folder)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = commands.add_parser(
        "export", help="write sessions as Markdown, HTML or notebooks into a folder",
        description="Write one session (ID), or every session of the store (--all), into FOLDER as a Markdown or "
                    "HTML transcript or as a notebook (ipynb) whose code cells re-run the agent's python and bash "
                    "calls. Files are named after the session id. An ID is looked up in every known store unless "
                    "--store is given.")
    p.add_argument("session", metavar="ID", nargs="?", help="a session id or a unique prefix of one")
    p.add_argument("folder", metavar="FOLDER", help="where the files go (created when missing)")
    p.add_argument("--all", dest="every_session", action="store_true", help="export every session of the store")
    p.add_argument("--store", metavar="DIR",
                   help="the session store to use (default for --all: ./.dsh/sessions, or $DSH_SESSIONS_DIR)")
    p.add_argument("--to", required=True, choices=("md", "html", "ipynb"), help="the format")
    p.add_argument("--force", action="store_true", help="replace files that already exist")
    p = commands.add_parser("reindex", help="rebuild the catalog's index from the logs",
                            description="Forget what the catalog recorded for the store (or every store with "
                                        "--all) and index all of its logs again.")
    scoped(p)
    from .store.postgres_cli import add_copy_command, add_postgres_commands

    add_copy_command(commands)
    add_postgres_commands(groups)
    return parser


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _non_negative(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


# ---------------------------------------------------------------------------------------------- helpers
def _services(option: str | None = None) -> Services:
    """The session services of the current folder (or of the store ``--store`` names), wired as the kernel's
    and the server's are (:mod:`dsh_jupyter.services`), with a private catalog and no background threads."""
    if option is not None and not option.strip():
        raise CliError("--store needs a folder path", EXIT_USAGE)
    folder = os.path.abspath(os.path.expanduser(option)) if option is not None else ""
    return Services(ServiceSettings(cwd=os.getcwd(), sessions_dir=folder), index_in_background=False,
                    auto_index=False, shared_catalog=False)


def _local_store(option: str | None) -> str:
    path = _services(option).sessions_root()
    if not path.is_dir():
        hint = ("pass the store with --store DIR (the .dsh/sessions folder beside the notebooks), or use --all "
                "for every known store")
        raise CliError(f"no session store at {path}; {hint}", EXIT_USAGE)
    return str(path)


def _scope(catalog: Catalog, args: argparse.Namespace) -> list[str] | None:
    """The store roots a command looks at (``None``: every known store), indexed and up to date."""
    if getattr(args, "all", False):
        here = _services().sessions_root()
        if here.is_dir():
            catalog.register_store(here)  # the store of the current folder counts as known
        report = catalog.sync(budget=None)
        _warn_errors(report.errors)
        return None
    root = _local_store(args.store)
    name = catalog.register_store(root)
    report = catalog.sync([name], budget=None)
    _warn_errors(report.errors)
    return [name]


def _warn_errors(errors: list[str]) -> None:
    for error in errors:
        _say(f"warning: {error}")


def _resolve(catalog: Catalog, text: str, roots: list[str] | None) -> CatalogEntry:
    """One session by id or unique id prefix, within ``roots`` (``None``: anywhere)."""
    from .catalog import store_root

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


def _print_json(value: Any, out: TextIO) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=1)
    out.write(_JSON_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) + "\n")


def _entry_line(entry: CatalogEntry, *, mark: str = "") -> str:
    counts = f"{entry.user_messages}/{entry.assistant_messages}"
    cwd = escape(entry.cwd) if entry.cwd is not None else "(no cwd)"
    label = escape(entry.label)
    shown = label if entry.title is not None else "(untitled)"
    return f"{mark}{_when(entry.created_at)}  {escape(entry.session_id)}  {counts:>7}  {shown}  [{cwd}]"


# ------------------------------------------------------------------------------------ other tools' sessions
def _foreign(args: argparse.Namespace) -> ForeignSessions | None:
    """Other tools' sessions, unless ``--store``, ``--no-foreign`` or ``$DSH_FOREIGN_SESSIONS=0`` leave them out."""
    from .sources import enabled_by_env, foreign_sessions

    if getattr(args, "store", None) or getattr(args, "no_foreign", False) or not enabled_by_env():
        return None
    return foreign_sessions()


def _scope_or_none(catalog: Catalog, args: argparse.Namespace, foreign: ForeignSessions | None) -> list[str] | None:
    """:func:`_scope`, except that with other tools' sessions to list a missing local store means "none of
    ours" (``[]``) instead of an error."""
    try:
        return _scope(catalog, args)
    except CliError:
        if foreign is None or args.all:
            raise
        return []


def _foreign_json(header: ForeignHeader) -> dict[str, Any]:
    record: dict[str, Any] = {"sessionId": header.session_id, "label": header.title or header.session_id,
                              "title": header.title}
    if header.cwd is not None:
        record["cwd"] = header.cwd
    record.update({"createdAt": header.created_at, "tool": header.tool, "path": header.path, "readOnly": True})
    return record


def _foreign_line(header: ForeignHeader, *, mark: str = "") -> str:
    cwd = escape(header.cwd) if header.cwd is not None else "(no cwd)"
    title = escape(header.title) if header.title is not None else "(untitled)"
    return f"{mark}{_when(header.created_at)}  {escape(header.session_id)}  {'-':>7}  {title}  [{cwd}]  ({header.tool})"


def _merged(entries: Sequence[CatalogEntry], headers: Sequence[ForeignHeader], key_entry: Any, key_header: Any,
            limit: int | None) -> list[CatalogEntry | ForeignHeader]:
    """Our entries and other tools' headers in one order (each list is already in that order)."""
    import heapq

    tagged = heapq.merge(((key_entry(e), 0, i, e) for i, e in enumerate(entries)),
                         ((key_header(h), 1, i, h) for i, h in enumerate(headers)), key=lambda t: t[:3])
    merged = [cast("CatalogEntry | ForeignHeader", t[3]) for t in tagged]
    return merged if limit is None else merged[:limit]


def _messages_row(user: int, assistant: int) -> str:
    return f"{user + assistant:,} in the conversation ({user:,} user, {assistant:,} assistant)"


def _write_conversation(out: TextIO, total: int, shown: Sequence[Shown], chars: int, session_id: str,
                        log_bytes: int | None) -> None:
    """``show``'s conversation (:func:`dsh_jupyter.references.tail.conversation_lines`)."""
    from .references.tail import conversation_lines

    size = f" (the log is {_megabytes(log_bytes)})" if log_bytes else ""
    hint = (f"{size}; --messages N shows more, 'dsh-jupyter sessions export {escape(session_id)} FOLDER --to md' "
            "writes all of them")
    for line in conversation_lines(total, shown, chars, hint):
        _write(out, line + "\n")


def _megabytes(size: int | None) -> str:
    return f"{(size or 0) / 2**20:,.1f} MB"


def _show_foreign(foreign: ForeignSessions, args: argparse.Namespace, out: TextIO) -> int | None:
    """``show`` of another tool's session (its full id, or a unique prefix of one); ``None`` when it is not one."""
    from .references.tail import conversation_json, read_forward

    if not foreign.owns(args.session):
        return None
    matches = [h for h in foreign.headers() if h.session_id.startswith(args.session)]
    exact = [h for h in matches if h.session_id == args.session]
    if len(exact or matches) != 1:
        what = "matches several sessions; give more of the id" if matches else "is not on this machine"
        raise CliError(f"session {escape(args.session)} {what}; list them with 'dsh-jupyter sessions list'",
                       EXIT_NOT_FOUND)
    header = (exact or matches)[0]
    snapshot = foreign.read_surface(header.session_id)
    user, assistant, shown = read_forward(snapshot.events, args.messages, args.chars)
    if args.json:
        record = _foreign_json(header)
        record["conversation"] = conversation_json(user + assistant, shown)
        _print_json(record, out)
        return EXIT_OK
    rows = [("session", escape(header.session_id)), ("tool", f"{header.tool} (read-only)"),
            ("title", escape(header.title) if header.title is not None else "(none)"), ("log", escape(header.path)),
            ("cwd", escape(header.cwd) if header.cwd is not None else "(none)"),
            ("created", f"{_when(header.created_at)} ({header.created_at})"),
            ("messages", _messages_row(user, assistant))]
    for key, value in rows:
        _write(out, f"{key:<9} {value}\n")
    _write_conversation(out, user + assistant, shown, args.chars, header.session_id, None)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------- commands
def cmd_list(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    from .catalog import CatalogEntry

    foreign = _foreign(args)
    roots = _scope_or_none(catalog, args, foreign)
    ours = catalog.sessions(roots, limit=args.limit) if roots != [] else []
    rows = _merged(ours, foreign.headers() if foreign is not None else [],
                   lambda e: (-e.created_at, e.session_id), lambda h: (-h.created_at, h.session_id), args.limit)
    if args.json:
        _print_json([e.to_json() if isinstance(e, CatalogEntry) else _foreign_json(e) for e in rows], out)
        return EXIT_OK
    if not rows:
        _write(out, "no sessions\n")
        return EXIT_OK
    _write(out, "created           id  user/assistant messages  title  [cwd]\n")
    for row in rows:
        _write(out, (_entry_line(row) if isinstance(row, CatalogEntry) else _foreign_line(row)) + "\n")
    return EXIT_OK


def cmd_search(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    from .catalog import CatalogEntry
    from .ranking import workspace_rank

    foreign = _foreign(args)
    roots = _scope_or_none(catalog, args, foreign)
    cwd = os.path.abspath(args.cwd) if args.cwd is not None else os.getcwd()
    entries = (catalog.candidates("\x00dsh-cli", cwd, args.query, args.limit, body=args.body, roots=roots)
               if roots != [] else [])
    if roots != [] and not catalog.last_query_complete:
        _say("warning: the catalog was not available; the results come from reading the logs and may be "
             "incomplete")
    rows = _merged(entries, foreign.matching(args.query.lower(), cwd) if foreign is not None else [],
                   lambda e: e.order_key(cwd), lambda h: (workspace_rank(h.cwd, cwd), -h.created_at, h.session_id),
                   args.limit)
    if args.json:
        _print_json([{**(e.to_json() if isinstance(e, CatalogEntry) else _foreign_json(e)),
                      "sameWorkspace": e.cwd is not None and e.cwd == cwd} for e in rows], out)
        return EXIT_OK
    if not rows:
        _write(out, "no session matches\n")
        return EXIT_OK
    for row in rows:
        mark = "* " if row.cwd == cwd else "  "
        _write(out, (_entry_line(row, mark=mark) if isinstance(row, CatalogEntry) else _foreign_line(row, mark=mark))
               + "\n")
    return EXIT_OK


def cmd_show(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """The header comes from the catalog (printed before the log is read); the conversation is read from the
    log's end, one event at a time (:func:`dsh_jupyter.references.tail.last_messages`), so a session of any
    size answers in about the time its last messages take."""
    from .references.projection import PROJECTION_SKIPS
    from .references.tail import conversation_json, last_messages, read_forward
    from .session import SessionError
    from .store import JsonlStore
    from .store.scan import STREAM_SURFACE

    foreign = _foreign(args)
    if foreign is not None:
        done = _show_foreign(foreign, args, out)
        if done is not None:
            return done
    roots = _scope(catalog, args)
    entry = _resolve(catalog, args.session, roots)
    counted = entry.indexed and entry.readable  # the catalog has just indexed the log: its counts are current
    rows = [
        ("session", escape(entry.session_id)),
        ("title", escape(entry.title) if entry.title is not None else "(none)"),
        ("store", escape(entry.store)),
        ("log", escape(entry.path)),
        ("cwd", escape(entry.cwd) if entry.cwd is not None else "(none)"),
        ("created", f"{_when(entry.created_at)} ({entry.created_at})"),
    ]
    if entry.notebook:
        rows.append(("notebook", escape(entry.notebook)))
    if counted and not args.json:
        _write_rows(out, rows, entry, entry.user_messages, entry.assistant_messages)
    try:
        snapshot = JsonlStore(entry.store).read_surface(entry.session_id, skip_data=PROJECTION_SKIPS | {STREAM_SURFACE})
        if counted:  # only the last messages are decoded, read from the end
            user, assistant = entry.user_messages, entry.assistant_messages
            shown = last_messages(snapshot.events, args.messages, args.chars)
        else:
            user, assistant, shown = read_forward(snapshot.events, args.messages, args.chars)
    except (SessionError, OSError) as exc:
        raise CliError(f"cannot read session {escape(entry.session_id)} at {entry.path}: {exc}") from exc
    if args.json:
        record = entry.to_json()
        record["capturedThroughSeq"] = snapshot.captured_through_seq
        record["conversation"] = conversation_json(user + assistant, shown)
        _print_json(record, out)
        return EXIT_OK
    if not counted:
        _write_rows(out, rows, entry, user, assistant, surface=len(snapshot.events),
                    events=0 if snapshot.captured_through_seq is None else snapshot.captured_through_seq + 1)
    _write_conversation(out, user + assistant, shown, args.chars, entry.session_id, entry.size)
    return EXIT_OK


def _write_rows(out: TextIO, rows: list[tuple[str, str]], entry: CatalogEntry, user: int, assistant: int, *,
                surface: int | None = None, events: int | None = None) -> None:
    """``show``'s header lines, flushed at once (the conversation may take a moment longer)."""
    surface = entry.surface if surface is None else surface
    events = entry.events if events is None else events
    rows = [*rows, ("messages", f"{_messages_row(user, assistant)}; {surface:,} on the surface; {events:,} events "
                                "in the log"),
            ("size", f"{entry.size:,} bytes ({_megabytes(entry.size)})")]
    for key, value in rows:
        _write(out, f"{key:<9} {value}\n")
    out.flush()


def _direct(root: str, session_id: str) -> str | None:
    """The log path of ``session_id`` in the store at ``root`` by a direct lookup (its folder is computed
    from the id; only that one header is read), or ``None`` when that store does not hold it."""
    from .session import SessionError
    from .store import JsonlStore

    store = JsonlStore(root)
    try:
        store.header(session_id)
    except (SessionError, OSError):
        return None
    return str(store.log_path(session_id))


def _known_roots(catalog: Catalog) -> list[str]:
    """Every store root the catalog knows (nothing is indexed or read), the current folder's store first."""
    from .catalog import store_root

    here = _services().sessions_root()
    roots = [store_root(here)] if here.is_dir() else []
    return list(dict.fromkeys([*roots, *(s.root for s in catalog.stores() if not s.missing)]))


def cmd_locate(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """A whole id is a direct lookup (compute its folder, read that one header); an id prefix, or an id
    no store holds under its own folder, is resolved through the catalog."""
    from .catalog import store_root

    roots = _known_roots(catalog) if args.all else [store_root(_local_store(args.store))]
    found = [(root, path) for root in roots if (path := _direct(root, args.session)) is not None]
    if found:
        root, path = found[0]
        if args.json:
            if not args.all:  # copies elsewhere, each a direct lookup too
                found += [(r, p) for r in _known_roots(catalog) if r != root and (p := _direct(r, args.session))]
            _print_json({"sessionId": args.session, "path": path, "store": root, "copies": [p for _, p in found]},
                        out)
            return EXIT_OK
        _write(out, escape(path) + "\n")
        return EXIT_OK
    scope = _scope(catalog, args)
    entry = _resolve(catalog, args.session, scope)
    if args.json:
        copies = [e.path for e in catalog.lookup(entry.session_id)]
        _print_json({"sessionId": entry.session_id, "path": entry.path, "store": entry.store, "copies": copies}, out)
        return EXIT_OK
    _write(out, escape(entry.path) + "\n")
    return EXIT_OK


def find_stores(paths: Sequence[str]) -> list[str]:
    """Session stores under ``paths``: ``.dsh/sessions`` folders, and any folder that holds session logs."""
    from .store.paths import LOG_NAME

    found: list[str] = []
    visited = 0

    def looks_like_store(folder: str) -> bool:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(entry.path, LOG_NAME)):
                        return True
        except OSError:
            return False
        return False

    def walk(folder: str, depth: int) -> Iterator[str]:
        nonlocal visited
        visited += 1
        if visited > _MAX_SCAN_DIRS:
            return
        try:
            with os.scandir(folder) as entries:
                subdirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for entry in subdirs:
            if entry.name == ".dsh":
                sessions = os.path.join(entry.path, "sessions")
                if os.path.isdir(sessions):
                    yield sessions
                continue
            if entry.name.startswith(".") or entry.name in _SKIP_DIRS or depth <= 0:
                continue
            yield from walk(entry.path, depth - 1)

    for raw in paths:
        path = os.path.abspath(os.path.expanduser(raw))
        if not os.path.isdir(path):
            raise CliError(f"{raw} is not a folder; give folders to search for session stores", EXIT_USAGE)
        if looks_like_store(path):
            found.append(path)
        found.extend(walk(path, 12))
    if visited > _MAX_SCAN_DIRS:
        _say(f"warning: stopped after {_MAX_SCAN_DIRS} folders; scan a narrower folder to find the rest")
    configured = os.environ.get("DSH_SESSIONS_DIR", "")
    if configured.strip() and not paths:
        candidate = str(_services().sessions_root())
        if os.path.isdir(candidate):
            found.append(candidate)
    return sorted(dict.fromkeys(os.path.realpath(p) for p in found))


def cmd_scan(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    stores = find_stores(args.paths or [os.getcwd()])
    results = []
    for root in stores:
        name = catalog.register_store(root)
        report = catalog.sync([name], budget=None)
        _warn_errors(report.errors)
        results.append({"store": name, "indexed": report.indexed, "removed": report.removed,
                         "sessions": next((s.sessions for s in catalog.stores() if s.root == name), 0)})
    if args.json:
        _print_json({"stores": results}, out)
        return EXIT_OK
    if not results:
        where = ", ".join(args.paths) if args.paths else "the current folder"
        _write(out, f"no session stores found under {where}\n")
        return EXIT_OK
    for r in results:
        _write(out, f"{r['store']}: {r['sessions']} sessions ({r['indexed']} indexed now, {r['removed']} removed)\n")
    return EXIT_OK


def cmd_reindex(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    roots = None if args.all else [_local_store(args.store)]
    report = catalog.reindex(roots)
    _warn_errors(report.errors)
    if args.json:
        _print_json(report.to_json(), out)
        return EXIT_OK
    _write(out, f"reindexed {report.stores} store(s): {report.indexed} sessions in {report.seconds:.2f} s\n")
    return EXIT_OK


def cmd_export(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """Each session is streamed to its file one event at a time (:func:`dsh_jupyter.export.export_stored`)."""
    from .export import ExportError, export_name, export_stored
    from .session import SessionError
    from .store import JsonlStore

    if args.every_session == (args.session is not None):
        raise CliError("give either a session ID or --all (every session of the store)" if args.every_session
                       else "give the session ID to export, or --all for every session of the store", EXIT_USAGE)
    folder = Path(os.path.abspath(os.path.expanduser(args.folder)))
    roots = _scope(catalog, args) if args.every_session or args.store is not None else None
    entries = catalog.sessions(roots) if args.every_session else [_resolve(catalog, args.session, roots)]
    if not entries:
        _write(out, "no sessions to export\n")
        return EXIT_OK
    _export_folder(folder, args.folder)
    failed = 0
    for entry in entries:
        if entry.size >= _LARGE_LOG:  # say what is going on before a long, quiet write
            _say(f"exporting session {escape(entry.session_id)} ({_megabytes(entry.size)} of log) into "
                 f"{escape(str(folder))} …")
        try:
            path, tally = export_stored(JsonlStore(entry.store), entry.session_id, args.to,
                                        folder / export_name(entry.session_id, args.to), overwrite=args.force,
                                        title=entry.title)
        except (ExportError, SessionError, OSError) as exc:
            _say(f"cannot export session {escape(entry.session_id)}: {escape(str(exc))}")
            failed += 1
            continue
        if tally.cut_texts or tally.cut_outputs:
            _say(f"{escape(str(path))}: {tally.summary()}")
        _write(out, f"{escape(str(path))}\n")
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


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions if parser._subparsers is not None else ():
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser  # pragma: no cover


COMMANDS = {"list": cmd_list, "search": cmd_search, "show": cmd_show, "locate": cmd_locate, "scan": cmd_scan,
            "export": cmd_export, "reindex": cmd_reindex}


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    from .catalog import CatalogCorrupt, CatalogUnavailable
    from .session import SessionError

    out = out if out is not None else sys.stdout
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.group is None or args.command is None:
        target = parser if args.group is None else _subparser(parser, args.group)
        target.print_help(sys.stderr)
        return EXIT_USAGE
    if args.group == "postgres" or args.command == "copy":  # no catalog: the database answers
        from .store.postgres_cli import PostgresCliError, run_copy, run_postgres

        try:
            return run_postgres(args, out) if args.group == "postgres" else run_copy(args, out)
        except PostgresCliError as exc:
            print(f"dsh-jupyter: {exc}", file=sys.stderr)
            return exc.code
        except BrokenPipeError:
            return EXIT_OK
    services = _services()
    try:
        catalog = services.catalog
    except ValueError as exc:  # a blank explicit home
        _say(str(exc))
        return EXIT_USAGE
    if catalog is None:
        _say(f"the session catalog in {services.dsh_home()} could not be opened (see the warning above); check that "
             "it is a writable folder, or set $DSH_HOME to use another one")
        return EXIT_FAILED
    try:
        for attempt in range(2):
            try:
                return COMMANDS[args.command](catalog, args, out)
            except CatalogCorrupt as exc:
                if attempt:
                    raise
                _say(str(exc))  # set aside; the retry rebuilds it
        return EXIT_FAILED  # pragma: no cover - the loop returns or raises
    except CliError as exc:
        _say(str(exc))
        return exc.code
    except CatalogUnavailable as exc:
        _say(f"{exc}. Try again in a moment; if it persists, check that {catalog.home} is a writable folder (set "
             "$DSH_HOME to use another one).")
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK
    except (SessionError, OSError) as exc:  # a store or log this user cannot read: say which, no traceback
        _say(str(exc))
        return EXIT_FAILED
    finally:
        services.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
