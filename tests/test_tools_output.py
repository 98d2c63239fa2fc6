"""Bounded output capture: head and tail within the limit, full output spilled to a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_jupyter.tools.output import OutputCapture, safe_filename, tool_output_path


def test_small_output_is_kept_whole_without_a_file(tmp_path: Path) -> None:
    spill = tmp_path / "out.txt"
    capture = OutputCapture(100, spill)
    capture.feed(b"hello ")
    capture.feed(b"world")
    result = capture.finish()
    assert result.text == "hello world" and not result.truncated and result.total_bytes == 11
    assert result.preview() == "hello world"
    assert not spill.exists() and result.spill_path is None


def test_large_output_keeps_head_and_tail_and_spills_everything(tmp_path: Path) -> None:
    spill = tmp_path / "deep" / "out.txt"
    capture = OutputCapture(100, spill)
    data = b"".join(f"line {i:04d}\n".encode() for i in range(1000))
    for start in range(0, len(data), 37):
        capture.feed(data[start:start + 37])
    result = capture.finish()
    assert result.truncated and result.total_bytes == len(data)
    assert result.head_bytes + result.tail_bytes <= 100
    assert result.head.startswith("line 0000") and result.tail.endswith("line 0999\n")
    assert spill.read_bytes() == data
    preview = result.preview()
    assert str(spill) in preview and f"of {len(data)} bytes" in preview


def test_truncation_without_folder_says_so() -> None:
    capture = OutputCapture(64)
    capture.feed(b"x" * 500)
    result = capture.finish()
    assert result.truncated and result.spill_path is None
    assert "not saved" in result.preview()


def test_multibyte_characters_are_not_split() -> None:
    capture = OutputCapture(64)
    capture.feed("界".encode() * 200)
    result = capture.finish()
    assert "\ufffd" not in result.text
    assert set(result.head) == {"界"} and set(result.tail) == {"界"}


def test_always_spill_writes_small_output_too(tmp_path: Path) -> None:
    spill = tmp_path / "always.txt"
    capture = OutputCapture(100, spill, always_spill=True)
    capture.feed(b"tiny")
    result = capture.finish()
    assert spill.read_bytes() == b"tiny" and result.spill_path == spill


def test_unwritable_spill_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    capture = OutputCapture(64, blocker / "out.txt")
    capture.feed(b"y" * 300)
    result = capture.finish()
    assert result.truncated and result.spill_path is None and result.spill_error
    assert "could not be saved" in result.preview()


def test_limit_must_be_reasonable() -> None:
    with pytest.raises(ValueError, match="at least 64"):
        OutputCapture(10)


def test_paths_for_odd_call_ids(tmp_path: Path) -> None:
    assert tool_output_path(None, "x") is None
    path = tool_output_path(tmp_path, "../../etc/passwd")
    assert path is not None and path.parent == tmp_path / "tool-output" and "/" not in path.name
    assert safe_filename("call_1-a.b") == "call_1-a.b.txt"
    assert safe_filename("...") == "output.txt"
