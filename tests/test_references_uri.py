"""The dsh-session: URI codec: canonical encode, strict decode, and agreement with Node's own encoder."""

from __future__ import annotations

import base64
import itertools
import json
import random
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_jupyter.references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SessionReferenceError,
    decode_session_reference_uri,
    encode_session_reference_uri,
)

TRICKY_ID = 'unicode/引号"/slash\\/line\n'


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uri_of_json(text: str) -> str:
    return "dsh-session:" + b64url(text.encode("utf-8", "surrogatepass"))


def assert_invalid(uri: object) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as info:
        decode_session_reference_uri(uri)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
    return info.value


def test_empty_id_encodes_to_the_pinned_uri() -> None:
    assert encode_session_reference_uri("") == "dsh-session:IiI"
    assert decode_session_reference_uri("dsh-session:IiI") == ""


def test_tricky_id_round_trips() -> None:
    uri = encode_session_reference_uri(TRICKY_ID)
    assert uri == "dsh-session:" + b64url(json.dumps(TRICKY_ID, ensure_ascii=False).encode())
    assert "=" not in uri
    assert decode_session_reference_uri(uri) == TRICKY_ID


def test_lone_surrogates_are_written_as_escapes_and_round_trip() -> None:
    for session_id in ["\ud800", "a\udfffb", "\udc00\ud800", "x\ud83d"]:
        uri = encode_session_reference_uri(session_id)
        payload = base64.urlsafe_b64decode(uri.split(":", 1)[1] + "==").decode("ascii")
        assert "\\ud" in payload
        assert decode_session_reference_uri(uri) == session_id


def test_a_surrogate_pair_encodes_as_the_character_it_forms() -> None:
    assert encode_session_reference_uri("\ud83d\ude00") == encode_session_reference_uri("😀")


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.test",
        "DSH-SESSION:IiI",
        "dsh-session:",
        "dsh-session:IiI=",
        "dsh-session:Ii+I",
        "dsh-session:Ii/I",
        "dsh-session:I iI",
        "dsh-session:%22%22",
        "dsh-session:IiJ",  # non-zero trailing bits: decodes to "" but re-encodes to IiI
        "dsh-session:IiIA",  # payload length = 1 mod 4: Node drops the last char, canonical check rejects
        uri_of_json('{"id":"x"}'),  # not a string
        uri_of_json("1"),
        uri_of_json('"\\u0061"'),  # alternative escape of 'a'
        uri_of_json(' "a"'),  # JSON whitespace
        uri_of_json('"a" '),
        uri_of_json('"\\/"'),  # escaped slash
        uri_of_json('"\\ud83d\\ude00"'),  # escaped pair instead of the literal character
        uri_of_json('"\\u001F"'),  # uppercase hex
        "dsh-session:" + b64url(b'"\xff"'),  # invalid UTF-8
        "dsh-session:" + b64url(b"[" * 100_000),  # deep nesting must not escape as RecursionError
        encode_session_reference_uri("abc") + "#frag",
    ],
)
def test_non_canonical_uris_are_rejected(uri: str) -> None:
    error = assert_invalid(uri)
    assert "canonical session reference URI" in error.message


def test_errors_after_the_shape_check_keep_their_cause() -> None:
    assert assert_invalid("dsh-session:IiJ").cause is not None
    assert isinstance(assert_invalid(uri_of_json("1")).__cause__, ValueError)
    assert assert_invalid("nope").cause is None


def test_non_string_inputs_are_rejected() -> None:
    assert_invalid(None)
    assert_invalid(b"dsh-session:IiI")
    with pytest.raises(SessionReferenceError) as info:
        encode_session_reference_uri(12)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


# -- property tests ----------------------------------------------------------------------------------
SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
ANY_CHAR = st.one_of(st.characters(), SURROGATE, st.sampled_from(list('"\\/\n\r\t\x00\x1f\x7f\u2028\ufeff')))


