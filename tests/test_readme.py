"""The README cannot drift from the code: its commands, options and settings are checked here."""

from __future__ import annotations

import re
from pathlib import Path

from dsh_jupyter.notebook.config import DshSettings
from dsh_jupyter.notebook.magics import LINE_HELP, DshMagics

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_two_setup_commands_and_ci() -> None:
    commands = re.findall(r"^    (bash scripts/[\w-]+\.sh)$", README, re.M)
    assert commands == ["bash scripts/run-demos.sh", "bash scripts/run-tests.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec bash scripts/run-tests.sh" in ci
    for command in commands:
        assert (ROOT / command.split()[1]).exists()


def test_every_setting_is_documented() -> None:
    missing = [name for name in DshSettings.class_trait_names(config=True) if f"`{name}`" not in README]
    assert not missing, f"README does not document: {missing}"


def test_every_line_command_is_documented() -> None:
    commands = re.findall(r"^  (\w+)", LINE_HELP.split("Commands:")[1], re.M)
    missing = [c for c in commands if f"%dsh {c}" not in README]
    assert commands and not missing, f"README does not mention: {missing}"


def test_every_cell_option_is_documented() -> None:
    flags = re.findall(r"(--[a-z-]+)", DshMagics.dsh.__doc__ or "")
    assert flags
    missing = [f for f in set(flags) if f not in README]
    assert not missing, f"README does not document: {missing}"
