"""The README cannot drift from the code: its reference tables are the ones the code renders, row by row.

After changing an option, a command or a setting, refresh the README's tables with

    PYTHONPATH=. .venv/bin/python tests/test_readme.py --write
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from dsh_jupyter.notebook.commands import COMMANDS, markdown_tables, readme_tables
from dsh_jupyter.notebook.config import DshSettings
from dsh_jupyter.notebook.magics import DshMagics

ROOT = Path(__file__).resolve().parents[1]
README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")

#: The heading each generated table sits under.
SECTIONS = {
    "| option | meaning |": "## `%%dsh` options",
    "| command | meaning |": "## `%dsh` commands",
    "| setting | default | meaning |": "## Configuration",
}


def expected_tables() -> dict[str, str]:
    return readme_tables(DshMagics.dsh.parser, DshSettings)


def rows(table: str) -> list[str]:
    return table.splitlines()[2:]


def test_the_two_setup_commands_and_ci() -> None:
    commands = re.findall(r"^    (bash scripts/[\w-]+\.sh)$", README, re.M)
    assert commands == ["bash scripts/run-demos.sh", "bash scripts/run-tests.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec bash scripts/run-tests.sh" in ci
    for command in commands:
        assert (ROOT / command.split()[1]).exists()


@pytest.mark.parametrize("header", list(SECTIONS))
def test_each_reference_table_is_the_one_the_code_renders(header: str) -> None:
    expected = expected_tables()[header]
    found = markdown_tables(README).get(header)
    assert found is not None, f"README has no table headed {header!r}; run tests/test_readme.py --write"
    assert found.splitlines()[:2] == expected.splitlines()[:2]
    missing = [row for row in rows(expected) if row not in rows(found)]
    stale = [row for row in rows(found) if row not in rows(expected)]
    assert not missing and not stale, (
        f"README table {header!r} differs from the code; run tests/test_readme.py --write.\n"
        f"missing or changed rows: {missing}\nrows the code no longer has: {stale}"
    )
    assert rows(found) == rows(expected), "README rows are in another order than the code's"


def test_each_table_sits_under_its_heading() -> None:
    for header, heading in SECTIONS.items():
        section = README.split(heading + "\n", 1)
        assert len(section) == 2, f"README has no heading {heading!r}"
        assert header in section[1].split("\n## ", 1)[0], f"the table {header!r} is not under {heading!r}"


def test_the_tables_cover_every_option_command_and_setting() -> None:
    tables = expected_tables()
    options = [a for a in DshMagics.dsh.parser._actions if a.option_strings]
    assert len(rows(tables["| option | meaning |"])) == len(options)
    assert [row.split("`")[1].split()[1] for row in rows(tables["| command | meaning |"])] == [
        c.name for c in COMMANDS
    ]
    settings = DshSettings.class_trait_names(config=True)
    assert sorted(row.split("`")[1] for row in rows(tables["| setting | default | meaning |"])) == sorted(settings)


def test_a_table_row_carries_the_code_text() -> None:
    settings = rows(expected_tables()["| setting | default | meaning |"])
    placement = next(row for row in settings if row.startswith("| `placement` |"))
    assert '| `"separate"` |' in placement and "`prompt-prefix`" in placement
    assert next(row for row in settings if row.startswith("| `max_steps` |")).startswith("| `max_steps` | `25` |")
    options = rows(expected_tables()["| option | meaning |"])
    assert any(row.startswith("| `-b/--budget BYTES` | Byte budget per referenced session.") for row in options)


def write_readme() -> None:
    """Replace each reference table of the README with the one the code renders."""
    text = README
    found = markdown_tables(text)
    for header, table in expected_tables().items():
        if header not in found:
            raise SystemExit(f"README has no table headed {header!r}: add its header line under "
                             f"{SECTIONS[header]!r} first")
        text = text.replace(found[header], table)
    README_PATH.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: tests/test_readme.py --write  (rewrites README.md's reference tables)")
    write_readme()
