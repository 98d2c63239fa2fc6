"""The ``%dsh`` subcommands as one declarative table, the parsers built from it, their generated help, and
the tables ``%dsh models``, ``%dsh config`` and ``%dsh env`` show.

:data:`COMMANDS` is the only place a subcommand, its arguments and its one-line description are written:
the parsers, ``%dsh?``, ``%dsh NAME?`` / ``%dsh help NAME``, the README's command table and the dispatch
check in the tests all come from it. :func:`cell_magic_help` does the same for the ``%%dsh`` options
(declared with IPython's ``magic_arguments`` on the cell magic). :func:`readme_tables` renders the
README's reference tables from the code, so a test can compare them row by row.

Everything here is light (``argparse``; plain named tuples, no dataclasses): it is imported when the extension
loads. The display helpers are imported when a table is shown. No ``from __future__ import annotations``
here: the named tuples' field types would then be compiled from strings at import.
"""

import argparse
import inspect
import json
import re
import shlex
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, Protocol, TypeVar

from ..escape import escape_controls, html_field
from ..ui.display import _MISSING, _TD, _TH, _filter, _pad, display_width
from ..ui.markdown import safe_html

if TYPE_CHECKING:
    from traitlets import TraitType

    from ..models.registry import ModelListing

#: Help is formatted at this width everywhere (a kernel has no terminal to measure).
HELP_WIDTH = 100


class CommandLineError(Exception):
    """What the user typed after ``%dsh`` cannot be parsed; the message says why in their terms.

    ``command`` names the subcommand whose help to point to (``None``: the overview, ``%dsh?``).
    """

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command

    def advice(self, line: str) -> str:
        """One line: what was typed, what is wrong, where the help is."""
        typed = " ".join(f"%dsh {line.strip()}".split())
        return f"{typed!r}: {self}; see %dsh {self.command}?" if self.command else f"{typed!r}: {self}; see %dsh?"


