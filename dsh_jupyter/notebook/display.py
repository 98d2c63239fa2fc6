"""Display objects for notebook outputs that must survive reload, nbconvert and GitHub rendering.

Each object returns a MIME bundle from ``_repr_mimebundle_``:

- :class:`ReferenceContextDisplay`: the collapsible source metadata of one prepared reference
  context: our own ``application/vnd.dsh.reference-context+json`` (raw values; the renderer
  escapes), a ``text/html`` ``<details>`` element and a ``text/plain`` list;
- :class:`SessionTable`: the table of ``%dsh sessions``;
- :class:`LocationDisplay`: where a session's log lives (usable as a path).

The HTML is static: no scripts, no external CSS, a few inline styles. Every label, id, cwd and path
is escaped: terminal controls become ``\\xNN`` in every text form, and HTML is entity-escaped.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .escape import escape_controls, html_field

#: MIME type of the reference-context bundle (rendered by our JupyterLab mime extension).
REFERENCE_CONTEXT_MIME = "application/vnd.dsh.reference-context+json"
#: MIME type of the session table's JSON form.
SESSIONS_MIME = "application/vnd.dsh.sessions+json"

_TH = 'style="text-align:left;padding:0.1em 1em 0.1em 0;font-weight:600;vertical-align:top"'
_TD = 'style="text-align:left;padding:0.1em 1em 0.1em 0;vertical-align:top"'
_MISSING = "—"


def _filter(bundle: dict[str, Any], include: Any, exclude: Any) -> dict[str, Any]:
    if include:
        bundle = {k: v for k, v in bundle.items() if k in include}
    if exclude:
        bundle = {k: v for k, v in bundle.items() if k not in exclude}
    return bundle


def _text(value: Any) -> str:
    """A one-line, control-escaped text form of a metadata value (``—`` when absent)."""
    if value is None:
        return _MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return escape_controls(value if isinstance(value, str) else str(value))


def _html(value: Any) -> str:
    if value is None:
        return _MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return html_field(value if isinstance(value, str) else str(value))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: wide East Asian characters count 2, combining marks 0."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def format_created(created_at: Any) -> str:
    """Epoch milliseconds as an ISO 8601 local time to the second; empty for a missing or bad value."""
    if isinstance(created_at, bool) or not isinstance(created_at, (int, float)):
        return ""
    try:
        return datetime.fromtimestamp(created_at / 1000).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return ""


# --------------------------------------------------------------------------- reference context


def _references(source_metadata: Any) -> list[Mapping[str, Any]]:
    if not isinstance(source_metadata, Mapping):
        raise ValueError(
            "reference context metadata must be a dict (the 'source' of a session-reference context "
            f"message), got {type(source_metadata).__name__}"
        )
    references = source_metadata.get("references")
    if not isinstance(references, Sequence) or isinstance(references, (str, bytes)):
        raise ValueError(
            "reference context metadata must have a 'references' list; got "
            f"{type(references).__name__} (pass the 'source' of a session-reference context message)"
        )
    for position, reference in enumerate(references):
        if not isinstance(reference, Mapping):
            raise ValueError(
                f"reference {position} of the context metadata must be a dict, got {type(reference).__name__}"
            )
    return list(references)


def reference_summary(source_metadata: Mapping[str, Any]) -> str:
    """``Referenced 2 sessions (1 compacted, 1 truncated)``: the one-line summary of a context."""
    references = _references(source_metadata)
    notes = []
    compacted = sum(1 for r in references if r.get("compacted") is True)
    truncated = sum(1 for r in references if r.get("truncated") is True)
    if compacted:
        notes.append(f"{compacted} compacted")
    if truncated:
        notes.append(f"{truncated} truncated")
    summary = f"Referenced {_plural(len(references), 'session')}"
    return f"{summary} ({', '.join(notes)})" if notes else summary


class ReferenceContextDisplay:
    """The source metadata of one prepared reference context, as a collapsible display.

    ``source_metadata`` is the context message's ``source`` (``kind``, ``form``, ``version``,
    ``references``); ``spills`` maps a reference's ``inputIndex`` to the path of its full-snapshot
    spill file (or ``None`` when it was truncated but could not be saved).
    """

    def __init__(
        self,
        source_metadata: Mapping[str, Any],
        *,
        target_session_id: str,
        spills: Mapping[int, str | None] | None = None,
    ) -> None:
        self._references = _references(source_metadata)
        if not isinstance(target_session_id, str):
            raise ValueError(f"target_session_id must be a str, got {type(target_session_id).__name__}")
        spills = dict(spills or {})
        for key, value in spills.items():
            if isinstance(key, bool) or not isinstance(key, int):
                raise ValueError(f"spills must be keyed by the reference's inputIndex (an int), got key {key!r}")
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise ValueError(f"spill path for reference {key} must be a str or None, got {type(value).__name__}")
        self.source_metadata = source_metadata
        self.target_session_id = target_session_id
        self.spills: dict[int, str | None] = {k: (None if v is None else os.fspath(v)) for k, v in spills.items()}

    def _index(self, position: int, reference: Mapping[str, Any]) -> int:
        index = reference.get("inputIndex")
        return index if isinstance(index, int) and not isinstance(index, bool) else position

    def _spill(self, position: int, reference: Mapping[str, Any]) -> str | None:
        return self.spills.get(self._index(position, reference))

    def to_json(self) -> dict[str, Any]:
        """The JSON bundle: raw values, as in the log, plus each source's ``spillPath``."""
        meta = self.source_metadata
        return {
            "kind": meta.get("kind"),
            "form": meta.get("form"),
            "version": meta.get("version"),
            "references": [
                {**dict(reference), "spillPath": self._spill(position, reference)}
                for position, reference in enumerate(self._references)
            ],
            "targetSessionId": self.target_session_id,
        }

    @property
    def summary(self) -> str:
        return reference_summary(self.source_metadata)

    def _rows(self, position: int, reference: Mapping[str, Any]) -> list[tuple[str, Any]]:
        retained, original = reference.get("retainedMessages"), reference.get("originalMessages")
        kept = None if retained is None else (f"{retained} of {original}" if original is not None else str(retained))
        return [
            ("session id", reference.get("sessionId")),
            ("captured through seq", reference.get("capturedThroughSeq")),
            ("compacted", reference.get("compacted")),
            ("messages kept", kept),
            ("messages omitted", reference.get("omittedMessages")),
            ("bytes omitted", reference.get("omittedBytes")),
            ("truncated", reference.get("truncated")),
            ("spill path", self._spill(position, reference)),
        ]

    def _label(self, reference: Mapping[str, Any]) -> Any:
        label = reference.get("label")
        return label if label is not None else reference.get("sessionId")

    def _html(self) -> str:
        parts = [
            '<details class="dsh-reference-context" style="margin:0.25em 0">',
            f'<summary style="cursor:pointer">{html_field(self.summary)}</summary>',
        ]
        for position, reference in enumerate(self._references):
            parts.append('<table class="dsh-reference-source" style="border-collapse:collapse;margin:0.4em 0 0.4em 1em">')
            parts.append(
                '<caption style="text-align:left;font-weight:600;padding-bottom:0.2em">'
                f"{position + 1}. {_html(self._label(reference))}</caption>"
            )
            for name, value in self._rows(position, reference):
                cell = _html(value)
                if name in ("session id", "spill path") and value is not None:
                    cell = f"<code>{cell}</code>"
                parts.append(f"<tr><th {_TH}>{name}</th><td {_TD}>{cell}</td></tr>")
            parts.append("</table>")
        parts.append(f'<div style="font-size:0.85em;opacity:0.7">target session <code>{html_field(self.target_session_id)}</code></div>')
        parts.append("</details>")
        return "\n".join(parts)

    def _facts(self, position: int, reference: Mapping[str, Any]) -> list[str]:
        """The plain-text facts of one source, every field present, values escaped."""
        get = reference.get
        retained, original, omitted = get("retainedMessages"), get("originalMessages"), get("omittedMessages")
        kept = f"{_text(retained)} of {_text(original)} messages kept, {_text(omitted)} omitted"
        flag = {True: "", False: "not ", None: "? "}
        facts = [
            f"id {_text(get('sessionId'))}",
            f"seq {_text(get('capturedThroughSeq'))}",
            f"{flag.get(get('compacted'), '? ')}compacted",
            kept,
            f"{_text(get('omittedBytes'))} bytes omitted",
            f"{flag.get(get('truncated'), '? ')}truncated",
        ]
        index = self._index(position, reference)
        if index in self.spills:
            spill = self.spills[index]
            facts.append("spill not saved" if spill is None else f"spill {escape_controls(spill)}")
        return facts

    def _plain(self) -> str:
        lines = [escape_controls(self.summary)]
        for position, reference in enumerate(self._references):
            facts = " · ".join(self._facts(position, reference))
            lines.append(f"  {position + 1}. {_text(self._label(reference))} · {facts}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _filter(
            {REFERENCE_CONTEXT_MIME: self.to_json(), "text/html": self._html(), "text/plain": self._plain()},
            include,
            exclude,
        )

    def __repr__(self) -> str:
        return self._plain()


