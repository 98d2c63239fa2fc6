"""The offline model's completions: deterministic, no network, so tests, demos and classrooms can show them.

Code: the rest of a name the user is typing (their variables first, then names the cells above and this cell
define, nearest first), a call's argument (``print(`` → ``radius)``), a loop header over a variable, or,
on an empty line, a look at the newest variable. Prose (a ``%%dsh`` cell): a sentence about the user's data,
never code. Anything else: no completion (an empty string), as a real model would stay quiet.
"""

from __future__ import annotations

import re

from .context import CompletionContext

_NAME_AT_END = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_DEFINED = re.compile(
    r"^[ \t]*(?:def|class)[ \t]+([A-Za-z_]\w*)"
    r"|^[ \t]*([A-Za-z_]\w*)(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*[ \t]*=(?!=)"
    r"|^[ \t]*(?:import|from)[ \t].*?\bas[ \t]+([A-Za-z_]\w*)"
    r"|^[ \t]*for[ \t]+([A-Za-z_]\w*)[ \t]+in\b",
    re.MULTILINE,
)
_FRAME_TYPES = ("DataFrame", "Series")


def known_names(context: CompletionContext) -> list[str]:
    """Names worth completing, best first: the variables, then what the code shown defines (nearest first)."""
    names: list[str] = [v.name for v in context.variables if v.name.isidentifier()]
    code = context.above + "\n" + context.prefix
    defined = [next(g for g in match.groups() if g) for match in _DEFINED.finditer(code)]
    for name in reversed(defined):
        if name not in names:
            names.append(name)
    return names


def _newest_variable(context: CompletionContext) -> tuple[str, str] | None:
    for variable in context.variables:
        if variable.name.isidentifier():
            return variable.name, variable.type
    names = known_names(context)
    return (names[0], "") if names else None


def complete_code(context: CompletionContext) -> str:
    """The offline completion of code at the cursor (``""``: none)."""
    line = context.prefix.rsplit("\n", 1)[-1]
    rest_of_line = context.suffix.split("\n", 1)[0]
    typed = _NAME_AT_END.search(line)
    if typed and not line[:typed.start()].endswith("."):
        word = typed.group(0)
        for name in known_names(context):
            if name.startswith(word) and name != word:
                return name[len(word):]
        return ""
    if rest_of_line.strip():
        return ""  # mid-line, nothing being named: leave the line alone
    newest = _newest_variable(context)
    if line.rstrip().endswith("print("):
        return f"{newest[0]})" if newest else ")"
    if re.fullmatch(r"[ \t]*for[ \t]+", line) and newest:
        return f"item in {newest[0]}:"
    if not line.strip() and newest and not context.prefix.rstrip().endswith(":"):
        name, type_ = newest
        return f"{name}.head()" if type_.split(" ")[0] in _FRAME_TYPES else f"print({name})"
    return ""


def complete_prose(context: CompletionContext) -> str:
    """The offline completion of a ``%%dsh`` prompt: plain words about the user's data, never code."""
    text = context.prefix.split("\n", 1)[1] if context.prefix.lstrip().startswith("%%") else context.prefix
    newest = _newest_variable(context)
    subject = f"`{newest[0]}`" if newest else "the results above"
    if not text.strip() or text.endswith("\n"):
        return f"Explain what {subject} shows and what stands out."
    if text.rstrip()[-1:] in ".!?":
        return " Then suggest one next step."
    space = "" if text.endswith(" ") else " "
    return f"{space}what stands out in {subject}, in plain words."
