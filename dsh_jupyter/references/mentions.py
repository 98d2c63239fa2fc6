"""Inline mentions: ``@[label](dsh-session:…)`` and bare ``dsh-session:…`` URIs inside prompt text.

The grammar is the reference harness's, character for character, so every host parses a prompt the
same way. At each position a Markdown mention is tried first, then a bare URI:

- Markdown: ``@[`` label ``](`` URI ``)``. The label is any run of "backslash + one character that is
  not a line terminator" or "any character except ``\\`` and ``]``" (so raw newlines are allowed).
  The URI is ``dsh-session:`` followed by any run of characters other than JavaScript whitespace and
  ``)``; it must then decode canonically or the whole parse fails.
- A Markdown mention may also carry ``dsh-variable:name`` (a notebook variable, see :mod:`.variables`) or
  ``dsh-cell:id`` (a notebook cell, see :mod:`.cells`); neither has a bare form.
- Bare: ``dsh-session:`` followed by one or more base64url characters (greedy, no word boundary).
  ``dsh-session:`` followed by anything else is ordinary text.

Whitespace is JavaScript's ``\\s`` set (it has U+FEFF, Python's has U+0085 instead), written out below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .cells import CELL_REFERENCE_SCHEME, CellReferenceInput, decode_cell_uri, encode_cell_uri
from .errors import SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError
from .inputs import SessionReferenceInput, checked_fields
from .uri import decode_session_reference_uri, encode_session_reference_uri
from .variables import VARIABLE_REFERENCE_SCHEME, VariableReferenceInput, decode_variable_uri, encode_variable_uri

#: JavaScript's ``\s``: ECMAScript WhiteSpace plus LineTerminator.
JS_WHITESPACE = "\t\n\u000b\u000c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
#: JavaScript's line terminators (what ``.`` does not match).
JS_LINE_TERMINATORS = "\n\r\u2028\u2029"

_MENTION = re.compile(
    "@\\[((?:\\\\[^" + JS_LINE_TERMINATORS + "]|[^\\\\\\]])*)\\]"  # @[label]
    "\\(((?:dsh-session|dsh-variable|dsh-cell):[^" + JS_WHITESPACE + ")]*)\\)"  # (uri)
    "|(dsh-session:[A-Za-z0-9_-]+)"  # or a bare URI
)
_LABEL_SPECIAL = re.compile(r"[\\\]]")
_LABEL_ESCAPE = re.compile("\\\\([^" + JS_LINE_TERMINATORS + "])")


@dataclass(frozen=True)
class ParsedReferenceText:
    """Readable text (each mention replaced by ``@label``) and the references in order, duplicates kept:
    sessions in ``references``, notebook variables (``dsh-variable:`` mentions) in ``variables``, notebook cells
    (``dsh-cell:`` mentions) in ``cells``."""

    text: str
    references: list[SessionReferenceInput] = field(default_factory=list)
    variables: list[VariableReferenceInput] = field(default_factory=list)
    cells: list[CellReferenceInput] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"text": self.text, "references": [r.to_json() for r in self.references]}
        if self.variables:
            record["variables"] = [v.to_json() for v in self.variables]
        if self.cells:
            record["cells"] = [c.to_json() for c in self.cells]
        return record


def escape_mention_label(label: str) -> str:
    """Backslash-escape ``\\`` and ``]`` (nothing else) so the label survives inside ``@[…]``."""
    return _LABEL_SPECIAL.sub(lambda m: "\\" + m.group(0), label)


def format_variable_mention(name: str, label: str | None = None) -> str:
    """``@[label](dsh-variable:name)`` (the label defaults to the name)."""
    return f"@[{escape_mention_label(name if label is None else label)}]({encode_variable_uri(name)})"


def format_cell_mention(cell_id: str, label: str | None = None) -> str:
    """``@[label](dsh-cell:id)`` (the label defaults to ``cell:id``)."""
    return f"@[{escape_mention_label(f'cell:{cell_id}' if label is None else label)}]({encode_cell_uri(cell_id)})"


def format_session_reference_mention(
    reference: SessionReferenceInput | Mapping[str, Any] | str, label: str | None = None
) -> str:
    """``@[label](uri)`` for a reference (or a session id plus optional label); the label defaults to the id."""
    session_id: object
    if isinstance(reference, SessionReferenceInput):
        session_id, label = reference.session_id, reference.label if label is None else label
    elif isinstance(reference, Mapping):
        session_id, label = reference.get("sessionId"), reference.get("label") if label is None else label
    else:
        session_id = reference
    session_id, label = checked_fields(session_id, label, "a mention")
    shown = session_id if label is None else label
    return f"@[{escape_mention_label(shown)}]({encode_session_reference_uri(session_id)})"


def parse_session_reference_text(text: str) -> ParsedReferenceText:
    """Replace every mention in ``text`` by ``@label`` and collect the references in order.

    A malformed or non-canonical URI in a mention (or a base64url-shaped bare URI that is not
    canonical) raises ``SESSION_REFERENCE_INVALID_REFERENCE`` and nothing is returned.
    """
    if not isinstance(text, str):
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"mention text must be a string, got {type(text).__name__}",
        )
    references: list[SessionReferenceInput] = []
    variables: list[VariableReferenceInput] = []
    cells: list[CellReferenceInput] = []

    def replace(match: re.Match[str]) -> str:
        raw_label, markdown_uri, bare_uri = match.groups()
        if markdown_uri is not None and markdown_uri.startswith(VARIABLE_REFERENCE_SCHEME):
            label = _LABEL_ESCAPE.sub(lambda m: m.group(1), raw_label)
            variables.append(VariableReferenceInput(decode_variable_uri(markdown_uri), label))
            return "@" + label
        if markdown_uri is not None and markdown_uri.startswith(CELL_REFERENCE_SCHEME):
            label = _LABEL_ESCAPE.sub(lambda m: m.group(1), raw_label)
            cells.append(CellReferenceInput(decode_cell_uri(markdown_uri), label))
            return "@" + label
        session_id = decode_session_reference_uri(markdown_uri if markdown_uri is not None else bare_uri)
        label = session_id if markdown_uri is None else _LABEL_ESCAPE.sub(lambda m: m.group(1), raw_label)
        references.append(SessionReferenceInput(session_id, label))
        return "@" + label

    text = _MENTION.sub(replace, text)
    return ParsedReferenceText(text, references, variables, cells)
