"""What a "commands starting with X" grant covers: exactly one simple command of program ``X``.

A person who answers "Allow commands starting with git" means ``git status`` and ``git log --oneline -3``,
not ``git --version; rm -rf ~``. So a bash command is covered by such a grant (and the grant is offered for
it) only when it is **one simple command** that bash runs as written:

- the program word is a plain name (``git``, not ``/tmp/git``, ``./git`` or ``git-foo``), matched exactly;
- nothing chains, pipes or backgrounds a second command: no ``;``, ``&&``, ``||``, ``|``, ``&`` and no
  second line;
- nothing runs inside it: no ``$(…)``, backticks, ``<(…)`` / ``>(…)``, no shell constructs (``if``, ``for``,
  ``{ …; }``, ``( … )``, functions);
- nothing is expanded that the person cannot read: no ``$VAR`` / ``${…}`` (a default such as
  ``${X:-"-c …"}`` could add options), no brace expansion (``{-c,alias.x=…}`` makes two words), no
  ``$'…'`` quoting (``$'\\x2dc'`` is ``-c``), no arithmetic;
- no variable assignment before the program (``GIT_DIR=… git``, ``PAGER=… git``);
- no redirection that writes (``>``, ``>>``, ``&>``, ``<>``, here-documents); reading a file with ``<``,
  joining streams (``2>&1``) and discarding into ``/dev/null`` are fine;
- no hidden characters (bidi controls, zero-width characters: see :mod:`dsh_jupyter.escape`);
- the program is not one that runs other commands by design (shells, ``eval``, ``exec``, ``env``,
  ``sudo``, ``xargs``, interpreters such as ``python`` or ``node``): a grant for those would cover
  everything, so none is offered;
- for programs with options that load configuration able to run other commands, those options ask again:
  ``git -c``, ``--config-env``, ``--exec-path=…``, and ``-C`` / ``--git-dir`` / ``--work-tree`` (another
  repository's configuration, hooks and ``core.fsmonitor`` would run), as global options before the
  subcommand; ``find -exec`` / ``-execdir`` / ``-ok`` / ``-okdir`` anywhere;
- so do git subcommands that change settings able to run commands later (``git config``: ``git config
  alias.x '!…'`` then ``git x`` would otherwise be two covered commands; ``git filter-branch``) or that take a
  command to run (``rebase --exec``, ``grep -O``, ``difftool --extcmd``, ``submodule foreach``,
  ``bisect run``, ``--upload-pack`` / ``--receive-pack``, ``clone -c`` / ``--template``, ...:
  :data:`RISKY_SUBCOMMANDS`).

The command is parsed with ``bashlex`` (a port of bash's own grammar, so quoting, ``$(…)`` inside double
quotes and here-documents are read the way bash reads them); a command it cannot parse is not covered.
As a second, independent reading, ``shlex`` in punctuation mode must find no unquoted operator either.

What a grant still trusts: the program itself with its own configuration in the working directory (a
repository's ``.git/config`` applies to ``git status`` as it would for you), and globs (``git add *.py``)
expand as usual.

bashlex is imported by the first grant check, not with the module: the approval policy loads without
the shell parser.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from ..escape import hidden_characters

#: Programs whose whole purpose is to run other commands or code: never granted by their name.
RUNNERS = frozenset({
    "bash", "sh", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox", "eval", "exec", "source", ".",
    "command", "builtin", "env", "sudo", "doas", "su", "xargs", "nohup", "time", "timeout", "nice", "ionice",
    "stdbuf", "setsid", "chroot", "watch", "parallel", "python", "python3", "node", "perl", "ruby", "php",
    "lua", "Rscript", "osascript", "ssh",
})

#: Options of a program that make it load configuration or code able to run other commands.
#: ``global``: checked among the options before the first non-option word (the subcommand);
#: ``anywhere``: checked in every argument. An option matches as written or as ``option=value``.
RISKY_OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "git": {"global": ("-c", "--config-env", "--exec-path", "-C", "--git-dir", "--work-tree"), "anywhere": ()},
    "find": {"global": (), "anywhere": ("-exec", "-execdir", "-ok", "-okdir")},
}

#: Subcommands that change settings able to run commands later (``git config alias.x '!…'`` then
#: ``git x``), or that take a command to run, and the options or words of others that do.
#: ``None``: the whole subcommand asks again.
RISKY_SUBCOMMANDS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "git": {
        "config": None, "filter-branch": None, "submodule": ("foreach",), "bisect": ("run",),
        "rebase": ("-x", "--exec"), "grep": ("-O", "--open-files-in-pager"), "difftool": ("-x", "--extcmd"),
        "clone": ("-u", "--upload-pack", "-c", "--config", "--template"), "init": ("--template",),
        "fetch": ("--upload-pack",), "pull": ("--upload-pack",), "ls-remote": ("--upload-pack",),
        "archive": ("--exec",), "push": ("--receive-pack", "--exec"),
        "send-email": ("--to-cmd", "--cc-cmd", "--sendmail-cmd", "--smtp-server"),
    },
}

#: Words a construct opens with, before the program a person reads (``if git status; then …``).
_LEADING = frozenset({"if", "while", "until", "!", "{", "(", "((", "then", "do", "elif", "else"})
_PLAIN_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
#: Redirections that only read, or join/close streams.
_READING_REDIRECTS = frozenset({"<", "<&", ">&", "<<<"})
_DISCARD = "/dev/null"
_OPERATOR_WORDS = {";": "chains a second command with `;`", "&&": "chains a second command with `&&`",
                   "||": "chains a second command with `||`", "&": "runs a command in the background with `&`",
                   "|": "pipes into a second command with `|`", "|&": "pipes into a second command with `|&`"}


@dataclass(frozen=True)
class CommandShape:
    """A bash command as a grant sees it.

    ``program``: the program word it starts with, as a person reads it (``None`` when there is none);
    ``problem``: why a grant for that program does not cover it, in words (``None``: it is one simple
    command a grant for ``program`` covers).
    """

    program: str | None
    problem: str | None = None

    @property
    def grantable(self) -> str | None:
        """The program a "commands starting with" grant may name for this command (``None``: none)."""
        return self.program if self.problem is None else None


def first_program(command: str) -> str | None:
    """The program word a person reads first (assignments such as ``VAR=x`` skipped), leniently."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words: list[str] = []
    try:
        for token in lexer:
            if not words and token in _LEADING:
                continue
            if token and set(token) <= set(";&|()<>"):
                break
            words.append(token)
    except ValueError:  # an unclosed quote: the plain words are still what a person reads
        words = command.split()
    for word in words:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word, flags=re.DOTALL):
            return word
    return None


