"""The ``dsh-jupyter`` command: find, inspect and locate sessions from a shell (through the session catalog).

``dsh-jupyter sessions list|search|show|locate|scan|reindex``; ``dsh-jupyter sessions COMMAND --help``
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
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from .catalog import Catalog, CatalogEntry

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_FAILED = 3

#: Folders never entered while looking for stores (``scan``).
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", ".git", ".hg", ".venv", "venv", "site-packages", ".tox",
                        ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints"})
_MAX_SCAN_DIRS = 50_000
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class CliError(Exception):
    """A failure to report on stderr with an exit code (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def escape(text: str) -> str:
    """Terminal control characters (line feed included) as literal ``\\xNN``: one field, one line."""
    return _CONTROLS.sub(lambda m: "\\x%02x" % ord(m.group(0)), text)


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
    sessions = groups.add_parser("sessions", help="list, search, show, locate and index sessions",
                                 description="List, search, show, locate and index sessions.")
    commands = sessions.add_subparsers(dest="command", metavar="SUBCOMMAND")

    def scoped(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group()
        where.add_argument("--store", metavar="DIR",
                           help="the session store to use (default: ./.dsh/sessions, or $DSH_SESSIONS_DIR)")
        where.add_argument("--all", action="store_true",
                           help="every store the catalog knows (and the current folder's store)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

    p = commands.add_parser("list", help="sessions, newest first",
                            description="List sessions, newest first (creation time, then id).")
    scoped(p)
    p.add_argument("--limit", type=_positive, default=None, metavar="N", help="at most N sessions")
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
    p = commands.add_parser("show", help="a session's header, title, counts and conversation",
                            description="Print a session's header, title, message counts and the conversation a "
                                        "reference would carry (user and assistant text), newest messages last.")
    p.add_argument("session", metavar="ID", help="a session id or a unique prefix of one")
    scoped(p)
    p.add_argument("--messages", type=_non_negative, default=20, metavar="N",
                   help="show the last N messages (default 20; 0 for none)")
    p.add_argument("--chars", type=_positive, default=2000, metavar="N",
                   help="cut each message to N characters (default 2000)")
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
def _local_store(option: str | None) -> str:
    from .store.paths import default_sessions_dir

    if option is not None:
        if not option.strip():
            raise CliError("--store needs a folder path", EXIT_USAGE)
        path = Path(os.path.abspath(os.path.expanduser(option)))
    else:
        path = default_sessions_dir()
    if not path.is_dir():
        hint = ("pass the store with --store DIR (the .dsh/sessions folder beside the notebooks), or use --all "
                "for every known store")
        raise CliError(f"no session store at {path}; {hint}", EXIT_USAGE)
    return str(path)


def _scope(catalog: Catalog, args: argparse.Namespace) -> list[str] | None:
    """The store roots a command looks at (``None``: every known store), indexed and up to date."""
    if getattr(args, "all", False):
        from .store.paths import default_sessions_dir

        here = default_sessions_dir()
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
        print(f"dsh-jupyter: warning: {error}", file=sys.stderr)


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
    out.write(json.dumps(value, ensure_ascii=False, indent=1) + "\n")


def _entry_line(entry: CatalogEntry, *, mark: str = "") -> str:
    counts = f"{entry.user_messages}/{entry.assistant_messages}"
    cwd = escape(entry.cwd) if entry.cwd is not None else "(no cwd)"
    label = escape(entry.label)
    shown = label if entry.title is not None else "(untitled)"
    return f"{mark}{_when(entry.created_at)}  {escape(entry.session_id)}  {counts:>7}  {shown}  [{cwd}]"


# ---------------------------------------------------------------------------------------------- commands
def cmd_list(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    roots = _scope(catalog, args)
    entries = catalog.sessions(roots, limit=args.limit)
    if args.json:
        _print_json([e.to_json() for e in entries], out)
        return EXIT_OK
    if not entries:
        out.write("no sessions\n")
        return EXIT_OK
    out.write("created           id  user/assistant messages  title  [cwd]\n")
    for entry in entries:
        out.write(_entry_line(entry) + "\n")
    return EXIT_OK


def cmd_search(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    roots = _scope(catalog, args)
    cwd = os.path.abspath(args.cwd) if args.cwd is not None else os.getcwd()
    entries = catalog.candidates("\x00dsh-cli", cwd, args.query, args.limit, body=args.body, roots=roots)
    if not catalog.last_query_complete:
        print("dsh-jupyter: warning: the catalog was not available; the results come from reading the logs and "
              "may be incomplete", file=sys.stderr)
    if args.json:
        _print_json([{**e.to_json(), "sameWorkspace": e.cwd is not None and e.cwd == cwd} for e in entries], out)
        return EXIT_OK
    if not entries:
        out.write("no session matches\n")
        return EXIT_OK
    for entry in entries:
        out.write(_entry_line(entry, mark="* " if entry.cwd == cwd else "  ") + "\n")
    return EXIT_OK


def cmd_show(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    from .references.projection import PROJECTION_SKIPS, project_surface
    from .session import SessionError
    from .store import JsonlStore

    roots = _scope(catalog, args)
    entry = _resolve(catalog, args.session, roots)
    try:
        snapshot = JsonlStore(entry.store).read_surface(entry.session_id, skip_data=PROJECTION_SKIPS)
    except (SessionError, OSError) as exc:
        raise CliError(f"cannot read session {escape(entry.session_id)} at {entry.path}: {exc}") from exc
    projected = project_surface(snapshot)
    messages = list(projected.messages)
    shown = messages[-args.messages:] if args.messages else []
    if args.json:
        record = entry.to_json()
        record["capturedThroughSeq"] = snapshot.captured_through_seq
        record["conversation"] = {
            "messages": [{"role": m.role, "text": m.text[: args.chars], "truncated": len(m.text) > args.chars,
                          "checkpoint": m.checkpoint} for m in shown],
            "omittedMessages": len(messages) - len(shown),
        }
        _print_json(record, out)
        return EXIT_OK
    rows = [
        ("session", escape(entry.session_id)),
        ("title", escape(entry.title) if entry.title is not None else "(none)"),
        ("store", entry.store),
        ("log", entry.path),
        ("cwd", escape(entry.cwd) if entry.cwd is not None else "(none)"),
        ("created", f"{_when(entry.created_at)} ({entry.created_at})"),
    ]
    if entry.notebook:
        rows.append(("notebook", entry.notebook))
    user = sum(1 for m in messages if m.role == "user")
    rows.append(("messages", f"{len(messages)} in the conversation ({user} user, {len(messages) - user} assistant); "
                             f"{len(snapshot.events)} on the surface; "
                             f"{0 if snapshot.captured_through_seq is None else snapshot.captured_through_seq + 1} "
                             "events in the log"))
    rows.append(("size", f"{entry.size} bytes"))
    for key, value in rows:
        out.write(f"{key:<9} {value}\n")
    if shown:
        omitted = len(messages) - len(shown)
        note = f"last {len(shown)} of {len(messages)} messages" if omitted else f"{len(shown)} messages"
        out.write(f"--- conversation ({note}; each cut to {args.chars} characters) ---\n")
        for message in shown:
            text = message.text if len(message.text) <= args.chars else message.text[: args.chars] + " …"
            role = "checkpoint" if message.checkpoint else message.role
            out.write(f"[{role}] {text}\n")
    return EXIT_OK


def cmd_locate(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    roots = _scope(catalog, args)
    entry = _resolve(catalog, args.session, roots)
    if args.json:
        copies = [e.path for e in catalog.lookup(entry.session_id)]
        _print_json({"sessionId": entry.session_id, "path": entry.path, "store": entry.store, "copies": copies}, out)
        return EXIT_OK
    out.write(entry.path + "\n")
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
        print(f"dsh-jupyter: warning: stopped after {_MAX_SCAN_DIRS} folders; scan a narrower folder to find the "
              "rest", file=sys.stderr)
    configured = os.environ.get("DSH_SESSIONS_DIR", "")
    if configured.strip() and not paths:
        from .store.paths import default_sessions_dir

        candidate = str(default_sessions_dir())
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
        out.write(f"no session stores found under {where}\n")
        return EXIT_OK
    for r in results:
        out.write(f"{r['store']}: {r['sessions']} sessions ({r['indexed']} indexed now, {r['removed']} removed)\n")
    return EXIT_OK


def cmd_reindex(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    roots = None if args.all else [_local_store(args.store)]
    report = catalog.reindex(roots)
    _warn_errors(report.errors)
    if args.json:
        _print_json(report.to_json(), out)
        return EXIT_OK
    out.write(f"reindexed {report.stores} store(s): {report.indexed} sessions in {report.seconds:.2f} s\n")
    return EXIT_OK


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions if parser._subparsers is not None else ():  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:  # noqa: SLF001
            return action.choices[name]
    return parser  # pragma: no cover


COMMANDS = {"list": cmd_list, "search": cmd_search, "show": cmd_show, "locate": cmd_locate, "scan": cmd_scan,
            "reindex": cmd_reindex}


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    from .catalog import Catalog, CatalogCorrupt, CatalogUnavailable

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
    try:
        catalog = Catalog(background=False)
    except ValueError as exc:  # a blank explicit home
        print(f"dsh-jupyter: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        for attempt in range(2):
            try:
                return COMMANDS[args.command](catalog, args, out)
            except CatalogCorrupt as exc:
                if attempt:
                    raise
                print(f"dsh-jupyter: {exc}", file=sys.stderr)  # set aside; the retry rebuilds it
        return EXIT_FAILED  # pragma: no cover - the loop returns or raises
    except CliError as exc:
        print(f"dsh-jupyter: {exc}", file=sys.stderr)
        return exc.code
    except CatalogUnavailable as exc:
        print(f"dsh-jupyter: {exc}. Try again in a moment; if it persists, check that {catalog.home} is a "
              "writable folder (set $DSH_HOME to use another one).", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK
    finally:
        catalog.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
