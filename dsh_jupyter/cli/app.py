"""``main``: parse the command line, run one command, turn every expected failure into a message on stderr
and an exit code (no traceback).

Deferred imports: the copy and ``postgres`` commands, the catalog's and the session's errors load when a
command runs, so ``--help``, ``--version`` and usage errors answer from the parser alone
(``benchmarks/bench_cli_start.py`` keeps them under 150 ms).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from .export import cmd_export
from .output import say
from .parser import build_parser, subparser
from .scan import cmd_scan
from .scope import services as _services
from .sessions import cmd_list, cmd_locate, cmd_reindex, cmd_search
from .show import cmd_show

if TYPE_CHECKING:
    from ..catalog import Catalog

#: The ``sessions`` commands that read through the catalog (``copy`` and the ``postgres`` group do not).
COMMANDS: dict[str, Callable[[Catalog, argparse.Namespace, TextIO], int]] = {
    "list": cmd_list, "search": cmd_search, "show": cmd_show, "locate": cmd_locate, "scan": cmd_scan,
    "export": cmd_export, "reindex": cmd_reindex}


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    out = out if out is not None else sys.stdout
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.group is None or args.command is None:
        target = parser if args.group is None else subparser(parser, args.group)
        target.print_help(sys.stderr)
        return EXIT_USAGE
    if args.group == "mcp":
        return _run_mcp(args)
    if args.group == "postgres" or args.command == "copy":  # no catalog: the database answers
        return _run_database(args, out)
    return _run_catalog(args, out)


def _run_mcp(args: argparse.Namespace) -> int:
    from .mcp import run_mcp

    try:
        return run_mcp(args)
    except CliError as exc:
        say(str(exc))
        return exc.code


def _run_database(args: argparse.Namespace, out: TextIO) -> int:
    from .copy import run_copy
    from .postgres import run_postgres

    try:
        return run_postgres(args, out) if args.group == "postgres" else run_copy(args, out)
    except CliError as exc:
        say(str(exc))
        return exc.code
    except BrokenPipeError:
        return EXIT_OK


def _run_catalog(args: argparse.Namespace, out: TextIO) -> int:
    from ..catalog import CatalogCorrupt, CatalogUnavailable
    from ..session import SessionError

    services = _services()
    try:
        catalog = services.catalog
    except ValueError as exc:  # a blank explicit home
        say(str(exc))
        return EXIT_USAGE
    if catalog is None:
        say(f"the session catalog in {services.dsh_home()} could not be opened (see the warning above); check that "
            "it is a writable folder, or set $DSH_HOME to use another one")
        return EXIT_FAILED
    try:
        for attempt in range(2):
            try:
                return COMMANDS[args.command](catalog, args, out)
            except CatalogCorrupt as exc:
                if attempt:
                    raise
                say(str(exc))  # set aside; the retry rebuilds it
        return EXIT_FAILED  # pragma: no cover - the loop returns or raises
    except CliError as exc:
        say(str(exc))
        return exc.code
    except CatalogUnavailable as exc:
        say(f"{exc}. Try again in a moment; if it persists, check that {catalog.home} is a writable folder (set "
            "$DSH_HOME to use another one).")
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK
    except (SessionError, OSError) as exc:  # a store or log this user cannot read: say which, no traceback
        say(str(exc))
        return EXIT_FAILED
    finally:
        services.close()
