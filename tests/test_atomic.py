"""Replacing a small file whole: the old or the new contents, never half, and nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_jupyter import atomic
from dsh_jupyter.atomic import write_atomic


def test_the_file_holds_the_new_bytes_and_no_temporary_is_left(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(b"old")
    write_atomic(path, b"new contents")
    assert path.read_bytes() == b"new contents" and os.listdir(tmp_path) == ["record.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(b"old")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["record.json"]
