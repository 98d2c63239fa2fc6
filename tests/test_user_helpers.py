"""The helpers that make permission checks real as root: who a check runs as, and when a missing privilege fails."""

from __future__ import annotations

import os

import pytest
from user_helpers import NOBODY, as_nobody, lacks_privilege, shared_tmp


def test_a_check_runs_without_roots_rights_and_meets_a_read_only_folder() -> None:
    with shared_tmp() as tmp:
        folder = tmp / "ro"
        folder.mkdir()
        folder.chmod(0o555)

        def check() -> list[object]:
            return [os.geteuid(), os.access(folder, os.W_OK)]

        try:
            uid, writable = as_nobody(check)
        finally:
            folder.chmod(0o755)
    assert uid == (NOBODY if os.geteuid() == 0 else os.geteuid()) and writable is False


def test_a_failing_check_fails_the_test_with_its_traceback() -> None:
    def check() -> None:
        raise ValueError("the check's own words")

    with pytest.raises((AssertionError, ValueError), match="the check's own words"):
        as_nobody(check)


def test_a_missing_privilege_skips_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception, match="cannot mount a small tmpfs here"):
        lacks_privilege("cannot mount a small tmpfs here")
