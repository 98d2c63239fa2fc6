"""Display objects for notebook outputs that must survive reload, nbconvert and GitHub rendering.

Each object returns a MIME bundle from ``_repr_mimebundle_``:

- :class:`ReferenceContextDisplay`: the collapsible source metadata of one prepared reference
  context: our own ``application/vnd.dsh.reference-context+json`` (raw values; the renderer
  escapes), a ``text/html`` ``<details>`` element and a ``text/plain`` list;
- :class:`SessionTable`: the table of ``%dsh sessions``;
- :class:`LocationDisplay`: where a session's log lives (usable as a path);
- :class:`NoticeDisplay` and :func:`show_notice`: a notice such as the first-use "offline model" hint,
  rendered from Markdown, shown once per kernel.

The HTML is static: no scripts, no external CSS, a few inline styles. Every label, id, cwd and path
is escaped: terminal controls become ``\\xNN`` in every text form, and HTML is entity-escaped; each
``text/html`` form then goes through the one sanitiser (:func:`~.markdown.safe_html`), which also
makes it one block that no Markdown renderer or MathJax re-reads.

Deferred imports: ``IPython.display`` and the foreign-session readers load when an output is shown, so
the exporter and the CLI use these objects without IPython.
"""

from __future__ import annotations

import json
import os
import time
import unicodedata
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..clip import one_line
from ..escape import escape_controls, escape_html, escape_text, html_field
from ..session.header import notebook_label
from .markdown import markdown_html, safe_html

#: MIME type of the reference-context bundle (rendered by our JupyterLab mime extension).
REFERENCE_CONTEXT_MIME = "application/vnd.dsh.reference-context+json"
#: MIME type of the session table's JSON form.
SESSIONS_MIME = "application/vnd.dsh.sessions+json"

_TH = 'style="text-align:left;padding:0.1em 1em 0.1em 0;font-weight:600;vertical-align:top"'
_TD = 'style="text-align:left;padding:0.1em 1em 0.1em 0;vertical-align:top"'
_TH_RIGHT = _TH.replace("text-align:left", "text-align:right")  # amounts: their digits line up
_TD_RIGHT = _TD.replace("text-align:left", "text-align:right")
_MISSING = "—"


def _filter(bundle: dict[str, Any], include: Any, exclude: Any) -> dict[str, Any]:
    if include:
        bundle = {k: v for k, v in bundle.items() if k in include}
    if exclude:
        bundle = {k: v for k, v in bundle.items() if k not in exclude}
    return bundle


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


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


def _pad_left(text: str, width: int) -> str:
    """``text`` right-aligned in ``width`` cells (amounts, so their digits line up)."""
    return " " * max(0, width - display_width(text)) + text


def format_created(created_at: Any) -> str:
    """Epoch milliseconds as an ISO 8601 local time to the second; empty for a missing or bad value."""
    if isinstance(created_at, bool) or not isinstance(created_at, (int, float)):
        return ""
    try:
        return datetime.fromtimestamp(created_at / 1000).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return ""


# --------------------------------------------------------------------------- reference context

#: How many characters of the text the agent received a reference view shows.
MAX_PREVIEW_CHARS = 2000
#: How many source titles the one-line summary names before "and N more".
MAX_LINE_TITLES = 3
#: How many characters of each title the one-line summary shows.
MAX_LINE_TITLE_CHARS = 48
#: The heading of the preview of what the agent received.
PREVIEW_HEADING = "What the agent received"


def _references(source_metadata: Any) -> list[Mapping[str, Any]]:
    if not isinstance(source_metadata, Mapping):
        raise ValueError(
            "reference context metadata must be a dict (the 'source' of a session-reference context "
            f"message), got {type(source_metadata).__name__}"
        )
    references = source_metadata.get("references")
    if not isinstance(references, (list, tuple)):
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


