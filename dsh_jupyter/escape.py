"""Make untrusted text safe to show: terminal controls become ``\\xNN``, HTML gets entity-escaped.

Labels, session ids, cwds and message text come from other sessions' logs and from models, so any
of them may hold ANSI escapes, bells, NULs or markup. The reference harness leaves escaping to its
hosts; the rule its terminal host applies (and that we follow in every notebook surface) is:

- each C0 control except line feed (U+0000–U+0009, U+000B–U+001F), DEL (U+007F) and each C1 control
  (U+0080–U+009F) is replaced by the literal text ``\\xNN`` with two lowercase hex digits;
- in one-line fields (label, session id, cwd) line feed becomes ``\\x0a`` as well.

:func:`escape_text` is the variant for multi-line bodies shown to a reader (transcripts): it also
keeps tabs, since a tab cannot move the cursor backwards or restyle the output.

Hidden characters are made visible by the same functions. A bidi control can make ``echo hi \u202e; rm -rf ~
#\u202c`` read as a harmless comment while bash runs the ``rm``, and a zero-width character can make
``g\u200bit`` look like ``git``; so every character of :data:`HIDDEN_RANGES` becomes a visible mark
``⟨U+202E⟩`` wherever a person reads or decides (questions, proposal cards, tool lines, titles, the CLI):

- the bidi controls: U+061C, U+200E/F, U+202A–202E, U+2066–2069;
- zero-width and invisible characters: U+00AD, U+034F, U+115F/1160, U+17B4/17B5, U+180B–180F,
  U+200B–200D, U+2060–2065, U+206A–206F, U+3164, U+FEFF, U+FFA0, U+FFF9–FFFB, U+1BCA0–1BCA3,
  U+1D173–1D17A, the tag characters U+E0000–E007F and the rest of U+E0000–E0FFF (variation selectors
  17–256 included: they are the usual way to smuggle text in invisibly);
- not marked: the variation selectors U+FE00–FE0F (emoji presentation, in nearly every emoji), and a
  joiner (U+200C/U+200D) between two non-ASCII letters or symbols (Persian, the Indic scripts and emoji
  sequences need them there; between ASCII characters, spaces or at an end they are marked).

:func:`hidden_characters` lists what a text holds (for the "this command contains 2 hidden characters"
warning, :func:`hidden_warning`). The JupyterLab extension has the one twin of this rule
(``labextension/src/escape.ts``); ``tests/test_notebook_invisibles.py`` feeds every code point through both.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

_CONTROLS_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROLS_MULTI_LINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_CONTROLS_BODY = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


#: Characters shown as a visible mark, as ``(first, last, name)`` code point ranges (see the module).
HIDDEN_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x00AD, 0x00AD, "soft hyphen"),
    (0x034F, 0x034F, "combining grapheme joiner"),
    (0x061C, 0x061C, "arabic letter mark"),
    (0x115F, 0x1160, "hangul filler"),
    (0x17B4, 0x17B5, "khmer inherent vowel"),
    (0x180B, 0x180D, "mongolian variation selector"),
    (0x180E, 0x180E, "mongolian vowel separator"),
    (0x180F, 0x180F, "mongolian variation selector"),
    (0x200B, 0x200B, "zero width space"),
    (0x200C, 0x200C, "zero width non-joiner"),
    (0x200D, 0x200D, "zero width joiner"),
    (0x200E, 0x200E, "left-to-right mark"),
    (0x200F, 0x200F, "right-to-left mark"),
    (0x202A, 0x202A, "left-to-right embedding"),
    (0x202B, 0x202B, "right-to-left embedding"),
    (0x202C, 0x202C, "pop directional formatting"),
    (0x202D, 0x202D, "left-to-right override"),
    (0x202E, 0x202E, "right-to-left override"),
    (0x2060, 0x2060, "word joiner"),
    (0x2061, 0x2061, "function application"),
    (0x2062, 0x2062, "invisible times"),
    (0x2063, 0x2063, "invisible separator"),
    (0x2064, 0x2064, "invisible plus"),
    (0x2065, 0x2065, "invisible reserved character"),
    (0x2066, 0x2066, "left-to-right isolate"),
    (0x2067, 0x2067, "right-to-left isolate"),
    (0x2068, 0x2068, "first strong isolate"),
    (0x2069, 0x2069, "pop directional isolate"),
    (0x206A, 0x206F, "deprecated format character"),
    (0x3164, 0x3164, "hangul filler"),
    (0xFEFF, 0xFEFF, "zero width no-break space"),
    (0xFFA0, 0xFFA0, "halfwidth hangul filler"),
    (0xFFF9, 0xFFFB, "interlinear annotation character"),
    (0x1BCA0, 0x1BCA3, "shorthand format control"),
    (0x1D173, 0x1D17A, "musical format control"),
    (0xE0000, 0xE007F, "tag character"),
    (0xE0080, 0xE00FF, "invisible reserved character"),
    (0xE0100, 0xE01EF, "variation selector"),
    (0xE01F0, 0xE0FFF, "invisible reserved character"),
)
_JOINERS = "\u200c\u200d"
#: Characters that are not "letters" for the joiner rule: ASCII, C1 controls and Unicode spaces.
_NOT_LETTER = "\x00-\x9f\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def _class(ranges: tuple[tuple[int, int, str], ...]) -> str:
    """A regex class body for ``ranges``, adjacent ranges merged (fewer ranges: a faster scan)."""
    merged: list[list[int]] = []
    for first, last, _ in ranges:
        if merged and first == merged[-1][1] + 1:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in merged)


#: Every marked hidden character in one scan: a hidden character, unless it is a joiner with a letter on each side (a
#: letter: a character outside :data:`_NOT_LETTER` and the hidden ranges; the start and the end of the text are no
#: letters). The lookaround after the class judges a joiner's neighbours inside the scan, so text that joins its
#: letters (Persian, Indic scripts, emoji sequences) costs no Python step per joiner; the pattern begins with the
#: class, so text without hidden characters is scanned as fast as by the class alone.
_NOT_LETTERS_CLASS = f"{_NOT_LETTER}{_class(HIDDEN_RANGES)}"
_MARKED = re.compile(f"[{_class(HIDDEN_RANGES)}](?!(?<=[^{_NOT_LETTERS_CLASS}][{_JOINERS}])[^{_NOT_LETTERS_CLASS}])")


def _hidden(text: str) -> list[tuple[int, str]]:
    """Each marked hidden character of ``text`` as ``(index, character)``, in order: every one, except a joiner
    between two letters."""
    if text.isascii():
        return []
    return [(match.start(), match.group()) for match in _MARKED.finditer(text)]


HiddenNoun = Literal["command", "code", "edit", "text"]


@dataclass(frozen=True)
class HiddenChar:
    """One hidden character found in a text: its code (``U+202E``), name and visible mark."""

    code: str
    name: str

    @property
    def mark(self) -> str:
        return f"⟨{self.code}⟩"


def _code(char: str) -> str:
    return f"U+{ord(char):04X}"


def _name(char: str) -> str:
    point = ord(char)
    for first, last, name in HIDDEN_RANGES:
        if first <= point <= last:
            return name
    return "invisible character"


def _mark(char: str) -> str:
    return f"⟨{_code(char)}⟩"


def hidden_characters(text: str) -> list[HiddenChar]:
    """Every hidden character of ``text`` that the escaping functions mark, in order."""
    return [HiddenChar(_code(char), _name(char)) for _, char in _hidden(text)]


def hidden_warning(text: str, what: HiddenNoun = "command") -> str | None:
    """A sentence for a question whose ``text`` holds hidden characters (``None`` when it holds none).

    E.g. "This command contains 2 hidden characters (right-to-left override U+202E, pop directional
    formatting U+202C), shown as ⟨U+…⟩ marks: what runs is not what it looks like."
    """
    found = hidden_characters(text)
    if not found:
        return None
    distinct = list(dict.fromkeys(found))
    listed = ", ".join(f"{char.name} {char.code}" for char in distinct[:4]) + (", …" if len(distinct) > 4 else "")
    noun = "hidden character" if len(found) == 1 else "hidden characters"
    consequence = {"command": "what runs is not what it looks like", "code": "what runs is not what it looks like",
                   "edit": "the cell would not be what it looks like", "text": "it is not what it looks like"}[what]
    return f"This {what} contains {len(found)} {noun} ({listed}), shown as ⟨U+…⟩ marks: {consequence}."


def reveal_hidden(text: str) -> str:
    """``text`` with each hidden character replaced by its mark (controls untouched)."""
    found = _hidden(text)
    if not found:
        return text
    pieces: list[str] = []
    last = 0
    for at, char in found:
        pieces += [text[last:at], _mark(char)]
        last = at + 1
    pieces.append(text[last:])
    return "".join(pieces)


def display_parts(text: str) -> list[tuple[Literal["text", "mark"], str]]:
    """A multi-line body in pieces for a styled view: ``("text", escaped)`` and ``("mark", "⟨U+202E⟩")``.

    The text pieces follow :func:`escape_text` (line feeds and tabs kept); joined, the pieces equal it.
    """
    parts: list[tuple[Literal["text", "mark"], str]] = []
    text = text.replace("\r\n", "\n")
    last = 0
    for at, char in _hidden(text):
        if at > last:
            parts.append(("text", _CONTROLS_BODY.sub(_hex, text[last:at])))
        parts.append(("mark", _mark(char)))
        last = at + 1
    if last < len(text):
        parts.append(("text", _CONTROLS_BODY.sub(_hex, text[last:])))
    return parts


def _hex(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group(0)):02x}"


def escape_controls(text: str, one_line: bool = True) -> str:
    """Replace terminal control characters with literal ``\\xNN`` and hidden ones with marks (see the module).

    With ``one_line=True`` (labels, ids, cwds) line feed is replaced too; with ``False`` it is kept.
    """
    if not isinstance(text, str):
        raise TypeError(f"escape_controls needs a str, got {type(text).__name__}; convert the value with str() first")
    pattern = _CONTROLS_ONE_LINE if one_line else _CONTROLS_MULTI_LINE
    return pattern.sub(_hex, reveal_hidden(text))


def escape_text(text: str) -> str:
    """Escape a multi-line body for display: ``\\r\\n`` becomes ``\\n``; line feed and tab are kept."""
    if not isinstance(text, str):
        raise TypeError(f"escape_text needs a str, got {type(text).__name__}; convert the value with str() first")
    return _CONTROLS_BODY.sub(_hex, reveal_hidden(text.replace("\r\n", "\n")))


def escape_html(text: str) -> str:
    """HTML-escape ``&``, ``<``, ``>``, ``"`` and ``'`` (safe in element text and quoted attributes)."""
    return html.escape(text, quote=True)


def html_field(text: str, one_line: bool = True) -> str:
    """A value for ``text/html``: terminal controls to ``\\xNN`` first, then HTML escaping."""
    return escape_html(escape_controls(text, one_line=one_line))


def host_mention(candidate: Mapping[str, Any]) -> str:
    """The mention a notebook inserts for a candidate: escaped label, original id.

    Like the reference terminal host, the label shown *and* written into ``@[label](uri)`` has its
    controls escaped (one-line rule), while the canonical URI keeps the real session id, so the
    reference still resolves. The label falls back to the session id when absent.
    """
    session_id = candidate.get("sessionId") if isinstance(candidate, Mapping) else None
    if not isinstance(session_id, str):
        raise ValueError(f"a session candidate needs a string 'sessionId', got {candidate!r:.200}")
    label = candidate.get("label")
    if not isinstance(label, str):
        label = session_id
    # Imported here: the references package is not needed until someone completes or picks.
    from dsh_jupyter.references.mentions import format_session_reference_mention

    return format_session_reference_mention(session_id, escape_controls(label))
