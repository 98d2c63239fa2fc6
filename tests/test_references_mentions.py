"""Mentions: @[label](uri) formatting and the exact parse grammar (Markdown first, then bare URIs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_jupyter.references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SessionReferenceError,
    SessionReferenceInput,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)
from dsh_jupyter.references.mentions import JS_WHITESPACE

TRICKY_ID = 'unicode/引号"/slash\\/line\n'
URI = encode_session_reference_uri(TRICKY_ID)


def refs(*pairs: tuple[str, str]) -> list[SessionReferenceInput]:
    return [SessionReferenceInput(s, label) for s, label in pairs]


def assert_rejected(text: str) -> None:
    with pytest.raises(SessionReferenceError) as info:
        parse_session_reference_text(text)
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


def test_mentions_and_bare_uris_become_readable_labels() -> None:
    mention = format_session_reference_mention(SessionReferenceInput(TRICKY_ID, "源]会话"))
    assert mention == f"@[源\\]会话]({URI})"
    parsed = parse_session_reference_text(f"compare {mention} and {URI}")
    assert parsed.text == f"compare @源]会话 and @{TRICKY_ID}"
    assert parsed.references == refs((TRICKY_ID, "源]会话"), (TRICKY_ID, TRICKY_ID))


def test_label_less_mention_escapes_only_backslash_and_closing_bracket() -> None:
    session_id = "a\\b]c[d(e)f\ng\x07"
    mention = format_session_reference_mention(session_id)
    assert mention.startswith("@[a\\\\b\\]c[d(e)f\ng\x07](")
    assert parse_session_reference_text(mention).references == refs((session_id, session_id))


def test_format_accepts_mappings_and_explicit_labels() -> None:
    expected = f"@[L]({encode_session_reference_uri('x')})"
    assert format_session_reference_mention({"sessionId": "x", "label": "L"}) == expected
    assert format_session_reference_mention("x", "") == f"@[]({encode_session_reference_uri('x')})"
    with pytest.raises(SessionReferenceError):
        format_session_reference_mention({"sessionId": 3})
    with pytest.raises(SessionReferenceError):
        format_session_reference_mention("x", 5)  # type: ignore[arg-type]


def test_punctuation_after_a_bare_uri_stays_text() -> None:
    parsed = parse_session_reference_text(f"see {URI}. and `{URI}`")
    assert parsed.text == f"see @{TRICKY_ID}. and `@{TRICKY_ID}`"
    assert parsed.references == refs((TRICKY_ID, TRICKY_ID), (TRICKY_ID, TRICKY_ID))


@pytest.mark.parametrize("text",
                         ["what is a dsh-session: URI?", "see dsh-session:%%%", "dsh-session:", "dsh-session:)"])
def test_scheme_without_a_payload_is_plain_text(text: str) -> None:
    parsed = parse_session_reference_text(text)
    assert parsed.text == text and parsed.references == []


@pytest.mark.parametrize(
    "text",
    [
        "see dsh-session:IiJ",
        "@[bad](dsh-session:%%%)",
        "@[bad](dsh-session:not-canonical)",
        "@[bad](dsh-session:)",  # empty payload in an explicit mention
        f"@[a]({encode_session_reference_uri('x')}#frag)",  # fragments are part of the URI
        f"{URI}-",  # a trailing '-' is absorbed into the bare payload
        f"{URI}_",
    ],
)
def test_malformed_references_fail_the_whole_parse(text: str) -> None:
    assert_rejected(text)


def test_fallback_to_the_bare_form_inside_a_failed_markdown_mention() -> None:
    uri = encode_session_reference_uri("x")
    # A backslash-newline cannot be in a label, so the Markdown form fails and the bare URI matches.
    parsed = parse_session_reference_text(f"@[a\\\n]({uri})")
    assert parsed.text == "@[a\\\n](@x)"
    assert parsed.references == refs(("x", "x"))
    # A space inside the parentheses: the bare URI stops at the space and is decoded on its own.
    assert_rejected("@[a](dsh-session:X Y)")
    parsed = parse_session_reference_text(f"@[a]({uri} tail)")
    assert parsed.text == "@[a](@x tail)"


def test_escapes_run_on_to_the_next_closing_bracket() -> None:
    uri1, uri2 = encode_session_reference_uri("one"), encode_session_reference_uri("two")
    parsed = parse_session_reference_text(f"@[a\\]({uri1}) and @[b]({uri2})")
    assert parsed.references == refs(("two", f"a]({uri1}) and @[b"))
    assert parsed.text == f"@a]({uri1}) and @[b"


def test_raw_newline_and_brackets_are_allowed_in_labels_and_empty_labels_are_kept() -> None:
    uri = encode_session_reference_uri("x")
    assert parse_session_reference_text(f"@[two\nlines [x]({uri})").references == refs(("x", "two\nlines [x"))
    parsed = parse_session_reference_text(f"@[]({uri})")
    assert parsed.text == "@" and parsed.references == refs(("x", ""))


def test_no_word_boundary_before_a_bare_uri_and_duplicates_are_kept() -> None:
    uri = encode_session_reference_uri("x")
    parsed = parse_session_reference_text(f"x{uri} {uri}")
    assert parsed.text == "x@x @x"
    assert parsed.references == refs(("x", "x"), ("x", "x"))


@pytest.mark.parametrize(
    "space", list("\t\n\u000b\u000c\r \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"))
def test_javascript_whitespace_ends_a_markdown_uri(space: str) -> None:
    uri = encode_session_reference_uri("x")
    # The Markdown form cannot contain the space; the bare URI before it is parsed instead.
    parsed = parse_session_reference_text(f"@[L]({uri}{space})")
    assert parsed.references == refs(("x", "x"))


@pytest.mark.parametrize("not_space", ["\u0085", "\u180e", "\u200b"])
def test_characters_outside_javascript_whitespace_stay_in_a_markdown_uri(not_space: str) -> None:
    uri = encode_session_reference_uri("x")
    assert_rejected(f"@[L]({uri}{not_space})")


def test_whitespace_class_matches_javascript() -> None:
    import re

    klass = re.compile("[" + JS_WHITESPACE + "]")
    expected = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
                0x202F, 0x205F, 0x3000, 0xFEFF}
    assert {c for c in range(0x10000) if klass.match(chr(c))} == expected


def test_result_serialises_to_the_reference_shape() -> None:
    uri = encode_session_reference_uri("x")
    assert parse_session_reference_text(f"@[L]({uri})").to_json() == {
        "text": "@L", "references": [{"sessionId": "x", "label": "L"}]
    }


def test_non_string_text_is_rejected() -> None:
    with pytest.raises(SessionReferenceError):
        parse_session_reference_text(None)  # type: ignore[arg-type]


PIECES = st.sampled_from(
    ["@[", "]", "](", ")", "\\", "\n", " ", "dsh-session:", "dsh-session:IiI", "dsh-session:IiJ", URI,
     "#", "%", "-", "_", "\ufeff", "\ud800", "=", "a"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=12))
def test_property_parser_raises_only_session_reference_errors(parts: list[str]) -> None:
    text = "".join(parts)
    try:
        parsed = parse_session_reference_text(text)
    except SessionReferenceError as error:
        assert error.code == SESSION_REFERENCE_INVALID_REFERENCE
    else:
        assert all(isinstance(r.session_id, str) and isinstance(r.label, str) for r in parsed.references)
        if "dsh-session:" not in text:
            assert parsed.text == text and parsed.references == []


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_property_formatted_mentions_parse_back(session_id: str, label: str) -> None:
    from dsh_jupyter._json import js_string

    session_id = js_string(session_id)
    mention = format_session_reference_mention(session_id, label)
    parsed = parse_session_reference_text(mention)
    assert parsed.references == refs((session_id, label))
    assert parsed.text == "@" + label
