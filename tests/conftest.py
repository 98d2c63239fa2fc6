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

pytest_plugins = ["fake_openai", "pytest_jupyter.jupyter_server", "browser_helpers", "pg_helpers"]

#: The reference harness's own logs with their expected reads, kept in the repository (see its README).
SPEC_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "reference"


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("dsh-home")
    monkeypatch.setenv("DSH_HOME", str(home))
    # Other tools' transcripts (read-only sources): none unless a test puts some there.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / "codex"))
    monkeypatch.delenv("DSH_FOREIGN_SESSIONS", raising=False)
    monkeypatch.delenv("DSH_SESSIONS_DIR", raising=False)
    monkeypatch.delenv("DSH_POSTGRES_DSN", raising=False)  # the server extension and kernels read it
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("DSH_SESSION_ID", raising=False)
    monkeypatch.delenv("DSH_SESSION_JSONL", raising=False)


@pytest.fixture
def spec_fixtures() -> Path:
    """The reference's own logs with their expected reads (read-only)."""
    return SPEC_FIXTURES