def js_representable(text: str) -> bool:
    """No high surrogate directly before a low one (JavaScript would read that as one character)."""
    return not any(
        0xD800 <= ord(a) <= 0xDBFF and 0xDC00 <= ord(b) <= 0xDFFF for a, b in itertools.pairwise(text)
    )


@settings(max_examples=400, deadline=None)
@given(st.text(ANY_CHAR).filter(js_representable))
def test_property_decode_inverts_encode(session_id: str) -> None:
    uri = encode_session_reference_uri(session_id)
    assert decode_session_reference_uri(uri) == session_id


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-=+/%.", max_size=40))
def test_property_any_accepted_payload_is_canonical(payload: str) -> None:
    uri = "dsh-session:" + payload
    try:
        session_id = decode_session_reference_uri(uri)
    except SessionReferenceError as error:
        assert error.code == SESSION_REFERENCE_INVALID_REFERENCE
    else:
        assert encode_session_reference_uri(session_id) == uri


@settings(max_examples=300, deadline=None)
@given(st.text(ANY_CHAR, min_size=1).filter(js_representable), st.sampled_from(["ascii", "indent", "trail"]))
def test_property_other_json_spellings_are_rejected(session_id: str, spelling: str) -> None:
    canonical = encode_session_reference_uri(session_id)
    if spelling == "ascii":
        text = json.dumps(session_id, ensure_ascii=True)
    elif spelling == "indent":
        text = " " + json.dumps(session_id, ensure_ascii=False)
    else:
        text = json.dumps(session_id, ensure_ascii=False) + "\n"
    uri = uri_of_json(text)
    if uri == canonical:
        return  # the alternative spelling happens to be the canonical one (e.g. plain ASCII)
    assert_invalid(uri)


# -- differential test against Node ------------------------------------------------------------------
NODE = shutil.which("node") or "/usr/bin/node"
NODE_ENCODER = r"""
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const ids = JSON.parse(input);
  const uris = ids.map((id) => 'dsh-session:' + Buffer.from(JSON.stringify(id), 'utf8').toString('base64url'));
  process.stdout.write(JSON.stringify(uris));
});
"""


def generated_ids(count: int, seed: int = 20260919) -> list[str]:
    rng = random.Random(seed)
    pools = [
        [chr(c) for c in range(0x20)] + ["\x7f", "\x80", "\x9f", "\u2028", "\u2029", "\ufeff"],
        ['"', "\\", "/", "'", "`", "]", "[", "(", ")", "@", "<", ">", "&"],
        ["引", "号", "界", "é", "ß", "\u0301", "\u200b"],
        ["😀", "𝄞", "\U0010ffff", "\U00020000"],
        ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"],
        [chr(c) for c in range(0x20, 0x7F)],
    ]
    ids = ["", "a", TRICKY_ID, "\ud83d\ude00", "\ude00\ud83d"]
    while len(ids) < count:
        size = rng.choice([1, 2, 3, 5, 8, 13, 40])
        ids.append("".join(rng.choice(rng.choice(pools)) for _ in range(size)))
    return ids


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_differential_against_node_json_stringify_and_base64url() -> None:
    ids = generated_ids(10_000)
    # ASCII JSON with \u escapes keeps lone surrogates intact on the way to Node.
    result = subprocess.run(
        [NODE, "-e", NODE_ENCODER], input=json.dumps(ids, ensure_ascii=True), capture_output=True, text=True,
        timeout=60, check=True,
    )
    node_uris = json.loads(result.stdout)
    ours = [encode_session_reference_uri(i) for i in ids]
    mismatches = [(i, o, n) for i, o, n in zip(ids, ours, node_uris, strict=True) if o != n]
    assert len(node_uris) == len(ids)
    assert not mismatches, mismatches[:5]
    # Everything Node writes, we read back to the same id (JavaScript's view of it).
    from dsh_jupyter._json import js_string

    for session_id, uri in zip(ids, node_uris, strict=True):
        assert decode_session_reference_uri(uri) == js_string(session_id)