def command_shape(command: str) -> CommandShape:
    """Whether ``command`` is one simple command a grant may cover, and if not, why (see the module)."""
    program = first_program(command)
    problem = _problem(command, program)
    return CommandShape(program, problem)


def covered_by(command: str, granted: str) -> str | None:
    """``None`` when a grant for ``granted`` covers ``command``; otherwise why it does not, in words."""
    shape = command_shape(command)
    if shape.program != granted:
        return f"the command does not start with `{granted}`"
    return shape.problem


# --------------------------------------------------------------------------- the checks


def _problem(command: str, program: str | None) -> str | None:
    hidden = hidden_characters(command)
    if hidden:
        codes = ", ".join(dict.fromkeys(char.code for char in hidden))
        return f"the command contains hidden characters ({codes})"
    if not command.strip():
        return "the command is empty"
    structural = _structure(command)
    if structural is not None:
        return structural
    lexical = _shlex_operator(command)
    if lexical is not None:
        return lexical
    if program is None:
        return "the command names no program"
    if not _PLAIN_PROGRAM.fullmatch(program):
        if "/" in program:
            return f"`{program}` is a path, and a grant names a program, not a file"
        return f"`{program}` is not a plain program name"
    if program in RUNNERS:
        return f"`{program}` runs other commands or code, so no grant covers it by its name"
    return None


def _structure(command: str) -> str | None:
    """The shell-grammar reading (bashlex): one command node made of words and reading redirections."""
    try:
        import bashlex
    except ImportError:  # pragma: no cover - a declared dependency
        return "the command could not be checked (bashlex is not installed)"
    try:
        trees = bashlex.parse(command)
    except Exception as exc:  # bashlex raises its own errors and NotImplementedError for some syntax
        detail = str(exc).split("\n", 1)[0][:120] or type(exc).__name__
        return f"the command could not be read as one simple command ({detail})"
    if len(trees) != 1:
        return "the command has a second line (each line runs as its own command)"
    tree = trees[0]
    if tree.kind == "list":
        ops = [part.op for part in tree.parts if part.kind == "operator"]
        return "the command " + _OPERATOR_WORDS.get(ops[0] if ops else ";", "chains a second command")
    if tree.kind == "pipeline":
        pipes = [part.pipe for part in tree.parts if part.kind == "pipe"]
        return "the command " + _OPERATOR_WORDS.get(pipes[0] if pipes else "|", "pipes into a second command")
    if tree.kind != "command":
        return "the command is a shell construct (such as `if`, `for`, `{ …; }` or `( … )`), not one simple command"
    words: list[str] = []
    for part in tree.parts:
        if part.kind == "assignment":
            return f"the command sets a variable first (`{command[part.pos[0]:part.pos[1]]}`)"
        if part.kind == "redirect":
            problem = _redirect_problem(command, part)
            if problem is not None:
                return problem
            continue
        if part.kind != "word":
            return "the command is a shell construct, not one simple command"
        problem = _word_problem(command, part)
        if problem is not None:
            return problem
        words.append(part.word)
    return _option_problem(words)


