"""Export a session for people: a Markdown or HTML transcript, or a notebook that re-runs its code.

The input is a session's full log (``store.load``), not its model-visible surface: a reader wants every
prompt and answer, including those a compaction later summarised (the checkpoint is shown where it was
made). What each form holds:

* **Markdown** (``md``): title, session id, created time and folder; each prompt and answer; tool calls
  collapsed as ``<details>`` with the command or code and its output (cut to :data:`MAX_OUTPUT`
  characters); reference snapshots noted by label and id, never inlined. Session text cannot inject HTML
  or break the structure: each prompt and answer is its Markdown rendered by the one sanitiser
  (:func:`~dsh_jupyter.notebook.markdown.markdown_html`: one inert HTML block that every Markdown
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

Terminal control characters become ``\\xNN`` in every form (:mod:`dsh_jupyter.notebook.escape`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .clip import capped
from .images import content_text
from .notebook.escape import escape_controls, escape_text, html_field
from .notebook.markdown import markdown_html
from .notebook.transcript import argument_summary
from .session import Event, SessionLog
from .session.events import ASSISTANT_MESSAGE, SESSION_TITLE, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from .session.messages import (
    SESSION_REFERENCE_KIND,
    blocks_text,
    display_content,
    is_checkpoint_source,
    is_direct_user_source,
)

#: The export formats, by the name ``--to`` takes.
FORMATS: tuple[str, ...] = ("md", "html", "ipynb")
#: Tool output kept per call (characters); the rest is counted, not shown.
MAX_OUTPUT = 20_000
#: Tools whose calls become runnable notebook cells, with the argument holding their source.
RUNNABLE = {"python": "code", "bash": "command"}


class ExportError(ValueError):
    """An export cannot be made as asked; the message says what to do instead."""


# --------------------------------------------------------------------------- the transcript


@dataclass(frozen=True)
class Prompt:
    text: str


@dataclass(frozen=True)
class Answer:
    text: str


@dataclass(frozen=True)
class Checkpoint:
    """A compaction checkpoint: the summary that replaced the conversation before it."""

    text: str


@dataclass(frozen=True)
class Note:
    """A message injected by the harness or a hook (not typed by the user)."""

    text: str


@dataclass(frozen=True)
class References:
    """What a prompt referenced: sessions as ``(label, session id, captured through seq)``, and notebook
    variables as ``(label, brief)`` (``df``, ``DataFrame 1,000×4``)."""

    sessions: tuple[tuple[str, str, int | None], ...]
    variables: tuple[tuple[str, str], ...] = ()


@dataclass
class ToolRun:
    call_id: str
    name: str
    arguments: str
    output: str | None = None
    is_error: bool = False

    @property
    def source(self) -> str | None:
        """The code or command of a ``python`` or ``bash`` call (``None`` for other tools or odd arguments)."""
        key = RUNNABLE.get(self.name)
        if key is None:
            return None
        try:
            parsed = json.loads(self.arguments or "{}")
        except ValueError:
            return None
        value = parsed.get(key) if isinstance(parsed, dict) else None
        return value if isinstance(value, str) else None

    def shown_output(self) -> str:
        if self.output is None:
            return "(no result was recorded)"
        return capped(self.output, MAX_OUTPUT)


Item = Prompt | Answer | Checkpoint | Note | References | ToolRun


@dataclass
class Transcript:
    """What an export shows of one session."""

    session_id: str
    title: str | None
    created_at: int
    cwd: str | None
    items: list[Item] = field(default_factory=list)

    @property
    def heading(self) -> str:
        return self.title or f"Session {self.session_id}"

    @property
    def created(self) -> str:
        return datetime.fromtimestamp(self.created_at / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")

    def counts(self) -> tuple[int, int, int]:
        """Prompts, answers and tool calls."""
        return (sum(isinstance(i, Prompt) for i in self.items), sum(isinstance(i, Answer) for i in self.items),
                sum(isinstance(i, ToolRun) for i in self.items))


def _message(event: Event) -> Mapping[str, Any]:
    data = event.data if isinstance(event.data, Mapping) else {}
    message = data.get("message", data) if event.type != USER_MESSAGE else data
    return message if isinstance(message, Mapping) else {}


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return list(content) if isinstance(content, list) else []


def _references(source: Mapping[str, Any]) -> References:
    found: list[tuple[str, str, int | None]] = []
    for entry in source.get("references") or ():
        if not isinstance(entry, Mapping):
            continue
        session_id = str(entry.get("sessionId", "?"))
        label = entry.get("label")
        through = entry.get("capturedThroughSeq")
        found.append((label if isinstance(label, str) else session_id, session_id,
                      through if isinstance(through, int) and not isinstance(through, bool) else None))
    variables: list[tuple[str, str]] = []
    for entry in source.get("variables") or ():
        if isinstance(entry, Mapping):
            name = entry.get("label") or entry.get("variable")
            brief = entry.get("brief") or entry.get("type")
            variables.append((str(name or "?"), str(brief or "")))
    return References(tuple(found), tuple(variables))


def transcript(log: SessionLog) -> Transcript:
    """The prompts, answers, tool calls, checkpoints and reference notes of ``log``, in log order."""
    header = log.header
    result = Transcript(header.id, None, int(header.created_at), header.cwd)
    runs: dict[str, ToolRun] = {}
    for event in log.events:
        if event.type == SESSION_TITLE:
            title = event.data.get("title") if isinstance(event.data, Mapping) else None
            result.title = title if isinstance(title, str) and title.strip() else result.title
        elif event.type == USER_MESSAGE:
            _user(_message(event), result.items)
        elif event.type == ASSISTANT_MESSAGE:
            text = blocks_text(_blocks(_message(event)))
            if text.strip():
                result.items.append(Answer(text))
        elif event.type == TOOL_CALL and isinstance(event.data, Mapping):
            call_id = str(event.data.get("callId", ""))
            arguments = event.data.get("arguments")
            run = ToolRun(call_id, str(event.data.get("name", "tool")),
                          arguments if isinstance(arguments, str) else json.dumps(arguments))
            runs[call_id] = run
            result.items.append(run)
        elif event.type == TOOL_RESULT:
            for block in _blocks(_message(event)):
                if isinstance(block, Mapping) and block.get("type") == "tool-result":
                    done = runs.get(str(block.get("toolCallId", "")))
                    if done is not None:
                        inner = block.get("content")
                        done.output = content_text(inner if isinstance(inner, list) else [])  # images noted
                        done.is_error = block.get("isError") is True
    return result


def _user(message: Mapping[str, Any], items: list[Item]) -> None:
    source = message.get("source")
    if isinstance(source, Mapping) and source.get("kind") == SESSION_REFERENCE_KIND:
        items.append(_references(source))
        envelope = message.get("envelope")
        if isinstance(envelope, Mapping) and isinstance(envelope.get("displayContent"), list):
            items.append(Prompt(blocks_text(display_content(message))))  # the prompt the snapshots were baked into
        return
    text = blocks_text(display_content(message))
    if not text.strip():
        return
    if is_checkpoint_source(source):
        items.append(Checkpoint(text))
    elif is_direct_user_source(source):
        items.append(Prompt(text))
    else:
        items.append(Note(text))


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


def _md_references(item: References) -> str:
    lines = []
    if item.sessions or not item.variables:
        names = ", ".join(f"**{md_literal(label)}** ({md_literal(sid)}"
                          + (f", through event {through})" if through is not None else ")")
                          for label, sid, through in item.sessions)
        lines.append(f"*Referenced sessions:* {names or 'none'}. *Their snapshots are not included here.*")
    if item.variables:
        named = ", ".join(f"**{md_literal(name)}**" + (f" ({md_literal(brief)})" if brief else "")
                          for name, brief in item.variables)
        lines.append(f"*Referenced variables:* {named}. *Their summaries are not included here.*")
    return _quote("\n".join(lines))


def _md_tool(run: ToolRun) -> str:
    summary = html_field(f"{run.name}: {argument_summary(run.name, run.arguments)}")
    status = " (error)" if run.is_error else ""
    source = run.source
    body = fence(source, "python" if run.name == "python" else "bash") if source is not None else fence(
        run.arguments, "json")
    return (f"<details>\n<summary>{summary}{status}</summary>\n\n{body}\n\nOutput:\n\n"
            f"{fence(run.shown_output(), 'text')}\n\n</details>")


def _md_item(item: Item) -> str:
    if isinstance(item, Prompt):
        return f"### Prompt\n\n{md_prose(item.text)}"
    if isinstance(item, Answer):
        return f"**Assistant**\n\n{md_prose(item.text)}"
    if isinstance(item, Checkpoint):
        return _quote(f"**Earlier conversation compacted.** Summary:\n\n{md_prose(item.text)}")
    if isinstance(item, Note):
        return _quote(f"*Added by the harness:*\n\n{md_prose(item.text)}")
    if isinstance(item, References):
        return _md_references(item)
    return _md_tool(item)


def _md_header(doc: Transcript) -> str:
    prompts, answers, tools = doc.counts()
    lines = [f"# {md_literal(doc.heading)}", "",
             f"- Session: {md_literal(doc.session_id)}",
             f"- Created: {doc.created}",
             f"- Folder: {md_literal(doc.cwd) if doc.cwd else '(none)'}",
             f"- {prompts} prompts, {answers} answers, {tools} tool calls (exported by dsh-jupyter)"]
    return "\n".join(lines)


def to_markdown(doc: Transcript) -> str:
    return "\n\n".join([_md_header(doc), *(_md_item(item) for item in doc.items)]) + "\n"


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
        return _section("prompt", "Prompt", markdown_html(item.text))
    if isinstance(item, Answer):
        return _section("answer", "Assistant", markdown_html(item.text))
    if isinstance(item, Checkpoint):
        return _section("checkpoint", "Earlier conversation compacted", markdown_html(item.text))
    if isinstance(item, Note):
        return _section("note", "Added by the harness", markdown_html(item.text))
    if isinstance(item, References):
        names = ", ".join(f"<b>{html_field(label)}</b> ({html_field(sid)}"
                          + (f", through event {through})" if through is not None else ")")
                          for label, sid, through in item.sessions)
        variables = ", ".join(f"<b>{html_field(name)}</b>" + (f" ({html_field(brief)})" if brief else "")
                              for name, brief in item.variables)
        parts = [] if item.variables and not item.sessions else [
            f'<div>{names or "none"}. Their snapshots are not included here.</div>']
        if variables:
            parts.append(f"<div>Variables: {variables}. Their summaries are not included here.</div>")
        who = "Referenced sessions" if item.sessions or not item.variables else "Referenced variables"
        return f'<section class="item refs"><div class="who">{who}</div>{"".join(parts)}</section>'
    run = item
    source = run.source
    code = source if source is not None else run.arguments
    summary = html_field(f"{run.name}: {argument_summary(run.name, run.arguments)}")
    error = " error" if run.is_error else ""
    label = "Arguments" if source is None else "Code" if run.name == "python" else "Command"
    return (f'<details class="tool{error}"><summary>{summary}{" (error)" if error else ""}</summary><div>'
            f'<div class="label">{label}</div><pre><code>{_h(code)}</code></pre><div class="label">Output</div>'
            f"<pre><code>{_h(run.shown_output())}</code></pre></div></details>")


def to_html(doc: Transcript) -> str:
    prompts, answers, tools = doc.counts()
    rows = [("Session", doc.session_id), ("Created", doc.created), ("Folder", doc.cwd or "(none)")]
    meta = "".join(f"<dt>{k}</dt><dd>{html_field(v)}</dd>" for k, v in rows)
    body = "\n".join(_html_item(item) for item in doc.items)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html_field(doc.heading)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n<main>\n"
        f"<header><h1>{html_field(doc.heading)}</h1><dl>{meta}</dl></header>\n{body}\n"
        f"<footer>{prompts} prompts, {answers} answers, {tools} tool calls · exported by dsh-jupyter</footer>\n"
        "</main>\n</body>\n</html>\n"
    )


# --------------------------------------------------------------------------- notebook


def _notebook_cells(doc: Transcript) -> list[Any]:
    from nbformat import v4

    cells: list[Any] = [v4.new_markdown_cell(_md_header(doc))]
    for item in doc.items:
        source = item.source if isinstance(item, ToolRun) else None
        if not isinstance(item, ToolRun) or source is None:
            cells.append(v4.new_markdown_cell(_md_item(item)))
            continue
        code = escape_text(source) if item.name == "python" else f"%%bash\n{escape_text(source)}"
        output = v4.new_output("stream", name="stderr" if item.is_error else "stdout",
                               text=escape_text(item.shown_output()))
        metadata: dict[str, Any] = {"dsh": {"tool": item.name, "callId": item.call_id}}
        if item.is_error:
            metadata["tags"] = ["raises-exception"]
        cells.append(v4.new_code_cell(code, outputs=[output], metadata=metadata))
    return cells


def to_notebook(doc: Transcript) -> str:
    import nbformat
    from nbformat import v4

    notebook = v4.new_notebook(cells=_notebook_cells(doc), metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "dsh": {"sessionId": doc.session_id, "title": doc.title, "createdAt": doc.created_at, "cwd": doc.cwd},
    })
    nbformat.validate(notebook)
    text: str = nbformat.writes(notebook)
    return text + "\n"


# --------------------------------------------------------------------------- entry points

_RENDERERS = {"md": to_markdown, "html": to_html, "ipynb": to_notebook}


def check_format(name: str) -> str:
    if name not in _RENDERERS:
        raise ExportError(f"unknown export format {name!r}; use one of {', '.join(FORMATS)}")
    return name


def render(log: SessionLog, fmt: str) -> str:
    """The export of ``log`` in format ``fmt`` (one of :data:`FORMATS`) as text."""
    return _RENDERERS[check_format(fmt)](transcript(log))


def export_name(session_id: str, fmt: str) -> str:
    """The file name an export gets by default: the session's folder name (safe on every file system)."""
    from .store.paths import session_folder_name

    return f"{session_folder_name(session_id)}.{check_format(fmt)}"


def write_export(log: SessionLog, fmt: str, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the export of ``log`` to ``path`` (atomically: a reader never sees half a file).

    An existing file is kept unless ``overwrite``: :class:`ExportError` says so."""
    text = render(log, fmt)
    target = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    if target.is_dir():
        raise ExportError(f"{target} is a folder; give a file name in it, such as "
                          f"{target / export_name(log.header.id, fmt)}")
    if target.exists() and not overwrite:
        raise ExportError(f"{target} already exists; pass --force to replace it, or choose another --output")
    if not target.parent.is_dir():
        raise ExportError(f"the folder {target.parent} does not exist; create it first or choose another --output")
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


def export_all(logs: Iterable[SessionLog], fmt: str, folder: str | os.PathLike[str], *,
               overwrite: bool = False) -> list[Path]:
    """Write each log's export into ``folder`` under :func:`export_name`."""
    base = Path(os.fspath(folder))
    return [write_export(log, fmt, base / export_name(log.header.id, fmt), overwrite=overwrite) for log in logs]


__all__: Sequence[str] = ["FORMATS", "ExportError", "Transcript", "export_all", "export_name", "render",
                          "transcript", "write_export"]
