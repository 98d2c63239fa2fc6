"""Display bundles: reference-context metadata, the session table and a log location."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import pytest
from IPython.core.formatters import DisplayFormatter
from notebook_helpers import HOSTILE_LABELS, block_markup, candidate

from dsh_jupyter.ui.display import (
    REFERENCE_CONTEXT_MIME,
    LocationDisplay,
    ReferenceContextDisplay,
    SessionTable,
    display_width,
    format_captured,
    format_created,
    reference_summary,
)


def reference(session_id: str, label: str, index: int, **overrides: Any) -> dict[str, Any]:
    data = {
        "sessionId": session_id,
        "label": label,
        "capturedFormatVersion": 1,
        "capturedThroughSeq": 12,
        "compacted": False,
        "originalMessages": 4,
        "retainedMessages": 4,
        "omittedMessages": 0,
        "omittedBytes": 0,
        "truncated": False,
        "inputIndex": index,
    }
    data.update(overrides)
    return data


def source(*references: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "session-reference", "form": "recall", "version": 1, "references": list(references)}


def two_sources() -> dict[str, Any]:
    return source(
        reference("s-1", "analysis one", 0, compacted=True),
        reference("s-2", "analysis two", 1, capturedThroughSeq=40, retainedMessages=2, omittedMessages=2,
                  omittedBytes=1234, truncated=True),
    )


CAPTURED = 1_787_000_000.0


def shown(metadata: dict[str, Any], **options: Any) -> ReferenceContextDisplay:
    options.setdefault("target_session_id", "target")
    options.setdefault("captured_at", CAPTURED)
    return ReferenceContextDisplay(metadata, **options)


def test_json_bundle_keeps_raw_values_and_carries_the_view() -> None:
    data = shown(two_sources(), spills={1: "/tmp/spill-2.txt"})._repr_mimebundle_()[REFERENCE_CONTEXT_MIME]
    assert list(data) == ["kind", "form", "version", "references", "targetSessionId", "capturedAt", "view"]
    assert (data["kind"], data["form"], data["version"], data["targetSessionId"]) == (
        "session-reference", "recall", 1, "target")
    assert datetime.fromisoformat(data["capturedAt"]).timestamp() == CAPTURED
    first, second = data["references"]
    assert first["spillPath"] is None and second["spillPath"] == "/tmp/spill-2.txt"
    # every §1.12 field kept, in order, then spillPath
    assert list(second) == [*reference("x", "y", 0), "spillPath"]
    assert list(data["view"]) == ["line", "sources", "preview"]
    json.dumps(data)  # serialisable as is


def test_the_one_line_summary() -> None:
    one = source(reference("sales-4", "Regional sales Q3", 0, retainedMessages=2, originalMessages=2))
    assert reference_summary(one) == "Referenced: Regional sales Q3 · 2 messages · complete"
    assert reference_summary(two_sources()) == (
        "Referenced: analysis one, analysis two · 6 messages · 1 of 2 shortened to fit · includes a summary")
    cut = source(reference("a", "a", 0, retainedMessages=1, omittedMessages=3, truncated=True))
    assert reference_summary(cut) == "Referenced: a · 1 message · shortened to fit"
    many = source(*(reference(f"s{n}", "x" * 60 if n == 0 else f"title {n}", n) for n in range(5)))
    assert reference_summary(many) == (f"Referenced: {'x' * 47}…, title 1, title 2 and 2 more · 20 messages · complete")
    assert reference_summary(source()) == "Referenced: no sessions"
    assert reference_summary(source({"sessionId": "old", "label": "old"})) == "Referenced: old · complete"


def test_each_source_in_plain_words() -> None:
    view = shown(two_sources(), spills={1: "/p/s.txt"}).view()
    first, second = view["sources"]
    assert (first["title"], first["state"]) == ("analysis one", "complete, includes a summary")
    captured = format_captured(CAPTURED)
    assert first["rows"] == [
        ["Session id", "s-1"],
        ["Captured", captured],
        ["Messages", "4 messages sent to the agent"],
        ["Earlier conversation", "sent as the summary written when that session was compacted"],
        ["Left out", "nothing"],
    ]
    assert (second["title"], second["state"]) == ("analysis two", "shortened to fit")
    assert second["rows"] == [
        ["Session id", "s-2"],
        ["Captured", captured],
        ["Messages", "2 of 4 messages sent to the agent"],
        ["Left out", "2 older messages and 1,234 bytes of long messages (to fit the budget)"],
        ["Full snapshot", "saved at /p/s.txt"],
    ]
    not_saved = shown(two_sources(), spills={1: None}).view()["sources"][1]["rows"][-1]
    assert not_saved == ["Full snapshot", "not saved (the notebook's session folder could not be written)"]
    empty = shown(source(reference("e", "empty", 0, capturedThroughSeq=None, retainedMessages=0,
                                   originalMessages=0))).view()["sources"][0]["rows"]
    assert ["Captured", f"{captured} (the session had no messages yet)"] in empty
    assert ["Messages", "0 messages sent to the agent"] in empty


def test_html_and_plain_text_say_the_same_words() -> None:
    display = shown(two_sources(), spills={1: "/p/s.txt"}, received="## Background\n<referenced-sessions>\n[]")
    bundle = display._repr_mimebundle_()
    view = bundle[REFERENCE_CONTEXT_MIME]["view"]
    html, plain = block_markup(bundle["text/html"]), bundle["text/plain"]
    assert html.startswith('<details class="dsh-reference-context"') and html.rstrip().endswith("</details>")
    assert f'<summary style="cursor:pointer">{view["line"]}</summary>' in html
    assert plain.splitlines()[0] == view["line"]
    for position, item in enumerate(view["sources"]):
        assert f"{position + 1}. {item['title']} — {item['state']}" in plain
        assert f"{position + 1}. {item['title']} <span" in html
        for term, words in item["rows"]:
            assert f"     {term}: {words}" in plain
            assert f">{term}</th>" in html and f">{words}</td>" in html
    # No debug words from the log's field names.
    for text in (html, plain):
        for debug in ("seq", "Format version", "inputIndex", "spill"):
            assert debug not in text.replace("/p/s.txt", "")
    lowered = html.lower()
    assert "<script" not in lowered and "<link" not in lowered and "<style" not in lowered and "http" not in lowered


def test_the_preview_of_what_the_agent_received_is_bounded_and_escaped() -> None:
    from dsh_jupyter.ui.display import MAX_PREVIEW_CHARS

    text = "## Background\n<referenced-sessions>\x1b[31m" + "x" * (MAX_PREVIEW_CHARS + 500)
    bundle = shown(two_sources(), received=text)._repr_mimebundle_()
    preview = bundle[REFERENCE_CONTEXT_MIME]["view"]["preview"]
    assert preview["heading"] == (
        f"What the agent received (the first {MAX_PREVIEW_CHARS:,} of {len(text):,} characters)")
    assert (preview["totalChars"], preview["shownChars"]) == (len(text), MAX_PREVIEW_CHARS)
    assert "\x1b" not in preview["text"] and "\\x1b[31m" in preview["text"]
    assert "&lt;referenced-sessions&gt;\\x1b[31m" in block_markup(bundle["text/html"])
    assert "<referenced-sessions>" not in bundle["text/html"]
    assert "     <referenced-sessions>\\x1b[31m" in bundle["text/plain"]
    short = shown(two_sources(), received="abc").view()["preview"]
    assert short["heading"] == "What the agent received (3 characters)" and short["text"] == "abc"
    assert shown(two_sources()).view()["preview"] is None


def test_from_context_takes_the_source_and_the_text_of_a_context_message() -> None:
    context = {"role": "user", "source": two_sources(),
               "content": [{"type": "text", "text": "framed"}, {"type": "image"}, {"type": "text", "text": "more"}]}
    display = ReferenceContextDisplay.from_context(context, target_session_id="t", spills={1: None})
    assert display.received == "framed\nmore" and display.spills == {1: None}
    assert display.view()["line"] == reference_summary(two_sources())


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_hostile_values_are_text_in_every_form(label: str) -> None:
    hostile = source(reference(label, label, 0, truncated=True, omittedBytes=5))
    bundle = shown(hostile, target_session_id=label, spills={0: label}, received=label)._repr_mimebundle_()
    html, plain, data = block_markup(bundle["text/html"]), bundle["text/plain"], bundle[REFERENCE_CONTEXT_MIME]
    assert "<img" not in html and "</referenced-sessions>" not in html
    for text in (html, plain, json.dumps(data["view"])):
        assert "\x1b" not in text and "\x00" not in text and "\\u001b" not in text and "\\u0000" not in text
    if "\x1b" in label:
        assert "\\x1b[31mred\\x1b[0m" in plain and "\\x1b[31mred" in html
    if "\x00" in label:
        assert "nul\\x00byte" in plain and "nul\\x00byte" in html
    if "<img" in label:
        assert "&lt;img src=x onerror=alert(1)&gt;" in html and label in plain
    # The raw fields keep raw values (a renderer escapes them); the view's words are escaped already.
    assert data["references"][0]["label"] == label and data["targetSessionId"] == label
    assert data["references"][0]["spillPath"] == label


def test_newline_in_a_label_stays_on_one_line() -> None:
    plain = shown(source(reference("id", "two\nlines", 0)))._repr_mimebundle_()["text/plain"]
    assert "two\\x0alines" in plain.splitlines()[0] and "1. two\\x0alines — complete" in plain


def test_ipython_formatter_uses_the_bundle_and_honours_exclude() -> None:
    display = shown(two_sources(), target_session_id="t")
    data, _ = DisplayFormatter().format(display)
    assert {REFERENCE_CONTEXT_MIME, "text/html", "text/plain"} <= set(data)
    assert set(display._repr_mimebundle_(exclude={"text/html"})) == {REFERENCE_CONTEXT_MIME, "text/plain"}
    assert set(display._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}
    assert repr(display) == data["text/plain"]


def test_missing_fields_are_left_out_not_dashed() -> None:
    old = {"kind": "session-reference", "version": 1, "references": [{"sessionId": "old", "label": "old"}]}
    bundle = shown(old, target_session_id="t")._repr_mimebundle_()
    assert bundle[REFERENCE_CONTEXT_MIME]["form"] is None
    assert bundle["text/plain"].splitlines() == [
        "Referenced: old · complete", "  1. old — complete", "     Session id: old",
        f"     Captured: {format_captured(CAPTURED)}", "     Left out: nothing"]


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (None, "must be a dict"),
        ({"kind": "session-reference"}, "'references' list"),
        ({"references": "nope"}, "'references' list"),
        ({"references": [3]}, "reference 0 .* must be a dict"),
    ],
)
def test_bad_metadata_is_a_clear_error(metadata: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReferenceContextDisplay(metadata, target_session_id="t")


def test_bad_spills_and_target_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="inputIndex"):
        ReferenceContextDisplay(two_sources(), target_session_id="t", spills={"0": "/x"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="spill path for reference 0"):
        ReferenceContextDisplay(two_sources(), target_session_id="t", spills={0: 5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="target_session_id"):
        ReferenceContextDisplay(two_sources(), target_session_id=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="received must be the context's text"):
        ReferenceContextDisplay(two_sources(), target_session_id="t", received=3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- session table

def test_session_table_columns_and_alignment() -> None:
    rows = [
        candidate("id-1", "first", cwd="/work", same_workspace=True, created_at=1_700_000_000_000),
        candidate("id-22", "源会话", created_at=1_700_000_100_000),
    ]
    bundle = SessionTable(rows)._repr_mimebundle_()
    plain = bundle["text/plain"].splitlines()
    assert plain[0].split() == ["label", "notebook", "id", "cwd", "created", "same", "workspace"]
    assert "✓" in plain[1] and "✓" not in plain[2]
    assert "—" in plain[2]  # no cwd
    # columns line up in display cells (the CJK label is 6 cells wide)
    assert display_width(plain[1][: plain[1].index("id-1")]) == display_width(plain[2][: plain[2].index("id-22")])
    assert format_created(1_700_000_000_000) in plain[1]
    html = bundle["text/html"]
    assert html.count("<tr>") == 3 and "<th" in html and "✓" in html


def test_session_table_names_each_sessions_notebook() -> None:
    rows = [{**candidate("id-1", "Load the data"), "notebook": "reports/q3.ipynb"},
            {**candidate("id-2", "Load the data — b.ipynb"), "notebook": "b.ipynb"}, candidate("id-3", "old")]
    bundle = SessionTable(rows)._repr_mimebundle_()
    plain = bundle["text/plain"].splitlines()
    assert "q3.ipynb" in plain[1] and "reports/" not in plain[1]
    assert plain[2].count("b.ipynb") == 2 and "—" in plain[3]
    assert "<td" in bundle["text/html"] and "q3.ipynb</td>" in bundle["text/html"]


def test_current_session_is_marked() -> None:
    rows = [{**candidate("id-1", "mine"), "current": True}, {**candidate("id-2", "other"), "current": False}]
    bundle = SessionTable(rows)._repr_mimebundle_()
    plain = bundle["text/plain"].splitlines()
    assert "mine (current)" in plain[1] and "(current)" not in plain[2]
    assert bundle["text/html"].count("(current)") == 1


def test_created_is_iso_local_time() -> None:
    created = format_created(1_700_000_000_000)
    assert datetime.fromisoformat(created).timestamp() == 1_700_000_000
    assert format_created(None) == "" and format_created(True) == "" and format_created(1e30) == ""


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_session_table_escapes_hostile_values(label: str) -> None:
    bundle = SessionTable([candidate(label, label, cwd=label)])._repr_mimebundle_()
    assert "<img" not in bundle["text/html"]
    for text in (bundle["text/html"], bundle["text/plain"]):
        assert "\x1b" not in text and "\x00" not in text
    assert bundle["application/vnd.dsh.sessions+json"]["sessions"][0]["label"] == label


def test_empty_and_bad_session_tables() -> None:
    assert SessionTable([])._repr_mimebundle_()["text/plain"] == "No sessions."
    with pytest.raises(ValueError, match="list of session dicts"):
        SessionTable("nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="row 1 has no string 'sessionId'"):
        SessionTable([candidate("a"), {"label": "x"}])


# --------------------------------------------------------------------------- location

def test_location_is_a_path_and_escapes(tmp_path: Any) -> None:
    log = tmp_path / "a\x1b.jsonl"
    shown = LocationDisplay("jsonl", log, session_id="<s>")
    assert os.fspath(shown) == str(log) and shown.path == str(log) and shown.kind == "jsonl"
    bundle = shown._repr_mimebundle_()
    assert "\\x1b" in bundle["text/plain"] and "&lt;s&gt;" in bundle["text/html"]
    with pytest.raises(ValueError, match="kind must be a str"):
        LocationDisplay(None, log)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- notices

NOTICE = ("Using the offline model (no API key needed). To use DeepSeek, set DEEPSEEK_API_KEY; "
          "or pick another model with --model (`%dsh models` lists them).")


def test_a_notice_is_rendered_markdown_with_its_code_spans() -> None:
    from dsh_jupyter.ui.display import NoticeDisplay

    bundle = NoticeDisplay(NOTICE)._repr_mimebundle_()
    assert "text/markdown" not in bundle
    quoted = block_markup(bundle["text/html"])
    assert quoted.startswith('<blockquote class="dsh-notice">') and "<code>%dsh models</code>" in quoted
    assert bundle["text/plain"] == NOTICE
    hostile = NoticeDisplay("a <img src=x onerror=alert(1)>\x1b\nsecond line")._repr_mimebundle_()
    assert "<p>a &lt;img src=x onerror=alert(1)&gt;\\x1b\nsecond line</p>" in block_markup(hostile["text/html"])
    with pytest.raises(ValueError, match="a notice must be a str"):
        NoticeDisplay(None)  # type: ignore[arg-type]


def test_a_notice_is_shown_once_per_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    from dsh_jupyter.ui.display import show_notice

    displayed: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", displayed.append)

    class Owner:
        pass

    first, second = Owner(), Owner()
    assert show_notice(NOTICE, first) is True
    assert show_notice(NOTICE, first) is False
    assert show_notice(None, first) is False and show_notice("", first) is False
    assert show_notice(NOTICE, second) is True  # another kernel's extension
    assert [obj.text for obj in displayed] == [NOTICE, NOTICE]


# --------------------------------------------------------------------------- one wording, both sides

def test_the_jupyterlab_renderer_draws_the_words_python_made() -> None:
    """The bundle Python writes, read by the compiled ``labextension/lib/context.js``: the same view."""
    import shutil
    import subprocess
    from pathlib import Path

    node = shutil.which("node")
    context_js = Path(__file__).resolve().parents[1] / "labextension" / "lib" / "context.js"
    if node is None or not context_js.is_file():
        pytest.skip("node or the built labextension/lib is missing (run `jlpm build` in labextension/)")
    hostile = reference("evil", "\x1b[31mred <b>", 2, truncated=True, omittedBytes=70, retainedMessages=3)
    display = shown(source(*two_sources()["references"], hostile), spills={1: "/p/s.txt", 2: None},
                    received="## Background\n<referenced-sessions>\x07\n[]")
    data = display._repr_mimebundle_()[REFERENCE_CONTEXT_MIME]
    script = ("import { referenceView } from " + json.dumps(context_js.as_uri()) + ";\n"
              "let input = ''; process.stdin.on('data', d => { input += d; });\n"
              "process.stdin.on('end', () => {\n"
              "  process.stdout.write(JSON.stringify(referenceView(JSON.parse(input))));\n"
              "});")
    result = subprocess.run([node, "--input-type=module", "-e", script], input=json.dumps(data), check=True,
                            capture_output=True, text=True, timeout=60)
    drawn = json.loads(result.stdout)
    view = data["view"]
    assert drawn["line"] == view["line"]
    assert drawn["sources"] == view["sources"]
    assert drawn["preview"] == {"heading": view["preview"]["heading"], "text": view["preview"]["text"]}


def test_what_the_agent_received_is_shown_readably() -> None:
    from dsh_jupyter.references.framing import render_prompt, tag_safe_dumps
    from dsh_jupyter.ui.display import readable_context

    entry = {"sessionId": "s-1", "label": "Files", "conversation": [
        {"role": "assistant", "text": "Put `/bash <command>` on a line.\nThen run it."}]}
    received = render_prompt([tag_safe_dumps(entry)])
    assert "\\u003c" in received  # what the model gets: tag-safe JSON
    readable = readable_context(received)
    assert "\\u003c" not in readable and "\\n" not in readable
    assert "\n        Put `/bash <command>` on a line.\n        Then run it.\n" in readable
    assert "label: Files" in readable and readable.rstrip().endswith("</referenced-sessions>")
    broken = "<referenced-sessions>[{not json</referenced-sessions>"
    assert readable_context(broken) == broken
    preview = shown(two_sources(), received=received).view()["preview"]
    assert "&lt;command>" not in preview["text"] and "<command>" in preview["text"]
    html = shown(two_sources(), received=received)._repr_mimebundle_()["text/html"]
    assert "u003c" not in html and "&lt;command&gt;" in html


def test_the_cost_column_sits_beside_the_tool_column_and_only_when_a_cost_is_known() -> None:
    ours = {"sessionId": "s-1", "label": "Ours", "createdAt": 0, "sameWorkspace": False,
            "cost": {"usd": 1.5, "pricedCalls": 2, "unpricedCalls": 0, "text": "$1.50"}}
    theirs = {"sessionId": "t-1", "label": "Theirs", "createdAt": 0, "sameWorkspace": True, "tool": "Codex"}
    plain = SessionTable([ours, theirs])._repr_mimebundle_()["text/plain"].splitlines()
    assert plain[0].split() == ["label", "tool", "notebook", "id", "cwd", "created", "cost", "same", "workspace"]
    assert plain[1].rstrip().endswith("$1.50") and "Codex" in plain[2] and "$" not in plain[2]
    bad = {**theirs, "cost": {"usd": "lots", "pricedCalls": 1, "unpricedCalls": 0, "text": "$9"}}
    assert "cost" not in SessionTable([bad])._repr_mimebundle_()["text/plain"].splitlines()[0].split()
