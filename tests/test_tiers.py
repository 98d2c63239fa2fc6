"""The test tiers (unit, kernel, postgres, browser) partition the suite, and the kernel runner's helpers read
outputs the way the tests rely on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kernel_helpers import EVERY_MIME, SCRUBBED, kernel_environment, output_text, output_texts, stream_text

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "kernel", "postgres", "browser")


#: Prints each collected test's id and tier marks, in collection order (a ``-p`` plugin).
SHOW_TIERS = """
def pytest_collection_finish(session):
    for item in session.items:
        tiers = [mark.name for mark in item.iter_markers() if mark.name in ("unit", "kernel", "postgres", "browser")]
        print("ITEM", item.nodeid, ",".join(tiers) or "-")
"""


def collect(tmp_path: Path, *arguments: str) -> list[tuple[str, str]]:
    """(test id, its tier marks joined by commas) for each test ``pytest --collect-only`` collects, in order."""
    (tmp_path / "show_tiers.py").write_text(SHOW_TIERS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "show_tiers", *arguments], cwd=TESTS.parent, env=env, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, f"{arguments}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return [(parts[1], parts[2]) for parts in (line.split(" ") for line in done.stdout.splitlines())
            if parts[0] == "ITEM" and len(parts) == 3]


def whole_suite(session: pytest.Session) -> list[tuple[str, str]] | None:
    """This run's own collection as :func:`collect` gives it, when it is the whole suite with nothing deselected
    (a full run, where each xdist worker collects every test); else ``None``."""
    option = session.config.option
    if option.markexpr or option.keyword or option.deselect or getattr(option, "lf", False) \
            or getattr(option, "stepwise", False):
        return None
    files = {path.relative_to(TESTS.parent).as_posix() for path in TESTS.glob("test_*.py")}
    items = session.items
    if {item.nodeid.split("::")[0] for item in items} != files:
        return None
    return [(item.nodeid, ",".join(mark.name for mark in item.iter_markers() if mark.name in TIERS) or "-")
            for item in items]


@pytest.mark.slow
def test_the_four_tiers_partition_the_suite(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # One collection of the whole suite: the run's own when it collected everything (a worker of the full run
    # does), else a ``--collect-only`` of its own (four ``-m`` collections cost four times the CPU on CI's two cores).
    rows = whole_suite(request.session) or collect(tmp_path)
    assert len(rows) > 2000, len(rows)
    assert len({test for test, _ in rows}) == len(rows)
    untiered_or_twice = [(test, tiers) for test, tiers in rows if tiers not in TIERS]
    assert not untiered_or_twice, untiered_or_twice[:20]  # every test in exactly one tier
    ids = {tier: {test for test, marked in rows if marked == tier} for tier in TIERS}
    # Each tier holds what its name says (examples that must not drift into another tier).
    assert "tests/test_tiers.py::test_the_four_tiers_partition_the_suite" in ids["unit"]
    assert any(i.startswith("tests/test_notebooks_demo.py::") for i in ids["kernel"])  # the product's demo runner
    assert "tests/test_notebook_errors.py::test_each_error_names_what_was_typed[blocked]" in ids["kernel"]
    assert "tests/test_store_contract.py::test_round_trip[postgres]" in ids["postgres"]  # a store parameter
    assert "tests/test_store_contract.py::test_round_trip[jsonl]" in ids["unit"]
    assert "tests/test_kernel_env.py::test_postgres_exports_the_session" in ids["postgres"]  # the heavier one wins
    assert all(i.startswith(("tests/test_browser_", "tests/test_postgres_browser.py")) for i in ids["browser"])
    assert not any(i.startswith("tests/test_browser_") for i in ids["unit"] | ids["kernel"] | ids["postgres"])


def test_the_runs_own_collection_serves_only_when_it_is_the_whole_suite() -> None:
    def session(files: list[str], **options: object) -> Any:
        option = SimpleNamespace(**{"markexpr": "", "keyword": "", "deselect": [], "lf": False, "stepwise": False,
                                    **options})
        marks = [SimpleNamespace(name="unit"), SimpleNamespace(name="slow")]
        items = [SimpleNamespace(nodeid=f"{name}::test_one", iter_markers=lambda: iter(marks)) for name in files]
        return SimpleNamespace(config=SimpleNamespace(option=option), items=items)

    every = sorted(path.relative_to(TESTS.parent).as_posix() for path in TESTS.glob("test_*.py"))
    assert whole_suite(session(every)) == [(f"{name}::test_one", "unit") for name in every]
    assert whole_suite(session(every[1:])) is None  # a module missing: not the whole suite
    for deselecting in ({"markexpr": "unit"}, {"keyword": "tiers"}, {"deselect": ["x"]}, {"lf": True},
                        {"stepwise": True}):
        assert whole_suite(session(every, **deselecting)) is None, deselecting


def test_a_module_stays_whole_and_each_tier_runs_alone(tmp_path: Path) -> None:
    rows = collect(tmp_path, "tests/test_escape.py", "tests/test_kernel_env.py", "tests/test_browser_sidebar.py")
    modules = [test.split("::")[0] for test, _ in rows]
    runs = [module for index, module in enumerate(modules) if index == 0 or modules[index - 1] != module]
    # Whole modules (each one run of items, in the order given: tests/schedule_helpers.py orders them for xdist).
    assert runs == ["tests/test_escape.py", "tests/test_kernel_env.py", "tests/test_browser_sidebar.py"], runs
    assert {tiers for test, tiers in rows if test.startswith("tests/test_kernel_env.py")} >= {"postgres", "kernel"}
    # ``-m TIER`` selects exactly that tier's tests, so each tier runs alone.
    assert collect(tmp_path, "-m", "kernel", "tests/test_escape.py", "tests/test_kernel_env.py") == [
        row for row in rows if row[0].startswith("tests/test_kernel_env.py") and row[1] == "kernel"]


# --------------------------------------------------------------------------- reading outputs


def stream(name: str, text: str) -> dict[str, str]:
    return {"output_type": "stream", "name": name, "text": text}


def test_a_stream_split_over_outputs_reads_as_printed() -> None:
    outputs = [stream("stdout", "line one\nli"), stream("stdout", "ne two\n"), stream("stderr", "warn\n"),
               {"output_type": "display_data", "data": {"text/plain": "<table>", "text/html": "<b>t</b>"}}]
    assert stream_text(outputs) == "line one\nline two\nwarn\n"
    assert stream_text(outputs, "stderr") == "warn\n"
    assert output_text(outputs) == "line one\nline two\n\nwarn\n\n<table>"
    assert output_text(outputs, "text/html").endswith("\n<b>t</b>")
    assert output_text(outputs, EVERY_MIME).endswith("\n<table>\n<b>t</b>")
    assert output_texts(outputs, "text/markdown", "text/html", "text/plain", first=True)[-1] == "<b>t</b>"


def test_an_error_output_reads_with_its_name_value_and_traceback() -> None:
    error = {"output_type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": ["Traceback", "KeyError"]}
    assert output_texts([error]) == ["KeyError: 'x'\nTraceback\nKeyError"]
    assert output_texts([{"output_type": "display_data", "data": {"image/png": "..."}}]) == [""]


def test_the_kernel_environment_drops_keys_and_foreign_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_SESSION_ID", "someone-else")
    monkeypatch.setenv("KEEP_ME", "1")
    # What an in-process Jupyter server of an earlier test leaves in os.environ: the kernel was not started by it.
    monkeypatch.setenv("JUPYTER_DSH_SERVER_URL", "http://127.0.0.1:8888/")
    monkeypatch.setenv("JUPYTER_DSH_SERVER_KEY", "key-of-another-server")
    env = kernel_environment({"DSH_SESSION_ID": "given", "KEEP_ME": None, "DSH_HOME": "/h"})
    assert "DEEPSEEK_API_KEY" not in env and env["DSH_SESSION_ID"] == "given" and env["DSH_HOME"] == "/h"
    assert "JUPYTER_DSH_SERVER_URL" not in env and "JUPYTER_DSH_SERVER_KEY" not in env
    assert "KEEP_ME" not in env and not set(SCRUBBED) - {"DSH_SESSION_ID"} & set(env)
    assert os.environ["DSH_SESSION_ID"] == "someone-else"  # the test process keeps its own


def test_only_the_kernel_runner_builds_a_notebook_client() -> None:
    """A test that ran its own nbclient would run on a kernel outside the ``kernel`` tier and its environment rule."""
    elsewhere = [path.name for path in sorted(TESTS.glob("*.py"))
                 if path.name not in ("kernel_helpers.py", "test_tiers.py")
                 and "NotebookClient" in path.read_text(encoding="utf-8")]
    assert elsewhere == [], f"use the kernel_runner fixture (tests/kernel_helpers.py) in {elsewhere}"