def _host_entries(source_metadata: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The host values frozen into the context under ``key``: ``variables`` (``@[df](dsh-variable:df)``
    mentions) or ``cells`` (``@cell``), if any."""
    entries = source_metadata.get(key)
    return [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, (list, tuple)) else []


def _host_line(entry: Mapping[str, Any], name_key: str) -> str:
    """``df · DataFrame 1,000×4``, ``cell · code cell [3] · 2 outputs``."""
    label, brief = entry.get("label") or entry.get(name_key), entry.get("brief") or entry.get("type")
    return escape_controls(" · ".join(str(part) for part in (label, brief) if part))


#: How each kind of host value reads in a reference view: metadata key, name key, the rows' terms, its state,
#: and what was sent (given the byte count).
_HOST_KINDS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("variables", "variable", "Variable", "Value", "variable", "a {size:,}-byte summary, frozen into the session log"),
    ("cells", "cell", "Cell", "Holds", "notebook cell",
     "its source and outputs ({size:,} bytes), frozen into the session log"),
)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _title(reference: Mapping[str, Any]) -> str:
    """A source's title for people: its label (else its id), controls escaped, on one line."""
    label = reference.get("label")
    if not isinstance(label, str) or not label.strip():
        label = reference.get("sessionId")
    return escape_controls(label) if isinstance(label, str) else "an unnamed session"


def _shortened(reference: Mapping[str, Any]) -> bool:
    """Whether anything of the source was left out of what the agent received."""
    return (reference.get("truncated") is True or (_int(reference.get("omittedMessages")) or 0) > 0
            or (_int(reference.get("omittedBytes")) or 0) > 0)


def _source_state(reference: Mapping[str, Any]) -> str:
    """``complete``, or ``shortened to fit``, with ``includes a summary`` for a compacted source."""
    state = "shortened to fit" if _shortened(reference) else "complete"
    return f"{state}, includes a summary" if reference.get("compacted") is True else state


def reference_summary(source_metadata: Mapping[str, Any]) -> str:
    """``Referenced: Regional sales Q3 · 2 messages · complete``: the one line of a reference context."""
    references = _references(source_metadata)
    variables = "; ".join(one_line(_host_line(entry, name_key), MAX_LINE_TITLE_CHARS)
                          for key, name_key, *_ in _HOST_KINDS for entry in _host_entries(source_metadata, key))
    if not references:
        return f"Referenced: {variables}" if variables else "Referenced: no sessions"
    titles = [one_line(_title(r), MAX_LINE_TITLE_CHARS) for r in references[:MAX_LINE_TITLES]]
    named = ", ".join(titles)
    if len(references) > MAX_LINE_TITLES:
        named += f" and {len(references) - MAX_LINE_TITLES} more"
    counts = [_int(r.get("retainedMessages")) for r in references]
    parts = [f"Referenced: {named}"]
    if all(count is not None for count in counts):
        parts.append(_plural(sum(count or 0 for count in counts), "message"))
    shortened = sum(1 for r in references if _shortened(r))
    if not shortened:
        parts.append("complete")
    elif len(references) == 1:
        parts.append("shortened to fit")
    else:
        parts.append(f"{shortened} of {len(references)} shortened to fit")
    if any(r.get("compacted") is True for r in references):
        parts.append("includes a summary")
    return " · ".join(parts) + (f"; {variables}" if variables else "")


def format_captured(epoch: float | None) -> str:
    """``1 Dec 2026, 08:41:02`` in the kernel's local time; empty for a missing or bad value."""
    if epoch is None:
        return ""
    try:
        moment = datetime.fromtimestamp(epoch).astimezone()
    except (OverflowError, OSError, ValueError):
        return ""
    return f"{moment.day} {moment:%b %Y, %H:%M:%S}"


def source_rows(reference: Mapping[str, Any], spill: str | None, *, spilled: bool,
                captured_at: float | None) -> list[tuple[str, str]]:
    """The ``(term, words)`` rows shown for one source, in plain words (controls escaped, not HTML).

    ``spilled`` says whether a full snapshot was attempted (``spill`` is its path, ``None`` when it
    could not be saved).
    """
    rows: list[tuple[str, str]] = []
    session_id = reference.get("sessionId")
    if isinstance(session_id, str):
        rows.append(("Session id", escape_controls(session_id)))
    captured = format_captured(captured_at)
    if _int(reference.get("capturedThroughSeq")) is None and "capturedThroughSeq" in reference:
        captured = f"{captured} (the session had no messages yet)".strip()
    if captured:
        rows.append(("Captured", captured))
    retained, original = _int(reference.get("retainedMessages")), _int(reference.get("originalMessages"))
    if retained is not None:
        sent = _plural(retained, "message")
        if original is not None and original != retained:
            sent = f"{retained:,} of {_plural(original, 'message')}"
        rows.append(("Messages", f"{sent} sent to the agent"))
    if reference.get("compacted") is True:
        rows.append(("Earlier conversation", "sent as the summary written when that session was compacted"))
    left_out = []
    messages, size = _int(reference.get("omittedMessages")) or 0, _int(reference.get("omittedBytes")) or 0
    if messages:
        left_out.append(_plural(messages, "older message"))
    if size:
        left_out.append(f"{size:,} bytes of long messages")
    rows.append(("Left out", " and ".join(left_out) + " (to fit the budget)" if left_out else "nothing"))
    if spill is not None:
        rows.append(("Full snapshot", f"saved at {escape_controls(spill)}"))
    elif spilled or reference.get("truncated") is True:
        rows.append(("Full snapshot", "not saved (the notebook's session folder could not be written)"))
    return rows


def context_text(context: Mapping[str, Any]) -> str:
    """The text of a prepared context message (what the agent receives), its text blocks joined."""
    blocks = context.get("content")
    if not isinstance(blocks, (list, tuple)):
        return ""
    return "\n".join(b["text"] for b in blocks
                     if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str))