# --------------------------------------------------------------------------- session table

_COLUMNS = ("label", "id", "cwd", "created", "same workspace")


class SessionTable:
    """The sessions of ``%dsh sessions``: label, id, cwd, created (local ISO time), same workspace.

    ``rows`` are candidate-shaped dicts (``sessionId``, ``label``, ``cwd``?, ``createdAt`` epoch ms,
    ``sameWorkspace``, optionally ``current: True`` for the notebook's own session, marked
    "(current)"); they are shown in the order given. Sessions of other tools (Claude Code, Codex) are
    marked in a "tool" column, shown only when there is one among the rows.
    """

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
            raise ValueError(f"SessionTable needs a list of session dicts, got {type(rows).__name__}")
        for position, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise ValueError(f"session row {position} must be a dict, got {type(row).__name__}")
            if not isinstance(row.get("sessionId", row.get("id")), str):
                raise ValueError(f"session row {position} has no string 'sessionId'")
        self.rows = [dict(row) for row in rows]
        self.tools = [_tool(row) for row in self.rows]
        for row, tool in zip(self.rows, self.tools, strict=True):
            if tool:
                row["tool"] = tool  # the JSON bundle carries the mark too
        self.columns = (*_COLUMNS[:1], "tool", *_COLUMNS[1:]) if any(self.tools) else _COLUMNS

    def _with_tool(self, position: int, cells: list[str], render: Callable[[str], str] = escape_controls) -> list[str]:
        if len(self.columns) == len(_COLUMNS):
            return cells
        return [*cells[:1], render(self.tools[position]), *cells[1:]]

    @staticmethod
    def _cells(row: Mapping[str, Any]) -> tuple[str, str, str | None, str, bool]:
        session_id = row.get("sessionId", row.get("id"))
        label = row.get("label")
        label = label if isinstance(label, str) else session_id
        cwd = row.get("cwd")
        return (
            label,
            session_id,
            cwd if isinstance(cwd, str) else None,
            format_created(row.get("createdAt")),
            row.get("sameWorkspace") is True,
        )

    def _html(self) -> str:
        if not self.rows:
            return "<p>No sessions.</p>"
        head = "".join(f"<th {_TH}>{name}</th>" for name in self.columns)
        body = []
        for position, row in enumerate(self.rows):
            label, session_id, cwd, created, same = self._cells(row)
            cells = self._with_tool(position, [
                html_field(label) + (" <em>(current)</em>" if row.get("current") is True else ""),
                f"<code>{html_field(session_id)}</code>",
                _MISSING if cwd is None else html_field(cwd),
                html_field(created),
                "✓" if same else "",
            ], html_field)
            body.append("<tr>" + "".join(f"<td {_TD}>{cell}</td>" for cell in cells) + "</tr>")
        return (
            '<table class="dsh-sessions" style="border-collapse:collapse">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    def _plain(self) -> str:
        if not self.rows:
            return "No sessions."
        table = [list(self.columns)]
        for position, row in enumerate(self.rows):
            label, session_id, cwd, created, same = self._cells(row)
            table.append(self._with_tool(position, [
                escape_controls(label) + (" (current)" if row.get("current") is True else ""),
                escape_controls(session_id), _MISSING if cwd is None else escape_controls(cwd), created,
                "✓" if same else ""]))
        widths = [max(display_width(line[col]) for line in table) for col in range(len(self.columns))]
        return "\n".join(
            "  ".join(_pad(cell, widths[col]) for col, cell in enumerate(line)).rstrip() for line in table
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _filter(
            {SESSIONS_MIME: {"sessions": self.rows}, "text/html": self._html(), "text/plain": self._plain()},
            include,
            exclude,
        )

    def __repr__(self) -> str:
        return self._plain()


def _tool(row: Mapping[str, Any]) -> str:
    """The other tool a row's session belongs to ("Claude Code", "Codex"), or "" for ours."""
    from ..sources import tool_of

    tool = row.get("tool")
    if isinstance(tool, str):
        return tool
    session_id = row.get("sessionId", row.get("id"))
    return (tool_of(session_id) or "") if isinstance(session_id, str) else ""


# --------------------------------------------------------------------------- location


class LocationDisplay:
    """Where a session's log lives; usable wherever a path is (``os.fspath``, ``pandas.read_json``).

    ``kind`` names the representation (``jsonl`` for the JSONL store); ``path`` is absolute.
    """

    def __init__(self, kind: str, path: str | os.PathLike[str], session_id: str | None = None) -> None:
        if not isinstance(kind, str):
            raise ValueError(f"location kind must be a str, got {type(kind).__name__}")
        self.kind = kind
        self.path = os.fspath(path)
        self.session_id = session_id

    def __fspath__(self) -> str:
        return self.path

    def _plain(self) -> str:
        head = f"{escape_controls(self.kind)} log"
        if self.session_id is not None:
            head += f" of session {escape_controls(self.session_id)}"
        return f"{head}: {escape_controls(self.path)}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        head = f"{html_field(self.kind)} log"
        if self.session_id is not None:
            head += f" of session <code>{html_field(self.session_id)}</code>"
        bundle = {
            "text/html": f'<div class="dsh-location">{head}: <code>{html_field(self.path)}</code></div>',
            "text/plain": self._plain(),
        }
        return _filter(bundle, include, exclude)

    def __repr__(self) -> str:
        return self._plain()
