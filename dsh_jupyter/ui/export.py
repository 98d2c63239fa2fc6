"""Export a session for people: a Markdown or HTML transcript, or a notebook that re-runs its code.

The input is every event of a session's log, not its model-visible surface: a reader wants every
prompt and answer, including those a compaction later summarised (the checkpoint is shown where it was
made). What each form holds:

* **Markdown** (``md``): title, session id, created time and folder; each prompt and answer; tool calls
  collapsed as ``<details>`` with the command or code and its output (cut to :data:`MAX_OUTPUT`
  characters); reference snapshots noted by label and id, never inlined. Session text cannot inject HTML
  or break the structure: each prompt and answer is its Markdown rendered by the one sanitiser
  (:func:`~dsh_jupyter.ui.markdown.markdown_html`: one inert HTML block that every Markdown
  renderer leaves alone); code and output sit in fences longer than any backtick run inside them;
  one-line fields are backslash-escaped.
* **HTML** (``html``): one standalone, styled page; each prompt and answer is its Markdown rendered by
  the same sanitiser (tables, lists, code; raw HTML shown as text), every other piece of session text is
  entity-escaped, and a Content-Security-Policy forbids scripts; tool calls are ``<details>``.
* **Notebook** (``ipynb``, nbformat 4): prompts and answers as Markdown cells; the agent's ``python``
  calls as code cells and its ``bash`` calls as ``%%bash`` code cells (runnable: re-running the analysis
  is the point of a notebook), each with the tool's recorded output as a stream output; a call whose
  result was an error is tagged ``raises-exception``, so running the notebook top to bottom goes on past
  it. Other tools' calls become Markdown cells like the Markdown form's.

Terminal control characters become ``\\xNN`` in every form (:mod:`dsh_jupyter.escape`). Secrets are
masked as the events are read (:func:`stream_export`), so an export from a kernel's session in memory and one
from its log are the same file.

Exports are streamed: the log is read one event at a time (:meth:`SessionStore.stream_events
<dsh_jupyter.store.SessionStore.stream_events>`), each item is written to a temporary file as soon as it is
complete and the file replaces the target only when the whole log was read, so a 1 GB session exports in
bounded memory and a damaged log leaves nothing half-written. A prompt or answer longer than
:data:`MAX_TEXT` characters and tool output longer than :data:`MAX_OUTPUT` are cut, with a line saying how
much was left out; the footer counts the prompts, answers and tool calls, and how many texts were cut.

nbformat is imported when a notebook is written, not with the module.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..conversation.items import Answer, Checkpoint, Context, Item, Note, Prompt, ToolCall
from ..conversation.limits import EXPORT
from ..conversation.log_feed import FED_TYPES, transcript_items
from ..conversation.tally import Tally
from ..escape import escape_controls, escape_text, html_field
from ..secrets import mask_fields, mask_text
from ..session import Event, SessionHeader, SessionLog
from ..store.paths import session_folder_name
from .markdown import markdown_html

if TYPE_CHECKING:
    from ..store import SessionStore

#: The export formats, by the name ``--to`` takes.
FORMATS: tuple[str, ...] = ("md", "html", "ipynb")
#: Characters kept of one prompt, answer, checkpoint or harness note (the rest is counted, not shown).
MAX_TEXT: int = EXPORT.text or 0
#: Characters kept of a tool's output (the rest is counted, not shown).
MAX_OUTPUT: int = EXPORT.output or 0
#: The items an export shows (reasoning, notices and turn ends are left to the log).
EXPORTED: tuple[type, ...] = (Prompt, Answer, Checkpoint, Note, Context, ToolCall)
#: The mark after a tool call's summary for each way it ended (none while it ran or when it succeeded).
_TOOL_MARKS = {"error": " (error)", "stopped": " (stopped)"}


@dataclass
class ExportedSession:
    """What an export shows of one session: its facts, and (for :func:`transcript`) its items in memory."""

    session_id: str
    title: str | None
    created_at: int
    cwd: str | None
    items: list[Item] = field(default_factory=list)

    @classmethod
    def of(cls, header: SessionHeader, title: str | None) -> ExportedSession:
        return cls(header.id, title, int(header.created_at), header.cwd)

    @property
    def heading(self) -> str:
        return self.title or f"Session {self.session_id}"

    @property
    def created(self) -> str:
        return datetime.fromtimestamp(self.created_at / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")

    def counts(self) -> tuple[int, int, int]:
        """Prompts, answers and tool calls."""
        tally = self.tally()
        return tally.prompts, tally.answers, tally.tools

    def tally(self) -> Tally:
        tally = Tally(title=self.title)
        for item in self.items:
            tally.add(item)
        return tally


def exported_session(log: SessionLog) -> ExportedSession:
    """Every exported item of ``log`` in memory (for small logs and tests; exports stream them)."""
    tally = Tally()
    items = list(transcript_items(log.events, tally, kinds=EXPORTED))
    result = ExportedSession.of(log.header, tally.title)
    result.items = items
    return result


def _shown_output(run: ToolCall) -> str:
    return "(no result was recorded)" if run.result is None else run.result


class ExportError(ValueError):
    """An export cannot be made as asked; the message says what to do instead."""


# --------------------------------------------------------------------------- Markdown

_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]<>!|~&#$])")


def md_literal(text: str) -> str:
    """A one-line field (title, id, folder) shown literally in Markdown: every character that could start
    inline markup (emphasis, code, links, images, HTML, entities, strikethrough, tables, math) is
    backslash-escaped; line breaks are ``\\x0a``."""
    return _MD_PUNCTUATION.sub(r"\\\1", escape_controls(text))


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose backtick fence is longer than any backtick run inside it (its
    final line breaks dropped: they would show as blank lines)."""
    body = escape_text(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{info}\n{body}\n{marks}"


def md_prose(text: str) -> str:
    """A prompt or answer for a Markdown document: its Markdown rendered by the one sanitiser, as one HTML
    block on one line (no Markdown renderer parses inside it, and quoting it line by line keeps it whole)."""
    return markdown_html(text)


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _md_references(item: Context) -> str:
    lines = []
    if item.sessions or not (item.variables or item.cells):
        names = ", ".join(f"**{md_literal(label)}** ({md_literal(sid)}"
                          + (f", through event {through})" if through is not None else ")")
                          for label, sid, through in item.sessions)
        lines.append(f"*Referenced sessions:* {names or 'none'}. *Their snapshots are not included here.*")
    if item.variables:
        named = ", ".join(f"**{md_literal(name)}**" + (f" ({md_literal(brief)})" if brief else "")
                          for name, brief in item.variables)
        lines.append(f"*Referenced variables:* {named}. *Their summaries are not included here.*")
    if item.cells:
        named = ", ".join(f"**{md_literal(name)}**" + (f" ({md_literal(brief)})" if brief else "")
                          for name, brief in item.cells)
        lines.append(f"*Referenced cells:* {named}. *Their contents are not included here.*")
    return _quote("\n".join(lines))


def _md_tool(run: ToolCall) -> str:
    summary = html_field(f"{run.name}: {run.summary}")
    status = _TOOL_MARKS.get(run.status, "")
    source = run.source
    body = fence(source, "python" if run.name == "python" else "bash") if source is not None else fence(
        run.arguments, "json")
    return (f"<details>\n<summary>{summary}{status}</summary>\n\n{body}\n\nOutput:\n\n"
            f"{fence(_shown_output(run), 'text')}\n\n</details>")


def _md_item(item: Item) -> str:
    if isinstance(item, Prompt):
        return f"### Prompt\n\n{md_prose(item.shown)}"
    if isinstance(item, Answer):
        return f"**Assistant**\n\n{md_prose(item.shown)}"
    if isinstance(item, Checkpoint):
        return _quote(f"**Earlier conversation compacted.** Summary:\n\n{md_prose(item.shown)}")
    if isinstance(item, Note):
        return _quote(f"*Added by the harness:*\n\n{md_prose(item.shown)}")
    if isinstance(item, Context):
        return _md_references(item)
    if isinstance(item, ToolCall):
        return _md_tool(item)
    raise TypeError(f"an export does not show {type(item).__name__} items")


def _md_header(doc: ExportedSession) -> str:
    lines = [f"# {md_literal(doc.heading)}", "",
             f"- Session: {md_literal(doc.session_id)}",
             f"- Created: {doc.created}",
             f"- Folder: {md_literal(doc.cwd) if doc.cwd else '(none)'}"]
    return "\n".join(lines)


def _md_footer(tally: Tally) -> str:
    return f"---\n\n*{md_literal(tally.summary())} · exported by dsh-jupyter*"


def _md_pieces(doc: ExportedSession, items: Iterable[Item], tally: Tally) -> Iterator[str]:
    yield _md_header(doc)
    for item in items:
        yield "\n\n" + _md_item(item)
    yield "\n\n" + _md_footer(tally) + "\n"


# --------------------------------------------------------------------------- HTML

_STYLE = """
body { font: 15px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; background: #f6f8fa;
       margin: 0; padding: 2rem 1rem; }
main { max-width: 52rem; margin: 0 auto; }
header { margin-bottom: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .5rem; overflow-wrap: anywhere; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; color: #57606a; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
.item { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: .75rem 1rem; margin: .75rem 0; }
.item > .who { font-size: .8rem; font-weight: 600; text-transform: uppercase; letter-spacing: .04em;
               color: #57606a; margin-bottom: .35rem; }
.prompt { border-left: 4px solid #0969da; }
.answer { border-left: 4px solid #1a7f37; }
.checkpoint, .note, .refs { background: #fff8c5; border-color: #d4a72c; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
details.tool { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; margin: .5rem 0 .5rem 1.5rem; }
details.tool > summary { cursor: pointer; padding: .45rem .75rem; font-family: ui-monospace, monospace;
                         font-size: .85rem; overflow-wrap: anywhere; }
details.tool.error > summary { color: #cf222e; }
details.tool > div { padding: 0 .75rem .5rem; }
pre { background: #f6f8fa; border-radius: 6px; padding: .6rem .75rem; overflow-x: auto; margin: .35rem 0;
      font: .82rem/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap;
      overflow-wrap: anywhere; }
.label { font-size: .75rem; color: #57606a; }
footer { color: #57606a; font-size: .8rem; margin-top: 2rem; }
"""


def _h(text: str) -> str:
    return html_field(text, one_line=False)


def _section(kind: str, who: str, body: str) -> str:
    return f'<section class="item {kind}"><div class="who">{who}</div><div class="text">{body}</div></section>'


def _html_item(item: Item) -> str:
    if isinstance(item, Prompt):
        return _section("prompt", "Prompt", markdown_html(item.shown))
    if isinstance(item, Answer):
        return _section("answer", "Assistant", markdown_html(item.shown))
    if isinstance(item, Checkpoint):
        return _section("checkpoint", "Earlier conversation compacted", markdown_html(item.shown))
    if isinstance(item, Note):
        return _section("note", "Added by the harness", markdown_html(item.shown))
    if isinstance(item, Context):
        names = ", ".join(f"<b>{html_field(label)}</b> ({html_field(sid)}"
                          + (f", through event {through})" if through is not None else ")")
                          for label, sid, through in item.sessions)
        variables = ", ".join(f"<b>{html_field(name)}</b>" + (f" ({html_field(brief)})" if brief else "")
                              for name, brief in item.variables)
        cells = ", ".join(f"<b>{html_field(name)}</b>" + (f" ({html_field(brief)})" if brief else "")
                          for name, brief in item.cells)
        notebook = bool(item.variables or item.cells)
        parts = [] if notebook and not item.sessions else [
            f'<div>{names or "none"}. Their snapshots are not included here.</div>']
        if variables:
            parts.append(f"<div>Variables: {variables}. Their summaries are not included here.</div>")
        if cells:
            parts.append(f"<div>Cells: {cells}. Their contents are not included here.</div>")
        who = "Referenced sessions" if item.sessions or not notebook else \
            "Referenced variables" if not item.cells else "Referenced cells" if not item.variables else \
            "Referenced notebook"
        return f'<section class="item refs"><div class="who">{who}</div>{"".join(parts)}</section>'
    if not isinstance(item, ToolCall):
        raise TypeError(f"an export does not show {type(item).__name__} items")
    run = item
    source = run.source
    code = source if source is not None else run.arguments
    summary = html_field(f"{run.name}: {run.summary}")
    error = " error" if run.status in _TOOL_MARKS else ""
    label = "Arguments" if source is None else "Code" if run.name == "python" else "Command"
    return (f'<details class="tool{error}"><summary>{summary}{_TOOL_MARKS.get(run.status, "")}</summary><div>'
            f'<div class="label">{label}</div><pre><code>{_h(code)}</code></pre><div class="label">Output</div>'
            f"<pre><code>{_h(_shown_output(run))}</code></pre></div></details>")


def _html_pieces(doc: ExportedSession, items: Iterable[Item], tally: Tally) -> Iterator[str]:
    rows = [("Session", doc.session_id), ("Created", doc.created), ("Folder", doc.cwd or "(none)")]
    meta = "".join(f"<dt>{k}</dt><dd>{html_field(v)}</dd>" for k, v in rows)
    yield (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html_field(doc.heading)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n<main>\n"
        f"<header><h1>{html_field(doc.heading)}</h1><dl>{meta}</dl></header>\n"
    )
    for item in items:
        yield _html_item(item) + "\n"
    yield (f"<footer>{html_field(tally.summary())} · exported by dsh-jupyter</footer>\n"
           "</main>\n</body>\n</html>\n")


# --------------------------------------------------------------------------- notebook


def _notebook_cell(item: Item) -> Any:
    from nbformat import v4

    source = item.source if isinstance(item, ToolCall) else None
    if not isinstance(item, ToolCall) or source is None:
        return v4.new_markdown_cell(_md_item(item))
    failed = item.status in _TOOL_MARKS  # an error, or cut off: running the notebook goes on past it
    code = escape_text(source) if item.name == "python" else f"%%bash\n{escape_text(source)}"
    output = v4.new_output("stream", name="stderr" if failed else "stdout", text=escape_text(_shown_output(item)))
    metadata: dict[str, Any] = {"dsh": {"tool": item.name, "callId": item.call_id}}
    if failed:
        metadata["tags"] = ["raises-exception"]
    return v4.new_code_cell(code, outputs=[output], metadata=metadata)


_CELLS = '"cells": []'


def _cell_json(cell: Any) -> str:
    """One cell as ``nbformat.writes`` lays it out inside the notebook's cell list (sources and stream text
    as lists of lines, keys sorted, one-space indents)."""
    record = dict(cell)
    record["source"] = record["source"].splitlines(True)
    if "outputs" in record:
        record["outputs"] = [{**o, "text": o["text"].splitlines(True)} if "text" in o else dict(o)
                             for o in record["outputs"]]
    text = json.dumps(record, sort_keys=True, indent=1, ensure_ascii=False)
    return "\n".join("  " + line for line in text.split("\n"))


def _notebook_pieces(doc: ExportedSession, items: Iterable[Item], tally: Tally) -> Iterator[str]:
    """The notebook, one cell at a time: the skeleton (metadata, format) is validated once with nbformat,
    and every cell is built with nbformat's own constructors."""
    import nbformat
    from nbformat import v4

    skeleton = v4.new_notebook(cells=[], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "dsh": {"sessionId": doc.session_id, "title": doc.title, "createdAt": doc.created_at, "cwd": doc.cwd},
    })
    nbformat.validate(skeleton)
    text: str = nbformat.writes(skeleton)
    at = text.index(_CELLS)
    yield text[:at] + '"cells": [\n' + _cell_json(v4.new_markdown_cell(_md_header(doc)))
    for item in items:
        yield ",\n" + _cell_json(_notebook_cell(item))
    yield ",\n" + _cell_json(v4.new_markdown_cell(_md_footer(tally))) + "\n ]" + text[at + len(_CELLS):] + "\n"


