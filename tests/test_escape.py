"""Escaping of untrusted text for notebook outputs: terminal controls and HTML."""

from __future__ import annotations

import pytest

from dsh_jupyter.escape import (
    HIDDEN_RANGES,
    escape_controls,
    escape_html,
    escape_text,
    hidden_characters,
    host_mention,
    html_field,
)
from dsh_jupyter.references.mentions import parse_session_reference_text
from dsh_jupyter.references.uri import encode_session_reference_uri


def test_reference_host_rule_on_the_pinned_id() -> None:
    # The reference terminal host's test: id `evil\x1b\x07\u009b\ns`, shown one-line.
    assert escape_controls("evil\x1b\x07\u009b\ns") == "evil\\x1b\\x07\\x9b\\x0as"


def test_every_c0_c1_and_del_is_replaced_with_two_lowercase_hex_digits() -> None:
    for code in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]:
        assert escape_controls(chr(code)) == f"\\x{code:02x}"
    assert escape_controls("\x1f\x9f") == "\\x1f\\x9f"  # lowercase hex


def test_printable_text_is_untouched() -> None:
    text = "plain ascii ~ é 源会话 \u00a0 \u2028 emoji 🙂 back\\slash"
    assert escape_controls(text) == text


def test_line_feed_kept_only_in_multi_line_mode() -> None:
    assert escape_controls("a\nb", one_line=False) == "a\nb"
    assert escape_controls("a\nb\tc\rd", one_line=False) == "a\nb\\x09c\\x0dd"
    assert escape_controls("a\nb") == "a\\x0ab"


def test_escape_text_keeps_tabs_and_normalises_crlf() -> None:
    assert escape_text("x\r\n\ty\x1b[2J\rz\x00") == "x\n\ty\\x1b[2J\\x0dz\\x00"


def test_html_escaping_covers_markup_and_quotes() -> None:
    assert escape_html("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert escape_html("\"'&") == "&quot;&#x27;&amp;"


def test_html_field_escapes_controls_then_markup() -> None:
    assert html_field("<b>\x1b[31m</b>\n") == "&lt;b&gt;\\x1b[31m&lt;/b&gt;\\x0a"
    assert html_field("a\nb", one_line=False) == "a\nb"


@pytest.mark.parametrize("bad", [None, 3, b"bytes"])
def test_non_text_is_a_clear_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="needs a str"):
        escape_controls(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a str"):
        escape_text(bad)  # type: ignore[arg-type]


def test_host_mention_escapes_the_label_and_keeps_the_real_id() -> None:
    session_id = "evil\x1b\x07\u009b\ns"
    mention = host_mention({"sessionId": session_id, "label": session_id})
    assert mention == f"@[evil\\\\x1b\\\\x07\\\\x9b\\\\x0as]({encode_session_reference_uri(session_id)})"
    parsed = parse_session_reference_text(f"see {mention}")
    # As in the reference host: readable text has literal backslashes; the reference keeps the id.
    assert parsed.text == "see @evil\\x1b\\x07\\x9b\\x0as"
    assert parsed.references[0].session_id == session_id


def test_host_mention_label_defaults_to_id_and_escapes_brackets() -> None:
    assert host_mention({"sessionId": "abc"}) == f"@[abc]({encode_session_reference_uri('abc')})"
    assert host_mention({"sessionId": "x", "label": "源]会话"}).startswith("@[源\\]会话](")


def test_host_mention_rejects_a_candidate_without_an_id() -> None:
    with pytest.raises(ValueError, match="sessionId"):
        host_mention({"label": "no id"})


#: Neighbours of a joiner, one of each kind the rule tells apart: letters (Latin beyond ASCII, CJK, astral, a lone
#: surrogate) and what is no letter (ASCII, a C1 control, Unicode spaces, hidden characters, the other joiner).
_NEIGHBOURS = ["a", "é", "源", "\U0001f600", "\ud800", " ", "1", "\x85", "\u00a0", "\u2003", "\u3000", "\u2028",
               "\u200b", "\u202e", "\U000e0041", "\u200c", "\u200d"]


def _is_letter(char: str) -> bool:
    """The joiner rule's letter, written out: no ASCII or C1 control, no Unicode space, no hidden character."""
    point = ord(char)
    spaces = {0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, *range(0x2000, 0x200B)}
    return point > 0x9F and point not in spaces and not any(a <= point <= b for a, b, _ in HIDDEN_RANGES)


def _marked_by_the_rule(text: str) -> list[str]:
    """The hidden characters the rule marks, written out one position at a time: every hidden character, except a
    joiner with a letter on each side (the start and the end of the text are no letters)."""
    codes = []
    for at, char in enumerate(text):
        if not any(a <= ord(char) <= b for a, b, _ in HIDDEN_RANGES):
            continue
        if char in "\u200c\u200d" and 0 < at < len(text) - 1 and _is_letter(text[at - 1]) and _is_letter(text[at + 1]):
            continue
        codes.append(f"U+{ord(char):04X}")
    return codes


@pytest.mark.parametrize("joiner", ["\u200c", "\u200d"])
def test_a_joiner_is_marked_unless_it_joins_two_letters(joiner: str) -> None:
    assert [c.code for c in hidden_characters("می" + joiner + "خواهم")] == []  # Persian joins its letters so
    assert [c.code for c in hidden_characters("a" + joiner + "b")] == [f"U+{ord(joiner):04X}"]  # ASCII never does
    for left in ["", *_NEIGHBOURS]:
        for right in ["", *_NEIGHBOURS]:
            for text in (left + joiner + right, "x" + left + joiner + right + "y"):
                assert [c.code for c in hidden_characters(text)] == _marked_by_the_rule(text), repr(text)