def _readable(value: Any, indent: str = "") -> list[str]:
    """A JSON value as indented ``key: value`` lines, strings as written (their line breaks as lines)."""
    if isinstance(value, Mapping):
        lines: list[str] = []
        for key, item in value.items():
            if isinstance(item, (Mapping, list)) and item:
                lines += [f"{indent}{key}:", *_readable(item, indent + "  ")]
            elif isinstance(item, str) and "\n" in item:
                lines += [f"{indent}{key}:", *(f"{indent}  {line}" for line in item.split("\n"))]
            else:
                lines.append(f"{indent}{key}: {_scalar(item)}")
        return lines
    if isinstance(value, list):
        lines = []
        for item in value:
            inner = _readable(item, indent + "  ")
            lines += [f"{indent}- {inner[0].lstrip()}", *inner[1:]] if inner else [f"{indent}-"]
        return lines
    return [f"{indent}{_scalar(value)}"]


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def readable_context(received: str) -> str:
    """What the agent received, for people: each framed JSON block (``<referenced-sessions>[…]</…>``) as indented
    lines with its strings as written (no ``\\u003c`` or ``\\n`` escapes); text that is not valid framing as is."""
    from ..references.framing import CLOSE_TAG, OPEN_TAG

    pieces: list[str] = []
    position = 0
    while (open_at := received.find(OPEN_TAG, position)) >= 0:
        close_at = received.find(CLOSE_TAG, open_at)
        if close_at < 0:
            break
        try:
            entries = json.loads(received[open_at + len(OPEN_TAG):close_at])
        except ValueError:
            pieces.append(received[position:close_at])
        else:
            pieces += [received[position:open_at], OPEN_TAG, "\n", "\n".join(_readable(entries)), "\n"]
        position = close_at
    pieces.append(received[position:])
    return "".join(pieces)


def _preview(received: str | None) -> dict[str, Any] | None:
    """The bounded, control-escaped preview of what the agent received, and the note that says how much it shows."""
    if received is None:
        return None
    total = len(received)
    shown = escape_text(readable_context(received)[:MAX_PREVIEW_CHARS])
    if total > MAX_PREVIEW_CHARS:
        note = f"the first {MAX_PREVIEW_CHARS:,} of {total:,} characters"
    else:
        note = _plural(total, "character")
    return {"heading": f"{PREVIEW_HEADING} ({note})", "text": shown, "totalChars": total,
            "shownChars": min(total, MAX_PREVIEW_CHARS)}


