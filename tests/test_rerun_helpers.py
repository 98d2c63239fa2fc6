"""tests/rerun_helpers.py: a test that passed only on a later try is printed with what failed on the earlier one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: Fails on its first try (with a message to find, and a child process that says why on stderr, as a kernel that
#: dies at its start does), passes on the next; a second test always passes.
FLAKY = """
import subprocess
import sys
from pathlib import Path

def test_flaky():
    marker = Path(__file__).with_name("tried")
    if not marker.exists():
        marker.write_text("once")
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child: the port was taken')"], check=True)
        assert 1 + 1 == 3, "the first try of the flaky test went wrong here"

def test_steady():
    assert True
"""


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_sample.py").write_text(FLAKY, encoding="utf-8")
    (folder / "conftest.py").write_text('pytest_plugins = ["rerun_helpers"]\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--reruns", "1", *args,
                           str(folder)], cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["one process", "xdist"])
def test_a_rerun_is_printed_with_what_failed_on_its_first_try(tmp_path: Path, workers: list[str]) -> None:
    done = _run(tmp_path, *workers)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "2 passed, 1 rerun" in out
    section = out[out.index("what failed before a rerun"):]
    assert "--- test_sample.py::test_flaky (call" in section
    assert "the first try of the flaky test went wrong here" in section
    assert "its stderr:" in section and "child: the port was taken" in section
    assert "test_steady" not in section
    if workers:
        assert "(call on gw" in section  # the worker that ran it


def test_a_run_without_reruns_prints_no_section(tmp_path: Path) -> None:
    (tmp_path / "tried").write_text("already", encoding="utf-8")  # the flaky test passes at once
    done = _run(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout and "what failed before a rerun" not in done.stdout
