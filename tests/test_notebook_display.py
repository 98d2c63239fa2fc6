"""Display bundles: reference-context metadata, the session table and a log location."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import pytest
from IPython.core.formatters import DisplayFormatter

from dsh_jupyter.notebook.display import (
    REFERENCE_CONTEXT_MIME,
    LocationDisplay,
    ReferenceContextDisplay,
    SessionTable,
    display_width,
    format_created,
    reference_summary,
)
from notebook_helpers import HOSTILE_LABELS, candidate


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


def test_json_bundle_shape_and_spill_paths() -> None:
    shown = ReferenceContextDisplay(two_sources(), target_session_id="target", spills={1: "/tmp/spill-2.txt"})
    data = shown._repr_mimebundle_()[REFERENCE_CONTEXT_MIME]
    assert list(data) == ["kind", "form", "version", "references", "targetSessionId"]
    assert (data["kind"], data["form"], data["version"], data["targetSessionId"]) == (
        "session-reference", "recall", 1, "target")
    first, second = data["references"]
    assert first["spillPath"] is None and second["spillPath"] == "/tmp/spill-2.txt"
    # every §1.12 field kept, in order, then spillPath
    assert list(second) == [*reference("x", "y", 0), "spillPath"]
    json.dumps(data)  # serialisable as is


def test_summary_counts() -> None:
    assert reference_summary(two_sources()) == "Referenced 2 sessions (1 compacted, 1 truncated)"
    assert reference_summary(source(reference("a", "a", 0))) == "Referenced 1 session"


def test_html_is_a_static_details_element_with_every_field() -> None:
    shown = ReferenceContextDisplay(two_sources(), target_session_id="t", spills={1: "/p/s.txt"})
    html = shown._repr_mimebundle_()["text/html"]
    assert html.startswith("<details") and html.rstrip().endswith("</details>")
    assert "<summary" in html and "Referenced 2 sessions (1 compacted, 1 truncated)" in html
    assert html.count("<table") == 2
    for needle in ("analysis one", "s-2", "captured through seq", "40", "2 of 4", "1234", "/p/s.txt", "compacted"):
        assert needle in html
    lowered = html.lower()
    assert "<script" not in lowered and "<link" not in lowered and "<style" not in lowered and "http" not in lowered


def test_plain_text_lists_each_source() -> None:
    shown = ReferenceContextDisplay(two_sources(), target_session_id="t", spills={1: None})
    plain = shown._repr_mimebundle_()["text/plain"]
    lines = plain.splitlines()
    assert lines[0] == "Referenced 2 sessions (1 compacted, 1 truncated)"
    assert lines[1] == ("  1. analysis one · id s-1 · seq 12 · compacted · 4 of 4 messages kept, 0 omitted · "
                        "0 bytes omitted · not truncated")
    assert lines[2] == ("  2. analysis two · id s-2 · seq 40 · not compacted · 2 of 4 messages kept, 2 omitted · "
                        "1234 bytes omitted · truncated · spill not saved")


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_hostile_values_are_text_in_every_form(label: str) -> None:
    hostile = source(reference(label, label, 0, truncated=True, omittedBytes=5))
    bundle = ReferenceContextDisplay(hostile, target_session_id=label, spills={0: label})._repr_mimebundle_()
    html, plain, data = bundle["text/html"], bundle["text/plain"], bundle[REFERENCE_CONTEXT_MIME]
    assert "<img" not in html and "</referenced-sessions>" not in html
    for text in (html, plain):
        assert "\x1b" not in text and "\x00" not in text
    if "\x1b" in label:
        assert "\\x1b[31mred\\x1b[0m" in plain and "\\x1b[31mred" in html
    if "\x00" in label:
        assert "nul\\x00byte" in plain and "nul\\x00byte" in html
    if "<img" in label:
        assert "&lt;img src=x onerror=alert(1)&gt;" in html and label in plain
    # The JSON keeps raw values: our renderer escapes them.
    assert data["references"][0]["label"] == label and data["targetSessionId"] == label
    assert data["references"][0]["spillPath"] == label


def test_newline_in_a_label_stays_on_one_line() -> None:
    shown = ReferenceContextDisplay(source(reference("id", "two\nlines", 0)), target_session_id="t")
    plain = shown._repr_mimebundle_()["text/plain"]
    assert "two\\x0alines" in plain and len(plain.splitlines()) == 2


def test_ipython_formatter_uses_the_bundle_and_honours_exclude() -> None:
    shown = ReferenceContextDisplay(two_sources(), target_session_id="t")
    data, _ = DisplayFormatter().format(shown)
    assert {REFERENCE_CONTEXT_MIME, "text/html", "text/plain"} <= set(data)
    assert set(shown._repr_mimebundle_(exclude={"text/html"})) == {REFERENCE_CONTEXT_MIME, "text/plain"}
    assert set(shown._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}


def test_missing_fields_render_as_dashes() -> None:
    old = {"kind": "session-reference", "version": 1, "references": [{"sessionId": "old", "label": "old"}]}
    bundle = ReferenceContextDisplay(old, target_session_id="t")._repr_mimebundle_()
    assert bundle[REFERENCE_CONTEXT_MIME]["form"] is None
    assert "seq — · ? compacted · — of — messages kept" in bundle["text/plain"]


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


# --------------------------------------------------------------------------- session table

def test_session_table_columns_and_alignment() -> None:
    rows = [
        candidate("id-1", "first", cwd="/work", same_workspace=True, created_at=1_700_000_000_000),
        candidate("id-22", "源会话", created_at=1_700_000_100_000),
    ]
    bundle = SessionTable(rows)._repr_mimebundle_()
    plain = bundle["text/plain"].splitlines()
    assert plain[0].split() == ["label", "id", "cwd", "created", "same", "workspace"]
    assert "✓" in plain[1] and "✓" not in plain[2]
    assert "—" in plain[2]  # no cwd
    # columns line up in display cells (the CJK label is 6 cells wide)
    assert display_width(plain[1][: plain[1].index("id-1")]) == display_width(plain[2][: plain[2].index("id-22")])
    assert format_created(1_700_000_000_000) in plain[1]
    html = bundle["text/html"]
    assert html.count("<tr>") == 3 and "<th" in html and "✓" in html


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


def test_a_notice_is_markdown_with_its_code_spans() -> None:
    from dsh_jupyter.notebook.display import NoticeDisplay

    bundle = NoticeDisplay(NOTICE)._repr_mimebundle_()
    assert bundle["text/markdown"] == "> " + NOTICE
    assert bundle["text/plain"] == NOTICE
    hostile = NoticeDisplay("a <img src=x onerror=alert(1)>\x1b\nsecond line")._repr_mimebundle_()
    assert hostile["text/markdown"] == "> a &lt;img src=x onerror=alert(1)>\\x1b\n> second line"
    with pytest.raises(ValueError, match="a notice must be a str"):
        NoticeDisplay(None)  # type: ignore[arg-type]


def test_a_notice_is_shown_once_per_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    from dsh_jupyter.notebook.display import show_notice

    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))

    class Owner:
        pass

    first, second = Owner(), Owner()
    assert show_notice(NOTICE, first) is True
    assert show_notice(NOTICE, first) is False
    assert show_notice(None, first) is False and show_notice("", first) is False
    assert show_notice(NOTICE, second) is True  # another kernel's extension
    assert [obj.text for obj in shown] == [NOTICE, NOTICE]
