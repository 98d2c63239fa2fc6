"""Shared pytest set-up: keep every test away from the user's real home and sessions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# CI explores the same examples every run (a failure there is reproducible, never a coin toss);
# local runs keep exploring new ones.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    hypothesis_settings.load_profile("ci")

pytest_plugins = [
    "fake_openai", "pytest_jupyter.jupyter_server", "browser_helpers", "pg_helpers", "kernel_helpers", "timing_helpers",
    "schedule_helpers", "rerun_helpers",
]

#: The reference harness's own logs with their expected reads, kept in the repository (see its README).
SPEC_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "reference"


#: The test tiers, heaviest first: a test is in the first tier whose machinery it uses, else in ``unit``
#: (``pytest -m unit`` runs without a kernel, server database or browser). Each is declared in pyproject.toml.
POSTGRES_FIXTURES = frozenset({"pg_server", "pg_database"})
KERNEL_FIXTURES = frozenset({"kernel_runner", "kernel_client"})


def tier(item: pytest.Item) -> str:
    """``browser`` for the browser modules, ``postgres`` for a test that uses the PostgreSQL server, ``kernel``
    for one that runs notebook cells on a real kernel (``kernel_runner``, ``kernel_client``), ``unit`` for the rest."""
    from schedule_helpers import is_browser  # after pytest_plugins loads it

    if is_browser(str(item.path)):
        return "browser"
    uses = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        uses.update(getattr(value, "fixtures", ()))  # a parameter that requests fixtures as the test runs
    if uses & POSTGRES_FIXTURES:
        return "postgres"
    if uses & KERNEL_FIXTURES:
        return "kernel"
    return "unit"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(tier(item))


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("dsh-home")
    monkeypatch.setenv("DSH_HOME", str(home))
    # Other tools' transcripts (read-only sources): none unless a test puts some there.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / "codex"))
    from kernel_helpers import SCRUBBED  # after pytest_plugins loads it (so its asserts are rewritten)

    for name in SCRUBBED:  # model keys, what names another session or store, a server's address (kernels read them)
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def spec_fixtures() -> Path:
    """The reference's own logs with their expected reads (read-only)."""
    return SPEC_FIXTURES
