"""Make untrusted text safe to show: terminal controls become ``\\xNN``, HTML gets entity-escaped.

Labels, session ids, cwds and message text come from other sessions' logs and from models, so any
of them may hold ANSI escapes, bells, NULs or markup. The reference harness leaves escaping to its
hosts; the rule its terminal host applies (and that we follow in every notebook surface) is:

- each C0 control except line feed (U+0000–U+0009, U+000B–U+001F), DEL (U+007F) and each C1 control
  (U+0080–U+009F) is replaced by the literal text ``\\xNN`` with two lowercase hex digits;
- in one-line fields (label, session id, cwd) line feed becomes ``\\x0a`` as well.

:func:`escape_text` is the variant for multi-line bodies shown to a reader (transcripts): it also
keeps tabs, since a tab cannot move the cursor backwards or restyle the output.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

_CONTROLS_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROLS_MULTI_LINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_CONTROLS_BODY = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _hex(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group(0)):02x}"


def escape_controls(text: str, one_line: bool = True) -> str:
    """Replace terminal control characters with literal ``\\xNN`` (see the module docstring).

    With ``one_line=True`` (labels, ids, cwds) line feed is replaced too; with ``False`` it is kept.
    """
    if not isinstance(text, str):
        raise TypeError(f"escape_controls needs a str, got {type(text).__name__}; convert the value with str() first")
    pattern = _CONTROLS_ONE_LINE if one_line else _CONTROLS_MULTI_LINE
    return pattern.sub(_hex, text)


def escape_text(text: str) -> str:
    """Escape a multi-line body for display: ``\\r\\n`` becomes ``\\n``; line feed and tab are kept."""
    if not isinstance(text, str):
        raise TypeError(f"escape_text needs a str, got {type(text).__name__}; convert the value with str() first")
    return _CONTROLS_BODY.sub(_hex, text.replace("\r\n", "\n"))


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
