"""The argparse tree of ``dsh-jupyter``: the ``sessions`` group (``copy`` included), the ``postgres`` group and
``mcp`` (:mod:`.mcp`)."""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..conversation.limits import SHOW


def build_parser() -> argparse.ArgumentParser:
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
    _add_session_commands(commands)
    _add_copy_command(commands)
    _add_postgres_commands(groups)
    _add_mcp_command(groups)
    return parser


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the command group ``name`` (for its help), or ``parser`` itself."""
    for action in parser._subparsers._group_actions if parser._subparsers is not None else ():
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser  # pragma: no cover


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def non_negative(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def _session_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="ID", help="a session id or a unique prefix of one")


def _dsn(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dsn", metavar="DSN", help="connection string (default: $DSH_POSTGRES_DSN)")


def _add_session_commands(commands: Any) -> None:
    """``sessions list|search|show|locate|scan|export|reindex`` (``commands``: the group's subparsers action)."""

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
    p.add_argument("--limit", type=positive, default=None, metavar="N", help="at most N sessions")
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
    p.add_argument("--limit", type=positive, default=50, metavar="N", help="at most N results (default 50)")
    foreign(p)
    p = commands.add_parser("show", help="a session's header, title, counts and conversation",
                            description="Print a session's header, title, message counts and the conversation a "
                                        "reference would carry (user and assistant text), newest messages last.")
    _session_id(p)
    scoped(p)
    p.add_argument("--messages", type=non_negative, default=20, metavar="N",
                   help="show the last N messages (default 20; 0 for none)")
    p.add_argument("--chars", type=positive, default=SHOW.text, metavar="N",
                   help=f"cut each message to N characters (default {SHOW.text})")
    foreign(p)
    p = commands.add_parser("locate", help="print the path of a session's JSONL log",
                            description="Print the path of a session's JSONL log (for pandas.read_json(path, "
                                        "lines=True), an editor, or a copy).")
    _session_id(p)
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


def _add_copy_command(commands: Any) -> None:
    """``sessions copy`` (``commands`` is the ``sessions`` group's subparsers action)."""
    p = commands.add_parser(
        "copy", help="copy sessions between a JSONL folder and PostgreSQL, event for event",
        description="Copy sessions between a session folder (.dsh/sessions) and the PostgreSQL store, losslessly: "
                    "a copied session reads the same (same events, same surface). Sessions already at the "
                    "destination are left alone and reported.")
    p.add_argument("--from", dest="source", metavar="DIR|postgres", required=True, help="where to copy from")
    p.add_argument("--to", dest="dest", metavar="DIR|postgres", required=True, help="where to copy to")
    _dsn(p)
    p.add_argument("--session", action="append", metavar="ID", help="copy only this session (repeatable)")


def _add_postgres_commands(groups: Any) -> None:
    """The ``postgres`` command group (``groups`` is the top-level subparsers action)."""
    group = groups.add_parser("postgres", help="the PostgreSQL session store: init, list, search, show, share",
                              description="Sessions in PostgreSQL (DshMagics.store = \"postgres\"), seen with the "
                                          "privileges of the DSN's database role.")
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND")

    p = commands.add_parser("init", help="create the session tables and their access policies (idempotent)",
                            description="Create the schema dsh, its tables and the row-level security policies "
                                        "that let each database role see only its own and shared sessions. Safe to "
                                        "run again. Run it as the role that should own the tables (not a user's).")
    _dsn(p)
    p.add_argument("--grant", metavar="ROLE", default="PUBLIC",
                   help="the role (or group) allowed to use the tables (default PUBLIC; the policies still apply)")
    p = commands.add_parser("list", help="the sessions this role can see, newest first")
    _dsn(p)
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N sessions")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = commands.add_parser("search", help="sessions whose id, folder or title contain QUERY (ranked as the @ "
                                           "picker ranks them)")
    p.add_argument("query", metavar="QUERY")
    _dsn(p)
    p.add_argument("--body", action="store_true", help="also search your prompts and the assistant's answers")
    p.add_argument("--cwd", metavar="DIR", default=None, help="rank sessions of this folder first (default: here)")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N results (default 50)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = commands.add_parser("show", help="a session's header, owner, shares and conversation")
    _session_id(p)
    _dsn(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--messages", type=int, default=20, metavar="N", help="show the last N messages (default 20)")
    p.add_argument("--chars", type=positive, default=SHOW.text, metavar="N",
                   help=f"cut each message to N characters (default {SHOW.text})")
    for name, text in (("share", "let ROLE read a session of yours"), ("unshare", "stop sharing it with ROLE")):
        p = commands.add_parser(name, help=text)
        _session_id(p)
        p.add_argument("--with", dest="role", metavar="ROLE", required=True, help="the database role (or group)")
        _dsn(p)


def _add_mcp_command(groups: Any) -> None:
    """``mcp [--root DIR] [--max-reference-bytes N] [--no-foreign]`` (``groups``: the top-level subparsers)."""
    p = groups.add_parser(
        "mcp", help="serve a folder's sessions to Claude Code, Codex and other MCP clients (stdio)",
        description="Serve the sessions of one folder over the Model Context Protocol on stdin/stdout: tools to "
                    "search them, read one as the bounded, untrusted snapshot an @-mention freezes, and locate its "
                    "log. Nothing outside the folder is read. Add it to Claude Code with "
                    "'claude mcp add dsh-jupyter -- dsh-jupyter mcp --root DIR'.")
    p.add_argument("--root", metavar="DIR", default=None,
                   help="the folder whose sessions are served (default: the current directory)")
    p.add_argument("--max-reference-bytes", type=positive, default=None, metavar="N",
                   help="the budget of one snapshot in bytes (default: 65536, a mention's automatic budget when "
                        "the model's context window is unknown)")
    p.add_argument("--no-foreign", action="store_true",
                   help="leave out Claude Code and Codex transcripts recorded in the folder")
    p.set_defaults(command="serve")
