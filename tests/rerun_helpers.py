"""Why a rerun was needed: pytest-rerunfailures names a test that passed on a later try (``-rR``) but drops what
went wrong on the try that failed. This plugin keeps the end of each failed try's report and prints it after the
run, in a section of its own, so a flaky test in a CI log comes with its error and the line that raised it, and
with the end of what the try wrote to stderr (its child processes too: a kernel that died at its start says why
there).

Loaded by ``tests/conftest.py`` (``pytest_plugins``); it runs in the controller too, which receives the workers'
reports under pytest-xdist. Without reruns it prints nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

#: The last lines of each failed try's report that are printed (the assertion or error and where it was raised).
TAIL_LINES = 25
#: The last lines of what each failed try wrote to stderr that are printed.
STDERR_LINES = 15

_tries: list[tuple[str, str, str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome != "rerun":  # type: ignore[comparison-overlap]  # the outcome pytest-rerunfailures adds
        return
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "")  # xdist's, when there is one
    text = str(report.longrepr) if report.longrepr is not None else "(no report)"
    _tries.append((report.nodeid, f"{report.when} on {worker}" if worker else report.when, text, report.capstderr))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _tries:
        return
    terminalreporter.section("what failed before a rerun", sep="=")
    for nodeid, when, text, stderr in _tries:
        terminalreporter.write_line(f"--- {nodeid} ({when}):")
        _write_tail(terminalreporter, text, TAIL_LINES)
        if stderr.strip():
            terminalreporter.write_line("    its stderr:")
            _write_tail(terminalreporter, stderr, STDERR_LINES)


def _write_tail(terminalreporter: Any, text: str, count: int) -> None:
    lines = text.rstrip("\n").split("\n")
    cut = len(lines) - count
    if cut > 0:
        terminalreporter.write_line(f"    ... {cut} earlier lines left out")
    for line in lines[-count:]:
        terminalreporter.write_line(f"    {line}")