class ReferenceContextDisplay:
    """One prepared reference context for people: one line, expanding to each source and to a preview.

    ``source_metadata`` is the context message's ``source`` (``kind``, ``form``, ``version``,
    ``references``); ``spills`` maps a reference's ``inputIndex`` to the path of its full-snapshot
    spill file (or ``None`` when it was truncated but could not be saved); ``received`` is the text
    the agent received (the framed snapshots), previewed bounded; ``captured_at`` is when the
    snapshots were taken (epoch seconds; default: now, as the display is made right after).

    The words are made here once (:meth:`view`) and carried in the JSON bundle, so the JupyterLab
    renderer draws the same rows as the ``text/html`` and ``text/plain`` forms.
    """

    def __init__(
        self,
        source_metadata: Mapping[str, Any],
        *,
        target_session_id: str,
        spills: Mapping[int, str | os.PathLike[str] | None] | None = None,
        received: str | None = None,
        captured_at: float | None = None,
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
        if received is not None and not isinstance(received, str):
            raise ValueError(f"received must be the context's text (a str), got {type(received).__name__}")
        self.source_metadata = source_metadata
        self.target_session_id = target_session_id
        self.spills: dict[int, str | None] = {k: (None if v is None else os.fspath(v)) for k, v in spills.items()}
        self.received = received
        self.captured_at = time.time() if captured_at is None else captured_at

    @classmethod
    def from_context(cls, context: Mapping[str, Any], *, target_session_id: str,
                     spills: Mapping[int, str | os.PathLike[str] | None] | None = None) -> ReferenceContextDisplay:
        """The display of a prepared context message (its ``source`` and its text)."""
        return cls(context.get("source"), target_session_id=target_session_id,  # type: ignore[arg-type]
                   spills=spills, received=context_text(context))

    def _index(self, position: int, reference: Mapping[str, Any]) -> int:
        index = reference.get("inputIndex")
        return index if isinstance(index, int) and not isinstance(index, bool) else position

    def _spill(self, position: int, reference: Mapping[str, Any]) -> str | None:
        return self.spills.get(self._index(position, reference))

    def view(self) -> dict[str, Any]:
        """The words people read: ``line``, each source's ``title``, ``state`` and ``rows``, the ``preview``."""
        sources = []
        for position, reference in enumerate(self._references):
            rows = source_rows(reference, self._spill(position, reference),
                               spilled=self._index(position, reference) in self.spills, captured_at=self.captured_at)
            sources.append({"title": _title(reference), "state": _source_state(reference),
                            "rows": [list(row) for row in rows]})
        for key, name_key, term, value_term, state, sent in _HOST_KINDS:
            for entry in _host_entries(self.source_metadata, key):
                name = escape_controls(str(entry.get(name_key, "")))
                brief = entry.get("brief") or entry.get("type")
                rows = [(term, name), (value_term, escape_controls(str(brief)) if brief else "unknown")]
                if captured := format_captured(self.captured_at):
                    rows.append(("Captured", captured))
                size = _int(entry.get("bytes"))
                if size is not None:
                    rows.append(("Sent", sent.format(size=size)))
                sources.append({"title": escape_controls(str(entry.get("label") or name)), "state": state,
                                "rows": [list(row) for row in rows]})
        return {"line": escape_controls(self.summary), "sources": sources, "preview": _preview(self.received)}

    def to_json(self) -> dict[str, Any]:
        """The JSON bundle: raw values, as in the log, plus each source's ``spillPath``, then the ``view``."""
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
            "capturedAt": datetime.fromtimestamp(self.captured_at).astimezone().isoformat(timespec="seconds"),
            "view": self.view(),
        }

    @property
    def summary(self) -> str:
        return reference_summary(self.source_metadata)

    def _html(self, view: Mapping[str, Any]) -> str:
        parts = [
            '<details class="dsh-reference-context" style="margin:0.25em 0">',
            f'<summary style="cursor:pointer">{escape_html(view["line"])}</summary>',
        ]
        for position, source in enumerate(view["sources"]):
            parts.append('<div class="dsh-reference-source" style="margin:0.4em 0 0.4em 1em">')
            parts.append(f'<div style="font-weight:600">{position + 1}. {escape_html(source["title"])} '
                         f'<span style="font-weight:400;opacity:0.75">— {escape_html(source["state"])}</span></div>')
            parts.append('<table style="border-collapse:collapse">')
            for term, words in source["rows"]:
                parts.append(f"<tr><th {_TH}>{escape_html(term)}</th><td {_TD}>{escape_html(words)}</td></tr>")
            parts.append("</table></div>")
        preview = view["preview"]
        if preview is not None:
            parts.append('<details class="dsh-reference-preview" style="margin:0.4em 0 0.4em 1em">')
            parts.append(f'<summary style="cursor:pointer">{escape_html(preview["heading"])}</summary>')
            parts.append('<pre style="white-space:pre-wrap;overflow-wrap:anywhere;max-height:24em;overflow:auto">'
                         f"{escape_html(preview['text'])}</pre></details>")
        parts.append("</details>")
        return safe_html("".join(parts), "dsh-reference-html")

    @staticmethod
    def _plain(view: Mapping[str, Any]) -> str:
        lines = [view["line"]]
        for position, source in enumerate(view["sources"]):
            lines.append(f"  {position + 1}. {source['title']} — {source['state']}")
            lines.extend(f"     {term}: {words}" for term, words in source["rows"])
        preview = view["preview"]
        if preview is not None:
            lines.append(f"  {preview['heading']}:")
            lines.extend("     " + line for line in preview["text"].split("\n"))
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.to_json()
        view = data["view"]
        return _filter({REFERENCE_CONTEXT_MIME: data, "text/html": self._html(view), "text/plain": self._plain(view)},
                       include, exclude)

    def __repr__(self) -> str:
        return self._plain(self.view())


