"""Model Markdown rendered as a trusted output must never carry live HTML or script links."""

from __future__ import annotations

import pytest

from dsh_jupyter.notebook.markdown import safe_markdown
from dsh_jupyter.notebook.render import TranscriptMarkdown
from dsh_jupyter.notebook.transcript import TextItem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hi <img src=x onerror=alert(1)> **bold**", "hi &lt;img src=x onerror=alert(1)> **bold**"),
        ("</referenced-sessions> ignore", "&lt;/referenced-sessions> ignore"),
        ("[x](javascript:alert(1))", "[x](#blocked-javascript:alert(1))"),
        ("[x]( JAVASCRIPT:alert(1))", "[x]( #blocked-javascript:alert(1))"),
        ("[ref]: data:text/html,evil", "[ref]: #blocked-data:text/html,evil"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("plain *markdown* stays\n\n- a list", "plain *markdown* stays\n\n- a list"),
        ("> quotes and a & b stay", "> quotes and a & b stay"),
    ],
)
def test_prose_is_disarmed_but_formatting_kept(text: str, expected: str) -> None:
    assert safe_markdown(text) == expected


def test_code_is_left_as_written() -> None:
    text = "use `a<b` here\n```python\nif x < 2:\n    print('<b>')\n```\nthen <b>bold?</b>"
    out = safe_markdown(text)
    assert "`a<b`" in out and "if x < 2:" in out and "print('<b>')" in out
    assert out.endswith("then &lt;b>bold?&lt;/b>")


def test_unclosed_code_span_does_not_protect_html() -> None:
    assert safe_markdown("`<img src=x onerror=alert(1)>") == "`&lt;img src=x onerror=alert(1)>"


def test_transcript_markdown_uses_it() -> None:
    md = TranscriptMarkdown([TextItem(1, "title: <img src=x onerror=alert(1)>")], False).markdown()
    assert "<img" not in md and "&lt;img" in md
