"""Make model-written Markdown safe to render as a trusted notebook output.

Outputs produced in a running session are trusted by JupyterLab, so raw HTML inside ``text/markdown``
renders for real: a model that echoes ``<img src=x onerror=...>`` from a referenced session's title (or
from a web page, a file, a tool result) would run script. We keep Markdown formatting but never raw
HTML: outside code, every ``<`` becomes ``&lt;`` (so no tag can open) and link targets with script-
capable schemes are neutralised. Code spans and fenced code blocks are left as written, since Markdown
already shows them literally. Terminal controls become ``\\xNN`` everywhere, as in every other surface.
"""

from __future__ import annotations

import re

from .escape import escape_text

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
_UNSAFE_LINK = re.compile(r"(?i)(\]\(\s*<?|^\s{0,3}\[[^\]]*\]:\s*<?)\s*(javascript|vbscript|data|file):")


def _prose(text: str) -> str:
    text = _UNSAFE_LINK.sub(lambda m: m.group(1) + "#blocked-" + m.group(2).lower() + ":", text)
    return text.replace("<", "&lt;")


def _inline(text: str) -> str:
    """Escape a run of non-fenced text, leaving inline code spans untouched."""
    out: list[str] = []
    position = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_prose(text[position : match.start()]))
        out.append(match.group(0))
        position = match.end()
    out.append(_prose(text[position:]))
    return "".join(out)


def safe_markdown(text: str) -> str:
    """``text`` with Markdown formatting kept and raw HTML disarmed (see the module docstring)."""
    blocks: list[tuple[bool, list[str]]] = []  # (is_code, lines)
    fence: str | None = None
    for line in escape_text(text).split("\n"):
        if fence is None:
            match = _FENCE.match(line)
            if match is not None:
                fence = match.group(2)
                blocks.append((True, [line]))
                continue
            if not blocks or blocks[-1][0]:
                blocks.append((False, []))
            blocks[-1][1].append(line)
        else:
            blocks[-1][1].append(line)
            stripped = line.strip()
            if len(stripped) >= len(fence) and set(stripped) == {fence[0]}:
                fence = None
    return "\n".join("\n".join(lines) if code else _inline("\n".join(lines)) for code, lines in blocks)