class HelpFormatter(argparse.HelpFormatter):
    """Plain-text help at a fixed width; help strings are shown as written (``%%dsh`` stays ``%%dsh``).

    Descriptions may be docstrings: they are dedented and each paragraph is filled to the width. An
    argument that takes the rest of the line (``nargs="+"``) shows as its one name (``title TEXT``).
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=HELP_WIDTH, max_help_position=28)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = inspect.cleandoc(text).split("\n\n")
        return "\n\n".join(textwrap.fill(" ".join(p.split()), width, initial_indent=indent,
                                         subsequent_indent=indent) for p in paragraphs)

    def _expand_help(self, action: argparse.Action) -> str:
        return action.help or ""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        return ", ".join(action.option_strings) + " " + self._format_args(action, action.dest.upper())

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        if action.nargs == "+":
            return self._metavar_formatter(action, default_metavar)(1)[0]
        return super()._format_args(action, default_metavar)


class _Parser(argparse.ArgumentParser):
    """An argument parser that reports bad input as :class:`CommandLineError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise CommandLineError(message)


def positive_int(text: str) -> int:
    """``--limit``-style values: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"takes a positive whole number, got {text!r}")
    return int(text)


def export_format(text: str) -> str:
    """``--to`` values of ``%dsh export``."""
    if text not in ("md", "html", "ipynb"):
        raise argparse.ArgumentTypeError(f"takes md, html or ipynb, got {text!r}")
    return text


class Argument(NamedTuple):
    """One argument of a subcommand: a positional (``names`` is its one name) or an option."""

    names: tuple[str, ...]
    help: str
    metavar: str | None = None
    nargs: str | None = None
    flag: bool = False
    type: Callable[[str], Any] | None = None

    def synopsis(self) -> str:
        """How the argument shows in a usage line: ``[--limit N]``, ``[--body]``, ``[QUERY ...]``, ``ID``."""
        name = self.metavar or self.names[0].lstrip("-").upper()
        if self.names[0].startswith("-"):
            return f"[{self.names[0]}]" if self.flag else f"[{self.names[0]} {name}]"
        return {"*": f"[{name} ...]", "?": f"[{name}]"}.get(self.nargs or "", name)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.flag:
            parser.add_argument(*self.names, action="store_true", help=self.help)
            return
        options: dict[str, Any] = {"help": self.help}
        if self.metavar is not None:
            options["metavar"] = self.metavar
        if self.nargs is not None:
            options["nargs"] = self.nargs
        if self.type is not None:
            options["type"] = self.type
        parser.add_argument(*self.names, **options)


class Command(NamedTuple):
    """One ``%dsh`` subcommand: its name, one-line description and arguments."""

    name: str
    summary: str
    arguments: tuple[Argument, ...] = ()
    #: The one positional argument is the rest of the line as typed (a title may hold an apostrophe).
    rest_of_line: bool = False

    def parser(self) -> argparse.ArgumentParser:
        parser = _Parser(prog=f"%dsh {self.name}", description=self.summary, add_help=False,
                         formatter_class=HelpFormatter, allow_abbrev=False)
        for argument in self.arguments:
            argument.add_to(parser)
        return parser

    def usage(self) -> str:
        """``%dsh sessions [--limit N] [--body] [QUERY ...]``: the command with its arguments.

        Written from the declarations without building the parser (the overview is rendered when the
        extension loads); the tests check it equals the parser's own usage line.
        """
        options = [a.synopsis() for a in self.arguments if a.names[0].startswith("-")]
        positionals = [a.synopsis() for a in self.arguments if not a.names[0].startswith("-")]
        return " ".join([f"%dsh {self.name}", *options, *positionals])

    def help(self) -> str:
        return self.parser().format_help().rstrip() + "\n\n%dsh? lists every command."

    def parse(self, words: Sequence[str]) -> argparse.Namespace:
        return self.parser().parse_args(list(words))


_QUERY = Argument(("query",), "Show only sessions whose title, id or folder contains this text.",
                  metavar="QUERY", nargs="*")

#: Every ``%dsh`` subcommand, in the order help lists them.
COMMANDS: tuple[Command, ...] = (
    Command("sessions", "List sessions from every known notebook folder: label, id, folder, created, cost, "
            "same workspace.", (
                _QUERY,
                Argument(("--limit",), "Show at most N sessions. Default: the `candidate_limit` setting.",
                         metavar="N", type=positive_int),
                Argument(("--body",), "Also match the text of prompts and answers (never tool output or "
                         "reasoning).", flag=True),
            )),
    Command("new", "Start a new session for the following `%%dsh` cells.", (
        Argument(("-m", "--model"), "Model of the new session (`%dsh models` lists them). Default: the "
                 "`model` setting.", metavar="SPEC"),
        Argument(("--discard",), "Drop events of the current session that could not be saved (say, the disk "
                 "was full) instead of refusing to switch.", flag=True),
    )),
    Command("resume", "Continue an earlier session in the following `%%dsh` cells.", (
        Argument(("session",), "The session's id, a unique id prefix or its exact title (the rest of the line).",
                 metavar="ID",
                 nargs="+"),
        Argument(("--discard",), "Drop events of the current session that could not be saved instead of "
                 "refusing to switch.", flag=True),
    )),
    Command("title", "Set the current session's title (it wins over automatic titles).", (
        Argument(("text",), "The new title (the rest of the line).", metavar="TEXT", nargs="+"),
    ), rest_of_line=True),
    Command("share", "Let another database role (a user or a group) read one of your sessions and @-reference "
            "it (PostgreSQL store).", (
                Argument(("session",), "The session's id or a unique id prefix.", metavar="SESSION"),
                Argument(("--with",), "The database role to share it with.", metavar="ROLE"),
            )),
    Command("unshare", "Stop sharing one of your sessions with a database role (PostgreSQL store).", (
        Argument(("session",), "The session's id or a unique id prefix.", metavar="SESSION"),
        Argument(("--with",), "The database role to stop sharing it with.", metavar="ROLE"),
    )),
    Command("compact", "Summarise the current session's older conversation into a checkpoint."),
    Command("locate", "Show where the current session's log is and return it (usable as a path)."),
    Command("env", "Show the `DSH_*` values a tool call of the current session gets."),
    Command("export", "Write a session for people: a Markdown or HTML transcript, or a notebook whose code cells "
            "re-run the agent's python and bash calls.", (
                Argument(("session",), "The session's id, a unique id prefix or its exact title. Default: the "
                         "current session.", metavar="SESSION", nargs="?"),
                Argument(("--to",), "The format: `md`, `html` or `ipynb`. Default: `md`.", metavar="FORMAT",
                         type=export_format),
                Argument(("-o", "--output"), "The file to write. Default: the session's id with the format's "
                         "extension, in the notebook's folder.", metavar="PATH"),
                Argument(("--force",), "Replace the file when it exists.", flag=True),
            )),
    Command("pick", "Show a prompt box with the session picker that inserts @-mentions into it.", (
        Argument(("query",), "Start the picker with this search.", metavar="QUERY", nargs="*"),
    )),
    Command("chat", "Show a chat panel: prompt box, session picker and streaming transcript."),
    Command("config", "Show every setting with its value and help; change one with "
            "`%config DshMagics.NAME = VALUE`."),
    Command("models", "Show the models you can use, whether their key is set and which one is in use."),
    Command("mcp", "Show the MCP servers the agent can use: where each is configured, its state (not started, "
            "ready, failed ...) and its tools, `mcp__SERVER__TOOL`, with whether each reads or acts.", (
                Argument(("--connect",), "Start the servers that are not running now (a failed one is tried "
                         "again) instead of at the next prompt.", flag=True),
                Argument(("--trust",), "Trust the project's `.mcp.json` as it is now, so its servers may start "
                         "(read it first: its commands run in this kernel; a change to the file asks again).",
                         flag=True),
            )),
    Command("undo", "Revert the agent's last notebook edit in the current session (an inserted cell is deleted, a "
            "replaced cell gets its old source back, a deleted cell returns); again: the edit before.", (
                Argument(("--force",), "Revert even when the cell was changed since the agent's edit (those "
                         "changes are lost).", flag=True),
            )),
    Command("fix", "Ask the agent to fix the last cell that failed: it gets the cell's source, the error and "
            "summaries of the variables the cell uses, and answers here with a corrected cell.", (
                Argument(("instruction",), "More words for the agent, e.g. `keep the column names`.",
                         metavar="TEXT", nargs="*"),
                Argument(("-m", "--model"), "Model for this answer (`%dsh models` lists them). Default: the "
                         "current session's model.", metavar="SPEC"),
                Argument(("--reasoning",), "Show the model's reasoning.", flag=True),
            )),
    Command("wait", "Wait for the background (`--bg`) turn to finish."),
    Command("stop", "Interrupt the running turn."),
    Command("help", "Show every command, or one command's help (the same as `%dsh COMMAND?`).", (
        Argument(("command",), "The command to explain.", metavar="COMMAND", nargs="?"),
    )),
)

_BY_NAME = {command.name: command for command in COMMANDS}


def find_command(name: str) -> Command:
    """The subcommand called ``name``, or a :class:`CommandLineError` listing the ones there are."""
    command = _BY_NAME.get(name)
    if command is None:
        raise CommandLineError(f"unknown command {name!r}; the commands are {', '.join(_BY_NAME)}")
    return command


_HELP_WORDS = ("-h", "--help", "?", "??")


class Request(NamedTuple):
    """A parsed ``%dsh`` line: run ``command`` with ``args``, or show ``help`` (then ``args`` is ``None``)."""

    command: Command
    args: argparse.Namespace | None = None
    help: str | None = None


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_line(line: str) -> Request:
    """Parse what follows ``%dsh``; help requests (``?``, ``-h``, ``help NAME``) become :attr:`Request.help`."""
    name, rest_text = ([*line.split(None, 1), "", ""])[:2]
    rest_text = rest_text.strip()
    if not name or name in _HELP_WORDS:
        return Request(_BY_NAME["help"], help=line_magic_help())
    if name.endswith("?") and not rest_text:
        command = find_command(name.rstrip("?"))
        return Request(command, help=command.help())
    command = find_command(name)
    if command.rest_of_line:  # free text such as a title: no shell quoting rules, quotes around it dropped
        rest = [_unquote(rest_text)] if rest_text else []
    else:
        try:
            rest = shlex.split(rest_text)
        except ValueError as exc:
            raise CommandLineError(f"cannot split it into words ({exc}); close the quote or drop it",
                                   command.name) from None
    if len(rest) == 1 and rest[0] in _HELP_WORDS:
        return Request(command, help=command.help())
    if command.rest_of_line and rest:
        return Request(command, argparse.Namespace(**{command.arguments[0].names[0]: rest}))
    try:
        args = command.parse(rest)
    except CommandLineError as exc:
        raise CommandLineError(str(exc), command.name) from None
    if command.name == "help":
        if not args.command:
            return Request(command, help=line_magic_help())
        target = find_command(args.command.rstrip("?"))
        return Request(target, help=target.help())
    return Request(command, args)


def line_magic_help() -> str:
    """The help of ``%dsh`` (``%dsh?``, ``%dsh help``): every command with its arguments and description."""
    lines = [
        "Session commands for the notebook's agent.",
        "",
        "usage: %dsh COMMAND [ARGUMENTS]",
        "",
        "%dsh COMMAND? (or %dsh help COMMAND) explains one command and its arguments.",
        "",
        "commands:",
    ]
    column = 24
    for command in COMMANDS:
        usage = command.usage()[len("%dsh "):]
        summary = textwrap.wrap(command.summary, HELP_WIDTH - column - 4)
        if len(usage) > column:
            lines.append(f"  {usage}")
            lines += [f"  {'':<{column}}  {part}" for part in summary]
        else:
            lines.append(f"  {usage:<{column}}  {summary[0]}")
            lines += [f"  {'':<{column}}  {part}" for part in summary[1:]]
    return "\n".join(lines)


#: The end of ``%%dsh?`` (the options come from the cell magic's own declaration).
CELL_MAGIC_EPILOG = "%dsh? lists the session commands (sessions, models, config, ...)."

_Magic = TypeVar("_Magic", bound=Callable[..., Any])


def documented(text: str) -> Callable[[_Magic], _Magic]:
    """Decorator: ``text`` becomes the magic's docstring (what ``%dsh?`` shows)."""

    def document(magic: _Magic) -> _Magic:
        magic.__doc__ = text
        return magic

    return document


def cell_magic_help(name: str) -> Callable[[_Magic], _Magic]:
    """Decorator above ``@magic_arguments()``: the magic's help, generated from its parser under ``name``.

    IPython names the parser after the function (``%dsh`` for the cell magic ``dsh``); this renames it and
    renders the help again, with the formatter given by ``@kwds(formatter_class=HelpFormatter, ...)``.
    """

    def rename(magic: _Magic) -> _Magic:
        parser = getattr(magic, "parser", None)
        if not isinstance(parser, argparse.ArgumentParser):
            raise TypeError("cell_magic_help goes above @magic_arguments(), which gives the magic its parser")
        parser.prog = name
        return documented(parser.format_help().rstrip())(magic)

    return rename


# --------------------------------------------------------------------------- README reference tables


def _markdown_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_markdown_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def cell_option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """``(-s/--session ID, help)`` for every option of the ``%%dsh`` parser, in declaration order."""
    rows = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        name = "/".join(action.option_strings)
        if action.nargs != 0:
            name += " " + (action.metavar if isinstance(action.metavar, str) else action.dest.upper())
        rows.append((name, action.help or ""))
    return rows


def setting_literal(value: object) -> str:
    """A setting's value as ``%config`` takes it: strings in double quotes, numbers and booleans as they are."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def setting_rows(settings: type[Any]) -> list[tuple[str, str, str]]:
    """``(name, default, help)`` of every configurable trait of ``settings``, in declaration order."""
    traits: dict[str, TraitType[Any, Any]] = settings.class_traits(config=True)
    order = list(dict.fromkeys(name for cls in reversed(settings.__mro__) for name in vars(cls) if name in traits))
    return [(name, setting_literal(traits[name].default()), traits[name].help) for name in order]


def readme_tables(cell_parser: argparse.ArgumentParser, settings: type[Any]) -> dict[str, str]:
    """The README's three reference tables as Markdown, keyed by their header line."""
    tables = [
        _markdown_table(("option", "meaning"),
                        [(f"`{name}`", text) for name, text in cell_option_rows(cell_parser)]),
        _markdown_table(("command", "meaning"),
                        [(f"`{command.usage()}`", command.summary) for command in COMMANDS]),
        _markdown_table(("setting", "default", "meaning"),
                        [(f"`{name}`", f"`{default}`", text) for name, default, text in setting_rows(settings)]),
    ]
    return {table.splitlines()[0]: table for table in tables}


def markdown_tables(text: str) -> dict[str, str]:
    """Every Markdown table in ``text`` (runs of lines starting with ``|``), keyed by its header line."""
    found: dict[str, str] = {}
    for match in re.finditer(r"(?m)^\|.*\n(?:^\|.*(?:\n|\Z))*", text):
        table = match.group(0).rstrip("\n")
        found[table.splitlines()[0]] = table
    return found


# --------------------------------------------------------------------------- what the commands show


class Row(NamedTuple):
    """One row of a :class:`CommandTable`: its cells (``None`` shows as a dash), an optional note, and
    whether it stands out (bold in HTML), with ``mark`` shown after its first cell as ``(mark)``."""

    cells: tuple[str | None, ...]
    detail: str = ""
    marked: bool = False
    mark: str = ""


class CommandTable:
    """A small static table as aligned text and as HTML (no scripts), every cell escaped.

    Cells of the columns in ``code`` are shown as code in HTML; a row's ``detail`` is a last column in
    HTML and an indented line under the row in text; ``notes`` are lines after the table.
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[Row], *, css_class: str, empty: str,
                 code: frozenset[int] = frozenset(), detail_column: str = "", notes: Sequence[str] = ()) -> None:
        self.columns = tuple(columns)
        self.rows = list(rows)
        self.css_class = css_class
        self.empty = empty
        self.code = code
        self.detail_column = detail_column
        self.notes = list(notes)

    def _plain(self) -> str:
        if not self.rows:
            return "\n".join([self.empty, *map(escape_controls, self.notes)])
        table = [list(self.columns)]
        for row in self.rows:
            cells = [_MISSING if cell is None else escape_controls(cell) for cell in row.cells]
            if row.mark:
                cells[0] += f" ({escape_controls(row.mark)})"
            table.append(cells)
        widths = [max(display_width(line[col]) for line in table) for col in range(len(self.columns))]
        lines = []
        for position, line in enumerate(table):
            lines.append("  ".join(_pad(cell, widths[col]) for col, cell in enumerate(line)).rstrip())
            detail = self.rows[position - 1].detail if position else ""
            if detail:
                lines.append("    " + escape_controls(detail))
        if self.notes:
            lines += ["", *map(escape_controls, self.notes)]
        return "\n".join(lines)

    def _html_cell(self, col: int, cell: str | None) -> str:
        if cell is None:
            return _MISSING
        return f"<code>{html_field(cell)}</code>" if col in self.code else html_field(cell)

    def _html(self) -> str:
        notes = "".join(f"<p>{html_field(note)}</p>" for note in self.notes)
        if not self.rows:
            return f"<p>{html_field(self.empty)}</p>{notes}"
        columns = [*self.columns, self.detail_column] if self.detail_column else list(self.columns)
        head = "".join(f"<th {_TH}>{html_field(name)}</th>" for name in columns)
        body = []
        for row in self.rows:
            cells = [self._html_cell(col, cell) for col, cell in enumerate(row.cells)]
            if row.mark:
                cells[0] += f" <em>({html_field(row.mark)})</em>"
            if self.detail_column:
                cells.append(inline_code_html(row.detail))
            style = ' style="font-weight:600"' if row.marked else ""
            body.append(f"<tr{style}>" + "".join(f"<td {_TD}>{cell}</td>" for cell in cells) + "</tr>")
        return (f'<table class="{self.css_class}" style="border-collapse:collapse">'
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{notes}")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _filter({"text/html": safe_html(self._html()), "text/plain": self._plain()}, include, exclude)

    def __repr__(self) -> str:
        return self._plain()


def inline_code_html(text: str) -> str:
    """Help text as HTML: each `` `span` `` between backticks as code, everything escaped (an odd backtick
    stays as it is). The ``$`` of ``$CODEX_HOME`` is left to :func:`~..ui.markdown.safe_html`, which keeps it
    from MathJax."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: the last one is a character
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(f"<code>{html_field(part)}</code>" if odd else html_field(part)
                   for odd, part in ((i % 2 == 1, p) for i, p in enumerate(parts)))


def _key_cell(listing: "ModelListing") -> str:
    if listing.key_env is None:
        return "not needed"
    return f"{listing.key_env} {'set' if listing.key_present else 'not set'}"


def models_table(listings: Sequence["ModelListing"], in_use: int | None, *, mark: str,
                 unlisted: str | None = None) -> CommandTable:
    """``%dsh models``: a row per model; row ``in_use`` is marked ``(mark)`` (``current`` or ``default``)."""
    rows = []
    for position, listing in enumerate(listings):
        window = f"{listing.context_window:,}" if listing.context_window else None
        rows.append(Row((listing.spec, listing.provider, listing.model, window, listing.price or None,
                         listing.facts or None, _key_cell(listing), "yes" if listing.available else "no",
                         listing.note or ""),
                        marked=position == in_use, mark=mark if position == in_use else ""))
    notes = [unlisted] if unlisted else []
    notes.append('Use one with %%dsh --model SPEC, %dsh new --model SPEC or %config DshMagics.model = "SPEC".')
    notes.append("Window and prices come from LiteLLM's model map when dsh-jupyter[litellm] is installed, else "
                 "from the built-in table; set prices of your own models with %config DshMagics.model_prices.")
    return CommandTable(("spec", "provider", "model", "context (tokens)", "price (in / out)", "facts from", "API key",
                         "usable", "note"), rows,
                        css_class="dsh-models", empty="No models.", code=frozenset({0}), notes=notes)


def settings_table(settings: object) -> CommandTable:
    """``%dsh config``: every setting of ``settings`` with its value, its help and whether it was changed."""
    rows = []
    for name, default, text in setting_rows(type(settings)):
        value = setting_literal(getattr(settings, name))
        changed = value != default
        rows.append(Row((name, value, f"changed (default {default})" if changed else ""), detail=text,
                        marked=changed))
    return CommandTable(("setting", "value", ""), rows, css_class="dsh-config", empty="No settings.",
                        code=frozenset({0, 1}), detail_column="meaning",
                        notes=["Change one with %config DshMagics.NAME = VALUE (or c.DshMagics.NAME in "
                               "ipython_config.py); it applies to the next prompt."])


class EnvValues(Mapping[str, str]):
    """``%dsh env``: the managed ``DSH_*`` values, usable as a dict and shown as a table."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(sorted(values.items()))

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def table(self) -> CommandTable:
        return CommandTable(("variable", "value"), [Row((name, value)) for name, value in self._values.items()],
                            css_class="dsh-env", empty="No DSH_* values.", code=frozenset({0, 1}),
                            notes=["Every shell the agent starts gets these; credentials and other DSH_* "
                                   "variables are removed from its environment."])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.table()._repr_mimebundle_(include, exclude)

    def __repr__(self) -> str:
        return self.table()._plain()


# --------------------------------------------------------------------------- `%dsh NAME?`

#: A ``%dsh ...`` line ending in ``?``, which IPython would otherwise read as "look up the last word".
_QUESTION_LINE = re.compile(r"^(?P<indent>[ \t]*)%dsh[ \t]+(?P<rest>\S.*\?)[ \t]*$")


def help_request_transformer(lines: list[str]) -> list[str]:
    """IPython input transformer: a ``%dsh ...?`` line goes to ``%dsh`` as typed.

    IPython turns ``%dsh models?`` into "show the object ``models``"; this passes ``models?`` to the magic,
    which shows the help of ``models`` (and keeps a question mark that ends a title). Cells of a cell
    magic (``%%dsh`` prompts) are left alone.
    """
    if not lines or lines[0].lstrip().startswith("%%"):
        return lines
    out = []
    for line in lines:
        match = _QUESTION_LINE.match(line.rstrip("\r\n"))
        if match is None:
            out.append(line)
            continue
        ending = line[len(line.rstrip("\r\n")):]
        out.append(f"{match.group('indent')}get_ipython().run_line_magic('dsh', {match.group('rest')!r}){ending}")
    return out


class _TransformingShell(Protocol):
    input_transformers_cleanup: list[Callable[[list[str]], list[str]]]


def install_help_requests(shell: _TransformingShell) -> Callable[[], None]:
    """Make ``%dsh NAME?`` show that command's help in ``shell``; returns the function that undoes it."""
    transformers = shell.input_transformers_cleanup
    if help_request_transformer not in transformers:
        transformers.append(help_request_transformer)

    def dispose() -> None:
        if help_request_transformer in transformers:
            transformers.remove(help_request_transformer)

    return dispose