# --------------------------------------------------------------------------- entry points

_Pieces = Callable[[ExportedSession, Iterable[Item], Tally], Iterator[str]]
_RENDERERS: dict[str, _Pieces] = {"md": _md_pieces, "html": _html_pieces, "ipynb": _notebook_pieces}


def check_format(name: str) -> str:
    if name not in _RENDERERS:
        raise ExportError(f"unknown export format {name!r}; use one of {', '.join(FORMATS)}")
    return name


def stream_export(header: SessionHeader, title: str | None, events: Iterable[Event], fmt: str,
                  out: TextIO) -> Tally:
    """Write the export of a session (its ``header``, latest ``title`` and every event, in order) to ``out``,
    one item at a time; returns what was counted. Every piece of export text is written here.

    Secrets are masked as the events are read (:func:`~dsh_jupyter.secrets.mask_fields`): a stored log already
    is, but a kernel exports its session from memory, where they are still whole, and both must give one file."""
    title = mask_text(title) if title else title
    tally = Tally(title=title)
    doc = ExportedSession.of(header, title)
    doc.cwd = mask_text(doc.cwd) if doc.cwd else doc.cwd
    shown = (event for event in events if event.type in FED_TYPES)  # chunk rows and markers: nothing to mask
    items = transcript_items(map(mask_fields, shown), tally, kinds=EXPORTED)
    for piece in _RENDERERS[check_format(fmt)](doc, items, tally):
        out.write(piece)
    return tally


