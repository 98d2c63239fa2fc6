"""Exporting sessions (dsh_jupyter/ui/export.py): Markdown, HTML and notebook content, escaping of hostile session
text, the exported notebook running on a real kernel, ``%dsh export`` on a real kernel, and the CLI export."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, stream_text

from dsh_jupyter.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import (
    SESSION_REFERENCE_KIND,
    assistant_message,
    compaction_source,
    text_block,
    tool_result_message,
    user_message,
)
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.ui.export import ExportError, export_name, exported_session, fence, md_literal, render, write_export

MODEL = {"kind": "model", "provider": "offline", "model": "tiny"}
HOSTILE = "<img src=x onerror=alert(1)> </details> <script>alert(2)</script>"
BASE = 1_787_130_725_417


def _call(log: SessionLog, turn: int, call_id: str, name: str, arguments: dict[str, Any], output: str, *,
          error: bool = False) -> None:
    block = {"type": "tool-call", "id": call_id, "name": name, "arguments": json.dumps(arguments)}
    log.append("assistant/message", {"turn": turn, "step": 1, "message": assistant_message([block], MODEL)})
    seq = log.append("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": name,
                                   "arguments": json.dumps(arguments)}).seq
    log.append("tool/result", {"turn": turn, "step": 1, "message": tool_result_message(
        call_id, [text_block(output)], is_error=error)}, source_event_seqs=[seq])


def sample_log(session_id: str = "exp-1", title: str = "Sales <b>cleanup</b> `x`") -> SessionLog:
    """A session with everything an export shows: prompts, answers with hostile text and an open fence, python
    and bash calls (one failing), another tool, a reference context and a compaction checkpoint."""
    log = SessionLog(SessionHeader(session_id, BASE, "/work/[proj]"))
    log.append("turn/start", {"turn": 1})
    log.append("user/message", user_message(f"clean the data {HOSTILE}"))
    log.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": "user"}})
    _call(log, 1, "c1", "python", {"code": "total = 6 * 7\nprint('total is', total)"}, "total is 42\n")
    _call(log, 1, "c2", "bash", {"command": "echo hello from bash"}, "hello from bash\n")
    _call(log, 1, "c3", "python", {"code": "raise ValueError('boom')"}, "ValueError: boom", error=True)
    _call(log, 1, "c4", "read_notebook", {"cell": 3}, "```` four backticks ``` and </details>")
    log.append("assistant/message", {"turn": 1, "step": 2, "message": assistant_message(
        [text_block(f"Done. {HOSTILE}\n\n```python\nunclosed = True")], MODEL)})
    log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    log.append("turn/start", {"turn": 2})
    source = {"kind": SESSION_REFERENCE_KIND, "form": "recall", "version": 1, "references": [
        {"sessionId": "other-9", "label": "Other <i>work</i>", "capturedThroughSeq": 12}]}
    log.append("user/message", user_message([text_block("<referenced-sessions>SNAPSHOT BODY</referenced-sessions>")],
                                            source))
    log.append("user/message", user_message("compare with @other"))
    log.append("assistant/message", {"turn": 2, "step": 1, "message": assistant_message(
        [text_block("They match.")], MODEL)})
    log.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    surface = [e.seq for e in log.surface()]
    from dsh_jupyter.session import ReplaceOp

    log.append("user/message", user_message([text_block("summary of the work so far")], compaction_source("k1")),
               surface_op=ReplaceOp(surface[0], surface[-1]), source_event_seqs=surface)
    return log


# --------------------------------------------------------------------------- transcript and Markdown


def test_transcript_holds_prompts_answers_tools_references_and_checkpoints() -> None:
    doc = exported_session(sample_log())
    kinds = [type(item).__name__ for item in doc.items]
    assert kinds == ["Prompt", "ToolCall", "ToolCall", "ToolCall", "ToolCall", "Answer", "Context", "Prompt",
                     "Answer", "Checkpoint"]
    assert doc.title == "Sales <b>cleanup</b> `x`" and doc.counts() == (2, 2, 4)
    runs = [i for i in doc.items if type(i).__name__ == "ToolCall"]
    assert [r.source for r in runs] == ["total = 6 * 7\nprint('total is', total)", "echo hello from bash",
                                        "raise ValueError('boom')", None]
    assert [r.is_error for r in runs] == [False, False, True, False]


def test_a_call_cut_off_by_an_interruption_is_stopped_not_an_error_and_reasoning_stays_in_the_log() -> None:
    """The log's synthetic result for a call whose outcome is unknown reads as the cell shows it: stopped."""
    log = SessionLog(SessionHeader("exp-stop", BASE, None))
    log.append("turn/start", {"turn": 1})
    log.append("user/message", user_message("wait"))
    log.append("assistant/message", {"turn": 1, "step": 1, "message": assistant_message(
        [{"type": "reasoning", "text": "PRIVATE THOUGHT"}, text_block("Waiting.")], MODEL)})
    seq = log.append("tool/call", {"turn": 1, "step": 1, "callId": "s1", "name": "bash",
                                   "arguments": json.dumps({"command": "sleep 99"})}).seq
    log.append("tool/result", {"turn": 1, "step": 1, "message": tool_result_message(
        "s1", [text_block("Tool call interrupted: the user interrupted the turn; no result was recorded.")],
        is_error=True), "error": {"code": "TOOL_OUTCOME_UNKNOWN"}}, source_event_seqs=[seq])
    log.append("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    md, page = render(log, "md"), render(log, "html")
    assert "<summary>bash: sleep 99 (stopped)</summary>" in md and "(error)" not in md
    assert '<details class="tool error"><summary>bash: sleep 99 (stopped)</summary>' in page
    assert "no result was recorded" in md and "PRIVATE THOUGHT" not in md + page
    notebook = json.loads(render(log, "ipynb"))
    (code,) = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code["metadata"]["tags"] == ["raises-exception"] and code["outputs"][0]["name"] == "stderr"
    assert "1 prompts, 1 answers, 1 tool calls" in md


def test_markdown_is_readable_and_escaped() -> None:
    md = render(sample_log(), "md")
    assert md.startswith("# Sales \\<b\\>cleanup\\</b\\> \\`x\\`\n")
    assert "- Folder: /work/\\[proj\\]" in md and "2 prompts, 2 answers, 4 tool calls" in md
    assert ('### Prompt\n\n<div class="dsh-markdown tex2jax_ignore mathjax_ignore" style="white-space:normal"><p>'
            "clean the data &lt;img src=x onerror=alert(1)&gt; &lt;/details&gt; &lt;script&gt;alert(2)&lt;/script&gt;"
            "</p></div>") in md
    assert "<img" not in md and "<script" not in md and "<b>" not in md
    # Only our own <details> blocks: one per tool call, each closed once (the tool output's "</details>" sits
    # inside a code fence, where it is text).
    lines = md.split("\n")
    assert lines.count("<details>") == 4 and lines.count("</details>") == 4 and md.count("<details>") == 4
    assert "<summary>python: total = 6 * 7 print(&#x27;total is&#x27;, total)</summary>" in md
    assert "```python\ntotal = 6 * 7\nprint('total is', total)\n```" in md
    assert "<summary>python: raise ValueError(&#x27;boom&#x27;) (error)</summary>" in md
    assert "`````text\n```` four backticks ``` and </details>\n`````" in md  # a fence longer than any run inside
    # The answer's open fence ends with its message (one HTML block on one line), so the rest of the document
    # is not swallowed into it.
    assert ('<pre><code class="language-python">unclosed = True&#10;</code></pre></div>\n\n'
            "> *Referenced sessions:* **Other \\<i\\>work\\</i\\>** (other-9, through event 12)") in md
    assert "SNAPSHOT BODY" not in md
    assert ("> **Earlier conversation compacted.** Summary:\n>\n> <div class=\"dsh-markdown tex2jax_ignore "
            'mathjax_ignore" style="white-space:normal"><p>summary of the work so far</p></div>') in md


def test_fences_and_literals() -> None:
    assert fence("a ``` b", "text") == "````text\na ``` b\n````"
    assert fence("plain") == "```\nplain\n```"
    assert fence("bell\x07") == "```\nbell\\x07\n```"
    assert md_literal("*x* [y](javascript:z) <b> &amp;\n") == "\\*x\\* \\[y\\](javascript:z) \\<b\\> \\&amp;\\\\x0a"


def test_tool_output_is_bounded() -> None:
    log = SessionLog(SessionHeader("big-1", BASE, None))
    log.append("turn/start", {"turn": 1})
    log.append("user/message", user_message("go"))
    _call(log, 1, "c1", "bash", {"command": "yes | head"}, "y\n" * 50_000)
    md = render(log, "md")
    assert "(80000 more characters not shown)" in md and len(md) < 30_000


# --------------------------------------------------------------------------- HTML


def test_html_is_standalone_styled_and_shows_no_raw_html() -> None:
    page = render(sample_log(), "html")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page and "Content-Security-Policy" in page
    assert "<img" not in page and "<script" not in page and "<i>" not in page and "cleanup</b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; &lt;/details&gt; &lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert page.count("<details") == 4 and page.count("</details>") == 4
    assert '<details class="tool error">' in page
    assert "<title>Sales &lt;b&gt;cleanup&lt;/b&gt; `x`</title>" in page
    assert "SNAPSHOT BODY" not in page and "Other &lt;i&gt;work&lt;/i&gt;" in page
    # Every tag in the page is one of ours.
    tags = set(re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "main", "header", "h1", "dl", "dt", "dd",
                    "section", "div", "details", "summary", "pre", "code", "b", "footer", "p"}


# --------------------------------------------------------------------------- notebook


def test_notebook_cells_and_it_executes(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    import nbformat

    nb = nbformat.reads(render(sample_log(), "ipynb"), as_version=4)
    nbformat.validate(nb)
    kinds = [(c.cell_type, c.source.split("\n")[0]) for c in nb.cells]
    assert kinds[0][0] == "markdown" and kinds[0][1].startswith("# Sales")
    assert kinds[1] == ("markdown", "### Prompt")
    assert kinds[2] == ("code", "total = 6 * 7") and kinds[3] == ("code", "%%bash")
    assert kinds[4] == ("code", "raise ValueError('boom')") and nb.cells[4].metadata["tags"] == ["raises-exception"]
    assert kinds[5] == ("markdown", "<details>")  # a tool that is not python or bash
    assert nb.cells[2].outputs[0]["text"] == "total is 42\n"
    assert "<img" not in "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.metadata["dsh"]["sessionId"] == "exp-1"
    kernel_runner.run_notebook(nb, tmp_path)
    assert nb.cells[2].outputs[0]["text"] == "total is 42\n"
    assert nb.cells[3].outputs[0]["text"] == "hello from bash\n"
    assert nb.cells[4].outputs[0]["ename"] == "ValueError"


# --------------------------------------------------------------------------- files


def test_write_export_keeps_existing_files(tmp_path: Path) -> None:
    log = sample_log()
    target = tmp_path / export_name("exp-1", "md")
    assert write_export(log, "md", target) == target
    target.write_text("my notes")
    with pytest.raises(ExportError, match="already exists; pass --force"):
        write_export(log, "md", target)
    assert target.read_text() == "my notes"
    write_export(log, "md", target, overwrite=True)
    assert target.read_text().startswith("# Sales")
    with pytest.raises(ExportError, match="unknown export format 'pdf'"):
        write_export(log, "pdf", tmp_path / "x.pdf")
    with pytest.raises(ExportError, match="does not exist"):
        write_export(log, "md", tmp_path / "missing" / "x.md")
    with pytest.raises(ExportError, match="is a folder"):
        write_export(log, "md", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary file left behind


# --------------------------------------------------------------------------- command line


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def _store(tmp_path: Path) -> JsonlStore:
    store = JsonlStore(tmp_path / "project" / ".dsh" / "sessions")
    for session_id in ("exp-1", "exp-2"):
        log = sample_log(session_id, title=f"title of {session_id}")
        written = SessionLog(log.header)
        with store.create(log.header) as writer:
            writer.attach(written)
            for event in log.events:
                written.append(event.type, event.data, time=event.time, surface_op=event.surface_op,
                               source_event_seqs=event.source_event_seqs)
    return store


def test_cli_exports_one_session_and_all(tmp_path: Path) -> None:
    store = _store(tmp_path)
    out_dir = tmp_path / "exports"
    code, out = _cli("sessions", "export", "exp-1", str(out_dir), "--to", "html", "--store", str(store.root))
    assert code == EXIT_OK and out == f"{out_dir / 'exp-1.html'}\n"
    assert "title of exp-1" in (out_dir / "exp-1.html").read_text()
    code, out = _cli("sessions", "export", "exp-2", str(out_dir), "--to", "md")  # found through the catalog
    assert code == EXIT_OK and (out_dir / "exp-2.md").read_text().startswith("# title of exp-2")
    code, out = _cli("sessions", "export", "--all", str(out_dir / "nb"), "--to", "ipynb", "--store", str(store.root))
    assert code == EXIT_OK and sorted(p.name for p in (out_dir / "nb").iterdir()) == ["exp-1.ipynb", "exp-2.ipynb"]
    code, _ = _cli("sessions", "export", "--all", str(out_dir / "nb"), "--to", "ipynb", "--store", str(store.root))
    assert code == EXIT_FAILED  # existing files are kept without --force
    code, _ = _cli("sessions", "export", "--all", str(out_dir / "nb"), "--to", "ipynb", "--store", str(store.root),
                   "--force")
    assert code == EXIT_OK


def test_cli_export_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    assert _cli("sessions", "export", str(tmp_path / "x"), "--to", "md", "--store", str(store.root))[0] == EXIT_USAGE
    assert "give the session ID to export, or --all" in capsys.readouterr().err
    code, _ = _cli("sessions", "export", "exp-1", str(tmp_path / "x"), "--all", "--to", "md")
    assert code == EXIT_USAGE
    assert _cli("sessions", "export", "exp-1", str(tmp_path / "x"), "--to", "pdf")[0] == EXIT_USAGE
    code, _ = _cli("sessions", "export", "nope", str(tmp_path / "x"), "--to", "md", "--store", str(store.root))
    assert code != EXIT_OK and "no session nope" in capsys.readouterr().err


# --------------------------------------------------------------------------- %dsh export on a real kernel

KERNEL_CELLS = [
    "%load_ext dsh_jupyter",
    "%%dsh\nplease compute <img src=x onerror=alert(1)>\n/python print(6 * 7)",
    "%dsh export --to md",
    "%dsh export --to ipynb -o run.ipynb",
    "%dsh export --to md",
    "%dsh export --to pdf",
    "%dsh export nosuchsession --to html",
]


@pytest.mark.slow
def test_kernel_dsh_export(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    import nbformat

    nb = kernel_runner.run(KERNEL_CELLS, tmp_path)

    def stream(index: int, name: str) -> str:
        return stream_text(nb.cells[index].outputs, name)

    md_files = list(tmp_path.glob("*.md"))
    assert len(md_files) == 1 and stream(2, "stdout").startswith("exported session ")
    md = md_files[0].read_text()
    assert "please compute &lt;img src=x onerror=alert(1)&gt;" in md
    assert re.search(r"(?<![\\])<img", md) is None  # only escaped: \<img in the title, &lt;img in the prompt
    assert "<summary>python: print(6 * 7)" in md
    exported = nbformat.read(tmp_path / "run.ipynb", as_version=4)
    code_cells = [c for c in exported.cells if c.cell_type == "code"]
    assert [c.source for c in code_cells] == ["print(6 * 7)"] and code_cells[0].outputs
    assert "already exists; pass --force" in stream(4, "stderr")
    assert "takes md, html or ipynb, got 'pdf'" in stream(5, "stderr")
    assert "no session matches 'nosuchsession'" in stream(6, "stderr")
    assert md_files[0].read_text() == md  # the refused export left the file as it was


def test_an_image_of_a_tool_result_is_mentioned_in_every_format() -> None:
    log = SessionLog(SessionHeader("exp-img", BASE, "/work"))
    log.append("turn/start", {"turn": 1})
    log.append("user/message", user_message("plot it"))
    image = {"type": "image", "artifact": "artifacts/" + "d" * 64 + ".png", "mediaType": "image/png",
             "width": 556, "height": 434, "bytes": 7012, "tool": "python"}
    block = {"type": "tool-call", "id": "c1", "name": "python", "arguments": "{}"}
    log.append("assistant/message", {"turn": 1, "step": 1, "message": assistant_message([block], MODEL)})
    seq = log.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "python", "arguments": "{}"}).seq
    log.append("tool/result", {"turn": 1, "step": 1, "message": tool_result_message(
        "c1", [text_block("<Figure size 640x480 with 1 Axes>"), image])}, source_event_seqs=[seq])
    log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    note = f"[image: PNG image, 556×434 pixels, 7,012 bytes (artifacts/{'d' * 64}.png)]"
    for fmt in ("md", "html", "ipynb"):
        assert note in render(log, fmt), fmt


def test_referenced_variables_are_named_in_markdown_and_html() -> None:
    log = SessionLog(SessionHeader("exp-vars", BASE, "/work"))
    log.append("turn/start", {"turn": 1})
    only_variables = {"kind": SESSION_REFERENCE_KIND, "form": "recall", "version": 1, "references": [],
                      "variables": [{"variable": "sales", "label": "sales", "type": "DataFrame",
                                     "brief": "DataFrame 6×3"}]}
    log.append("user/message", user_message([text_block("<referenced-sessions>SUMMARY</referenced-sessions>")],
                                            only_variables))
    log.append("user/message", user_message("which columns have nulls in @sales?"))
    log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    md = render(log, "md")
    assert "> *Referenced variables:* **sales** (DataFrame 6×3). *Their summaries are not included here.*" in md
    assert "Referenced sessions" not in md and "SUMMARY" not in md
    page = render(log, "html")
    assert '<div class="who">Referenced variables</div><div>Variables: <b>sales</b> (DataFrame 6×3).' in page
    assert "Referenced sessions" not in page


def test_an_export_masks_only_the_events_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunk rows, step markers and request records are most of a long log's events and show nothing: masking
    them was about a quarter of a big export's CPU. Only the types the transcript reads are masked (and shown)."""
    from dsh_jupyter.conversation.log_feed import FED_TYPES
    from dsh_jupyter.ui import export

    log = sample_log()
    plain = render(log, "md")
    log.append("turn/start", {"turn": 3})
    log.append("request/context", {"turn": 3, "step": 1, "messages": 4})
    log.append("step/start", {"turn": 3, "step": 1})
    log.append("assistant/chunk", {"turn": 3, "step": 1, "index": 0, "text": "par"})
    log.append("step/end", {"turn": 3, "step": 1})
    log.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    masked: list[str] = []
    real = export.mask_fields

    def counting(event: Any) -> Any:
        masked.append(event.type)
        return real(event)

    monkeypatch.setattr(export, "mask_fields", counting)
    text = render(log, "md")
    assert masked and set(masked) <= FED_TYPES, sorted(set(masked) - FED_TYPES)
    assert masked.count("turn/start") == 3
    assert text.count("### Prompt") == plain.count("### Prompt")