def _word_problem(command: str, word: Any) -> str | None:
    if command:
        raw = _raw_problem(command[word.pos[0]:word.pos[1]])
        if raw is not None:
            return raw
    for node in _walk(word):
        if node.kind == "commandsubstitution":
            raw = command[node.pos[0]:node.pos[1]]
            marker = "backticks" if raw.startswith("`") else "`$(…)`"
            return f"the command runs another command inside {marker}"
        if node.kind == "processsubstitution":
            raw = command[node.pos[0]:node.pos[0] + 2]
            return f"the command runs another command inside `{raw}…)`"
        if node.kind == "parameter":
            return (f"the command expands a variable (`{command[node.pos[0]:node.pos[1]]}`), so what runs is not "
                    "what it shows")
    return None


def _redirect_problem(command: str, redirect: Any) -> str | None:
    kind = redirect.type
    if getattr(redirect, "heredoc", None) is not None or kind in ("<<", "<<-"):
        return "the command feeds a here-document"
    target = redirect.output
    if kind in _READING_REDIRECTS:
        if kind == ">&" and not isinstance(target, int):
            return f"the command writes to a file with `{kind}`"
        return _word_problem(command, target) if not isinstance(target, int) else None
    if not isinstance(target, int) and target.word == _DISCARD and not getattr(target, "parts", None):
        return None
    return f"the command writes to a file with `{kind}`"


def _raw_problem(raw: str) -> str | None:
    """What bash would expand in a word as written that bashlex leaves as text: ``{a,b}``, ``$'…'``."""
    quote = ""
    braces: list[bool] = []  # per unquoted open brace: whether a `,` or `..` followed it
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and quote != "'":
            index += 2
            continue
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "$" and raw[index + 1:index + 2] in ("'", '"'):
            return f"the command uses `${raw[index + 1]}…{raw[index + 1]}` quoting, so what runs is not what it shows"
        elif char == "{":
            braces.append(False)
        elif braces and (char == "," or raw.startswith("..", index)):
            braces[-1] = True
        elif char == "}" and braces and braces.pop():
            return "the command uses brace expansion (`{…,…}`), so what runs is not what it shows"
        index += 1
    return None


def _option_problem(words: list[str]) -> str | None:
    if not words:
        return "the command names no program"
    program, arguments = words[0], words[1:]
    risky = RISKY_OPTIONS.get(program)
    if risky is None:
        return None
    leading: list[str] = []
    for argument in arguments:
        if not argument.startswith("-"):
            break
        leading.append(argument)
    for argument in leading:
        for option in risky["global"]:
            if _is_option(argument, option):
                return f"`{program} {option}` loads settings that can run other commands"
    for argument in arguments:
        for option in risky["anywhere"]:
            if _is_option(argument, option):
                return f"`{program} {option}` runs other commands"
    rest = arguments[len(leading):]
    subcommands = RISKY_SUBCOMMANDS.get(program, {})
    if not rest or rest[0] not in subcommands:
        return None
    subcommand, risky_words = rest[0], subcommands[rest[0]]
    if risky_words is None:
        return f"`{program} {subcommand}` changes settings that can run other commands"
    for argument in rest[1:]:
        for option in risky_words:
            if argument == option or (option.startswith("-") and _is_option(argument, option)):
                return f"`{program} {subcommand} {option}` runs other commands"
    return None


def _is_option(argument: str, option: str) -> bool:
    if argument == option or argument.startswith(option + "="):
        return True
    # Short options take their value attached too (``-calias.x=…``, ``-C/tmp``).
    return len(option) == 2 and option[0] == "-" and option[1] != "-" and argument.startswith(option)


def _walk(node: Any) -> list[Any]:
    found = [node]
    for part in getattr(node, "parts", None) or []:
        found += _walk(part)
    inner = getattr(node, "command", None)
    if inner is not None:
        found += _walk(inner)
    return found


def _shlex_operator(command: str) -> str | None:
    """The independent lexical reading: an unquoted operator or line break anywhere asks again."""
    lexer = shlex.shlex(command.strip(), posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return "the command could not be read as one simple command (an unclosed quote)"
    for token in tokens:
        stripped = token.strip("\n")
        if "\n" in token and not stripped:
            return "the command has a second line (each line runs as its own command)"
        if stripped and set(stripped) <= set(";&|()"):
            return "the command " + _OPERATOR_WORDS.get(stripped, f"uses the shell operator `{stripped}`")
    return None