def render(log: SessionLog, fmt: str) -> str:
    """The export of ``log`` in format ``fmt`` (one of :data:`FORMATS`) as text."""
    out = io.StringIO()
    stream_export(log.header, _title(log), log.events, fmt, out)
    return out.getvalue()


def _title(log: SessionLog) -> str | None:
    data = log.title()
    title = data.get("title") if data else None
    return title if isinstance(title, str) and title.strip() else None


def export_name(session_id: str, fmt: str) -> str:
    """The file name an export gets by default: the session's folder name (safe on every file system)."""
    return f"{session_folder_name(session_id)}.{check_format(fmt)}"


def export_target(session_id: str, fmt: str, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Where an export of ``session_id`` goes, checked before anything is read: :class:`ExportError` when
    ``path`` is a folder, exists (unless ``overwrite``) or lies in a missing or read-only folder."""
    check_format(fmt)
    target = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    if target.is_dir():
        raise ExportError(f"{target} is a folder; give a file name in it, such as "
                          f"{target / export_name(session_id, fmt)}")
    if target.exists() and not overwrite:
        raise ExportError(f"{target} already exists; pass --force to replace it, or choose another --output")
    if not target.parent.is_dir():
        what = "is a file, not a folder" if target.parent.exists() else "does not exist"
        raise ExportError(f"the folder {target.parent} {what}; create it first or choose another --output")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise ExportError(f"the folder {target.parent} is not writable; choose another --output")
    return target


def write_stream(header: SessionHeader, title: str | None, events: Iterable[Event], fmt: str,
                 path: str | os.PathLike[str], *, overwrite: bool = False) -> tuple[Path, Tally]:
    """Stream the export of a session to ``path`` through a temporary file in the same folder, which
    replaces ``path`` only once every event was read and written: an error (a damaged log, a full disk)
    leaves no file behind and an existing one as it was."""
    target = export_target(header.id, fmt, path, overwrite=overwrite)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o644 & ~_umask())  # a file like any other the user writes (mkstemp makes it private)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            tally = stream_export(header, title, events, fmt, fh)
        if target.exists() and not overwrite:  # made by someone else while this export ran
            raise ExportError(f"{target} already exists; pass --force to replace it, or choose another --output")
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target, tally


def _umask() -> int:
    """The process's umask, read without changing it (Linux); the usual 022 elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_export(log: SessionLog, fmt: str, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the export of ``log`` (in memory: a live session) to ``path`` atomically (:func:`write_stream`).

    An existing file is kept unless ``overwrite``: :class:`ExportError` says so."""
    return write_stream(log.header, _title(log), log.events, fmt, path, overwrite=overwrite)[0]


def export_stored(store: SessionStore, session_id: str, fmt: str, path: str | os.PathLike[str], *,
                  overwrite: bool = False, title: str | None = None) -> tuple[Path, Tally]:
    """Export a stored session, reading its log one event at a time (:meth:`SessionStore.stream_events`).

    ``title``: the latest title when the caller knows it (the catalog does); else it is read from the store."""
    export_target(session_id, fmt, path, overwrite=overwrite)  # refuse before reading anything
    if title is None:
        data = store.read_title(session_id)
        found = data.get("title") if data else None
        title = found if isinstance(found, str) and found.strip() else None
    with store.stream_events(session_id) as (header, events):
        return write_stream(header, title, events, fmt, path, overwrite=overwrite)


def export_all(logs: Iterable[SessionLog], fmt: str, folder: str | os.PathLike[str], *,
               overwrite: bool = False) -> list[Path]:
    """Write each log's export into ``folder`` under :func:`export_name`."""
    base = Path(os.fspath(folder))
    return [write_export(log, fmt, base / export_name(log.header.id, fmt), overwrite=overwrite) for log in logs]


__all__: Sequence[str] = ["FORMATS", "MAX_OUTPUT", "MAX_TEXT", "ExportError", "ExportedSession", "Tally", "export_all",
                          "export_name", "export_stored", "exported_session", "render", "stream_export",
                          "transcript_items", "write_export", "write_stream"]