# --------------------------------------------------------------------------- session table

_COLUMNS = ("label", "notebook", "id", "cwd", "created", "same workspace")


class SessionTable:
    """The sessions of ``%dsh sessions``: label, notebook, id, cwd, created (local ISO time), cost, same workspace.

    ``rows`` are candidate-shaped dicts (``sessionId``, ``label``, ``notebook``?, ``cwd``?, ``createdAt`` epoch ms,
    ``sameWorkspace``, ``cost``? (:class:`~dsh_jupyter.conversation.spend.SpendJson`), optionally
    ``current: True`` for the notebook's own session, marked "(current)"); they are shown in the order given.
    Sessions of other tools (Claude Code, Codex) are marked in a "tool" column, shown only when there is one
    among the rows; the "cost" column is shown when a row has a known cost (a session without one shows
    nothing there, never a guessed $0).
    """

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not isinstance(rows, (list, tuple)):
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
        from ..conversation.spend import Spend

        self.costs = [Spend.from_json(row.get("cost")).text() for row in self.rows]
        columns = list(_COLUMNS)
        if any(self.costs):
            columns.insert(columns.index("same workspace"), "cost")
        if any(self.tools):
            columns.insert(1, "tool")
        self.columns = tuple(columns)

    def _with_extras(self, position: int, cells: list[str],
                     render: Callable[[str], str] = escape_controls) -> list[str]:
        """``cells`` (one per :data:`_COLUMNS`) with the tool and cost cells where :attr:`columns` has them."""
        cells = list(cells)
        if "cost" in self.columns:
            cells.insert(_COLUMNS.index("same workspace"), render(self.costs[position]))
        if "tool" in self.columns:
            cells.insert(1, render(self.tools[position]))
        return cells

    @staticmethod
    def _cells(row: Mapping[str, Any]) -> tuple[str, str | None, str, str | None, str, bool]:
        session_id = row.get("sessionId", row.get("id"))
        label = row.get("label")
        label = label if isinstance(label, str) else session_id
        cwd = row.get("cwd")
        notebook = row.get("notebook")
        return (
            label,
            notebook_label(notebook) if isinstance(notebook, str) else None,
            session_id,
            cwd if isinstance(cwd, str) else None,
            format_created(row.get("createdAt")),
            row.get("sameWorkspace") is True,
        )

    def _html(self) -> str:
        if not self.rows:
            return safe_html("<p>No sessions.</p>")
        head = "".join(f"<th {_TH_RIGHT if name == 'cost' else _TH}>{name}</th>" for name in self.columns)
        body = []
        for position, row in enumerate(self.rows):
            label, notebook, session_id, cwd, created, same = self._cells(row)
            cells = self._with_extras(position, [
                html_field(label) + (" <em>(current)</em>" if row.get("current") is True else ""),
                _MISSING if notebook is None else html_field(notebook),
                f"<code>{html_field(session_id)}</code>",
                _MISSING if cwd is None else html_field(cwd),
                html_field(created),
                "✓" if same else "",
            ], html_field)
            body.append("<tr>" + "".join(f"<td {_TD_RIGHT if name == 'cost' else _TD}>{cell}</td>"
                                         for name, cell in zip(self.columns, cells, strict=True)) + "</tr>")
        return safe_html('<table class="dsh-sessions" style="border-collapse:collapse">'
                         f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")

    def _plain(self) -> str:
        if not self.rows:
            return "No sessions."
        table = [list(self.columns)]
        for position, row in enumerate(self.rows):
            label, notebook, session_id, cwd, created, same = self._cells(row)
            table.append(self._with_extras(position, [
                escape_controls(label) + (" (current)" if row.get("current") is True else ""),
                _MISSING if notebook is None else escape_controls(notebook),
                escape_controls(session_id), _MISSING if cwd is None else escape_controls(cwd), created,
                "✓" if same else ""]))
        widths = [max(display_width(line[col]) for line in table) for col in range(len(self.columns))]
        return "\n".join(
            "  ".join(_pad_left(cell, widths[col]) if self.columns[col] == "cost" else
                      _pad(cell, widths[col]) for col, cell in enumerate(line)).rstrip() for line in table
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
            "text/html": safe_html(f'<div class="dsh-location">{head}: <code>{html_field(self.path)}</code></div>'),
            "text/plain": self._plain(),
        }
        return _filter(bundle, include, exclude)

    def __repr__(self) -> str:
        return self._plain()


# --------------------------------------------------------------------------- notices


class NoticeDisplay:
    """A notice for the reader (the first-use "offline model" hint): rendered Markdown in a quote, and plain text.

    The text is ours, but it still goes through the one sanitiser (:func:`~.markdown.markdown_html`:
    raw HTML shown as text, controls escaped); its `code` spans render as code.
    """

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise ValueError(f"a notice must be a str, got {type(text).__name__}")
        self.text = text

    def _html(self) -> str:
        return safe_html(f'<blockquote class="dsh-notice">{markdown_html(self.text.strip())}</blockquote>')

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _filter({"text/html": self._html(), "text/plain": self._plain()}, include, exclude)

    def _plain(self) -> str:
        return escape_controls(self.text.strip(), one_line=False)

    def __repr__(self) -> str:
        return self._plain()


#: The notices already shown, per owner (the extension's magics: one per kernel).
_SHOWN: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()


def show_notice(text: str | None, owner: object) -> bool:
    """Display ``text`` as a :class:`NoticeDisplay` unless ``owner`` showed it already; ``True`` if shown."""
    if not text:
        return False
    shown = _SHOWN.setdefault(owner, set())
    if text in shown:
        return False
    shown.add(text)
    from IPython.display import display

    display(NoticeDisplay(text))
    return True
