"""Path encodings and the default store root (§3.1 and §8 vectors)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_jupyter._json import js_string
from dsh_jupyter.store import decode_segment, default_sessions_dir, encode_segment, project_key
from dsh_jupyter.store.paths import MAX_SEGMENT, session_folder_name


@pytest.mark.parametrize(
    ("session_id", "expected"),
    [
        ("a/b", "a~002Fb"),
        ("/etc/passwd", "~002Fetc~002Fpasswd"),
        ("a~b", "a~007Eb"),
        ("\ud800", "~D800"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("../../etc/pwn", "..~002F..~002Fetc~002Fpwn"),
        ("a\x00b", "a~0000b"),
        ("b3c1d7a2-5f0e-4c8a-9d61-2e7f40a18c55", "b3c1d7a2-5f0e-4c8a-9d61-2e7f40a18c55"),
        ("A.z_0-9", "A.z_0-9"),
        ("...", "..."),
        ("开", "~5F00"),
        ("😀", "~D83D~DE00"),  # an astral character is two UTF-16 code units
        ("a b", "a~0020b"),
    ],
)
def test_encode_segment_vectors(session_id: str, expected: str) -> None:
    assert encode_segment(session_id) == expected
    assert decode_segment(expected) == session_id


def test_encode_segment_rejects_empty_and_non_strings() -> None:
    with pytest.raises(ValueError, match="empty"):
        encode_segment("")
    with pytest.raises(TypeError):
        encode_segment(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["a/b", "~002e", "~00", "~0041", "a~7E", "", "~002E.", "x y"])
def test_decode_segment_rejects_what_encode_never_writes(bad: str) -> None:
    with pytest.raises(ValueError, match=r"encoded session id|canonical"):
        decode_segment(bad)


# Every code point, lone surrogates included (JavaScript strings may hold them).
ANY_TEXT = st.text(
    st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.sampled_from("~./\\\x00")),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_encode_segment_is_safe_and_reversible(session_id: str) -> None:
    encoded = encode_segment(session_id)
    assert encoded not in (".", "..")
    assert "/" not in encoded and "\\" not in encoded and "\x00" not in encoded
    assert encoded.isascii()
    # Ids are JavaScript strings: a surrogate pair written as two code points is the astral character.
    assert decode_segment(encoded) == js_string(session_id)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT, ANY_TEXT)
def test_encode_segment_is_injective(a: str, b: str) -> None:
    if js_string(a) != js_string(b):
        assert encode_segment(a) != encode_segment(b)


def test_long_ids_get_a_bounded_unique_folder_name() -> None:
    long_a, long_b = "x" * 300, "x" * 299 + "y"
    name_a, name_b = session_folder_name(long_a), session_folder_name(long_b)
    assert len(name_a) <= MAX_SEGMENT and len(name_b) <= MAX_SEGMENT
    assert name_a != name_b
    assert "~~" in name_a
    assert session_folder_name("~" * 100) != session_folder_name("~" * 101)
    assert len(session_folder_name("~" * 100)) <= MAX_SEGMENT
    assert session_folder_name("short") == "short"
    with pytest.raises(ValueError):
        decode_segment(name_a)


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/Users/qyj/work/deepseek-harness", "--Users-qyj-work-deepseek-harness--"),
        ("C:\\work\\agent", "--C-work-agent--"),
        ("/开发/~agent", "--~5F00~53D1-~007Eagent--"),
        ("/", "--root--"),
        ("C:", "--C---"),
        ("C:\\", "--C---"),
        ("..", "--..--"),
        ("---x", "--x--"),
        ("/a//b::c\\\\d", "--a-b-c-d--"),
        ("/😀", "--~D83D~DE00--"),
    ],
)
def test_project_key_vectors(cwd: str, expected: str) -> None:
    assert project_key(cwd) == expected


def test_project_key_cut_and_errors() -> None:
    key = project_key("/" + "a" * 400)
    assert key == "--" + "a" * 251 + "--" and len(key) == 255
    # The cut can split an escape.
    cut = project_key("/" + "a" * 249 + "开")
    assert cut == "--" + "a" * 249 + "~5--"
    assert project_key("/a/b-c") == project_key("/a-b/c")  # lossy by design
    with pytest.raises(ValueError, match="empty project path"):
        project_key("")


def test_default_sessions_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_sessions_dir() == tmp_path / ".dsh" / "sessions"
    assert default_sessions_dir("nb") == tmp_path / "nb" / ".dsh" / "sessions"
    monkeypatch.setenv("DSH_SESSIONS_DIR", "   ")
    assert default_sessions_dir() == tmp_path / ".dsh" / "sessions"
    monkeypatch.setenv("DSH_SESSIONS_DIR", "custom/store")
    assert default_sessions_dir() == tmp_path / "custom" / "store"
    assert default_sessions_dir(tmp_path / "nb") == tmp_path / "nb" / "custom" / "store"
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(tmp_path / "abs"))
    assert default_sessions_dir("/elsewhere") == tmp_path / "abs"
    monkeypatch.setenv("DSH_SESSIONS_DIR", "~/dsh-sessions")
    assert default_sessions_dir() == Path(os.path.expanduser("~/dsh-sessions"))
    assert default_sessions_dir().is_absolute()
