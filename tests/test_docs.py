"""The documentation cannot drift from the code or break its own links.

- README.md is a two-minute read (at most :data:`README_MAX_LINES` lines) that keeps the two set-up commands;
- every relative link and ``#anchor`` in README.md, CHANGELOG.md, CONTRIBUTING.md and ``docs/*.md`` leads to a
  file that exists and, for a Markdown file, to a heading of it (GitHub's heading-anchor rule);
- every page of ``docs/`` is linked from ``docs/index.md``, and every benchmark module is described in
  ``docs/benchmarks.md``;
- the three reference tables of ``docs/user-guide.md`` are the ones the code renders, row by row;
- the Python package and the JupyterLab extension carry one version, and the changelog has a section for it.

After changing an option, a command or a setting, refresh the user guide's tables with

    PYTHONPATH=. .venv/bin/python tests/test_docs.py --write
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_PATH = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The page that holds the generated reference tables.
GUIDE_PATH = DOCS / "user-guide.md"
README_MAX_LINES = 150

#: The heading each generated table sits under, in the user guide.
SECTIONS = {
    "| option | meaning |": "## `%%dsh` options",
    "| command | meaning |": "## `%dsh` commands",
    "| setting | default | meaning |": "## Configuration",
}


def documents() -> list[Path]:
    """Every Markdown document whose links are checked."""
    top = [ROOT / name for name in ("README.md", "CHANGELOG.md", "CONTRIBUTING.md") if (ROOT / name).exists()]
    return top + sorted(DOCS.glob("*.md"))


# -- reading Markdown ----------------------------------------------------------------------------------------
@cache
def _parse() -> Any:
    import mistune

    return mistune.create_markdown(renderer=None, plugins=["table", "strikethrough"])


def _tokens(text: str) -> list[dict[str, Any]]:
    tokens: list[dict[str, Any]] = _parse()(text)
    return tokens


def _walk(tokens: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for token in tokens:
        yield token
        yield from _walk(token.get("children") or [])


def _plain(token: dict[str, Any]) -> str:
    """The text a heading shows (code spans by their content, links by their text)."""
    if "raw" in token and not token.get("children"):
        return str(token["raw"])
    return "".join(_plain(child) for child in token.get("children") or [])


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading with this text: lower case, punctuation dropped (letters, digits,
    ``_``, ``-`` and spaces are kept), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings; a repeated heading gets ``-1``, ``-2``, … as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for token in _walk(_tokens(text)):
        if token["type"] != "heading":
            continue
        slug = github_slug(_plain(token))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def link_targets(text: str) -> list[str]:
    """The targets of every link and image of a Markdown text (code spans and blocks hold none)."""
    return [str(token["attrs"]["url"]) for token in _walk(_tokens(text))
            if token["type"] in ("link", "image") and token.get("attrs", {}).get("url")]


@dataclass(frozen=True)
class BrokenLink:
    document: str
    target: str
    problem: str

    def __str__(self) -> str:
        return f"{self.document}: ({self.target}) {self.problem}"


def broken_links(document: Path, root: Path = ROOT) -> list[BrokenLink]:
    """Every relative link of ``document`` that leads to no file, or to no heading of a Markdown file."""
    text = document.read_text(encoding="utf-8")
    shown = document.relative_to(root).as_posix()
    problems: list[BrokenLink] = []
    for target in link_targets(text):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc:
            continue  # https:, mailto:: not ours to check
        path, fragment = unquote(parts.path), unquote(parts.fragment)
        if path.startswith("/"):
            problems.append(BrokenLink(shown, target, "is absolute; link relative to this file"))
            continue
        destination = (document.parent / path).resolve() if path else document
        if not destination.exists():
            problems.append(BrokenLink(shown, target, "leads to no file"))
            continue
        if fragment and destination.suffix == ".md" and fragment not in anchors(
                destination.read_text(encoding="utf-8")):
            problems.append(BrokenLink(shown, target, f"names no heading of {destination.name}"))
    return problems


# -- the checkers themselves ------------------------------------------------------------------------------
@pytest.mark.parametrize(("heading", "slug"), [
    ("The `%%dsh` cell", "the-dsh-cell"),
    ("`%dsh fix`", "dsh-fix"),
    ("The agent's environment", "the-agents-environment"),
    ("Where the log is: `%dsh locate` and `%dsh env`", "where-the-log-is-dsh-locate-and-dsh-env"),
    ("`GET dsh/api/sessions/<payload>`", "get-dshapisessionspayload"),
    ("[0.1.0]", "010"),
    ("Sharing and row-level security", "sharing-and-row-level-security"),
])
def test_headings_get_githubs_anchors(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug
    assert slug in anchors(f"## {heading}\n")


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert anchors("# Limits\n\n## Limits\n\n### Limits\n") == {"limits", "limits-1", "limits-2"}


def test_broken_links_are_found_and_good_ones_pass(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## Two words\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "[ok](docs/page.md) [ok](docs/page.md#two-words) [ok](#readme) [ok](https://example.org/x.md#nope)\n"
        "[bad](docs/missing.md) [bad](docs/page.md#three-words) [bad](#nowhere) [bad](/etc/passwd)\n\n"
        "`[not a link](gone.md)`\n\n    [not a link either](gone.md)\n\n# Readme\n",
        encoding="utf-8")
    found = broken_links(tmp_path / "README.md", tmp_path)
    assert [(b.target, b.problem.split(";")[0]) for b in found] == [
        ("docs/missing.md", "leads to no file"),
        ("docs/page.md#three-words", "names no heading of page.md"),
        ("#nowhere", "names no heading of README.md"),
        ("/etc/passwd", "is absolute"),
    ]


# -- the documents ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("document", documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(document: Path) -> None:
    problems = broken_links(document)
    assert not problems, "broken links:\n" + "\n".join(map(str, problems))


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = DOCS / "index.md"
    linked = {(index.parent / unquote(urlsplit(t).path)).resolve()
              for t in link_targets(index.read_text(encoding="utf-8")) if not urlsplit(t).scheme}
    pages = {page.resolve() for page in DOCS.glob("*.md") if page.name != "index.md"}
    missing = sorted(page.name for page in pages - linked)
    assert not missing, f"docs/index.md does not link {missing}; add each page to its table"
    assert (ROOT / "README.md").resolve() in linked and (ROOT / "CHANGELOG.md").resolve() in linked


def test_the_readme_is_short_and_links_into_the_docs() -> None:
    lines = README_PATH.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move the detail into docs/")
    targets = link_targets("\n".join(lines))
    assert "docs/index.md" in targets and "CHANGELOG.md" in targets


def test_the_two_setup_commands_and_ci() -> None:
    readme = README_PATH.read_text(encoding="utf-8")
    commands = re.findall(r"^    (bash scripts/[\w-]+\.sh)$", readme, re.M)
    assert commands == ["bash scripts/run-demos.sh", "bash scripts/run-tests.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec bash scripts/run-tests.sh" in ci
    for command in commands:
        assert (ROOT / command.split()[1]).exists()


def test_every_benchmark_is_described() -> None:
    described = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "benchmarks").glob("bench_*.py")) if f"`{p.name}`" not in described]
    assert not missing, f"docs/benchmarks.md does not describe {missing}"


# -- one version ------------------------------------------------------------------------------------------
def test_the_package_and_the_labextension_carry_one_version() -> None:
    """``dsh_jupyter.__version__`` is the one source (hatch reads it for the wheel); the labextension's
    package.json must say the same version (npm's spelling of a pre-release is accepted)."""
    from packaging.version import Version

    import dsh_jupyter

    npm = json.loads((ROOT / "labextension" / "package.json").read_text(encoding="utf-8"))["version"]
    assert Version(npm) == Version(dsh_jupyter.__version__), (
        f"labextension/package.json says {npm}, dsh_jupyter/__init__.py says {dsh_jupyter.__version__}: "
        "set package.json's version to the package's")


def test_the_version_source_is_the_one_hatch_reads() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "dsh_jupyter/__init__.py"


def test_the_changelog_has_a_section_for_this_version() -> None:
    import dsh_jupyter

    found = anchors((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert "unreleased" in found
    assert github_slug(f"[{dsh_jupyter.__version__}]") in found, (
        f"CHANGELOG.md has no '## [{dsh_jupyter.__version__}]' section")


# -- the generated tables ---------------------------------------------------------------------------------
def expected_tables() -> dict[str, str]:
    from dsh_jupyter.notebook.commands import readme_tables
    from dsh_jupyter.notebook.config import DshSettings
    from dsh_jupyter.notebook.magics import DshMagics

    return readme_tables(DshMagics.dsh.parser, DshSettings)


def found_tables(text: str) -> dict[str, str]:
    from dsh_jupyter.notebook.commands import markdown_tables

    return markdown_tables(text)


def rows(table: str) -> list[str]:
    return table.splitlines()[2:]


@pytest.mark.parametrize("header", list(SECTIONS))
def test_each_reference_table_is_the_one_the_code_renders(header: str) -> None:
    expected = expected_tables()[header]
    found = found_tables(GUIDE_PATH.read_text(encoding="utf-8")).get(header)
    assert found is not None, f"docs/user-guide.md has no table headed {header!r}; run tests/test_docs.py --write"
    assert found.splitlines()[:2] == expected.splitlines()[:2]
    missing = [row for row in rows(expected) if row not in rows(found)]
    stale = [row for row in rows(found) if row not in rows(expected)]
    assert not missing and not stale, (
        f"docs/user-guide.md table {header!r} differs from the code; run tests/test_docs.py --write.\n"
        f"missing or changed rows: {missing}\nrows the code no longer has: {stale}"
    )
    assert rows(found) == rows(expected), "the user guide's rows are in another order than the code's"


def test_each_table_sits_under_its_heading() -> None:
    guide = GUIDE_PATH.read_text(encoding="utf-8")
    for header, heading in SECTIONS.items():
        section = guide.split(heading + "\n", 1)
        assert len(section) == 2, f"docs/user-guide.md has no heading {heading!r}"
        assert header in section[1].split("\n## ", 1)[0], f"the table {header!r} is not under {heading!r}"


def test_the_readme_keeps_no_copy_of_the_tables() -> None:
    assert not set(found_tables(README_PATH.read_text(encoding="utf-8"))) & set(SECTIONS)


def test_the_tables_cover_every_option_command_and_setting() -> None:
    from dsh_jupyter.notebook.commands import COMMANDS
    from dsh_jupyter.notebook.config import DshSettings
    from dsh_jupyter.notebook.magics import DshMagics

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


def write_tables() -> None:
    """Replace each reference table of the user guide with the one the code renders."""
    text = GUIDE_PATH.read_text(encoding="utf-8")
    found = found_tables(text)
    for header, table in expected_tables().items():
        if header not in found:
            raise SystemExit(f"docs/user-guide.md has no table headed {header!r}: add its header line under "
                             f"{SECTIONS[header]!r} first")
        text = text.replace(found[header], table)
    GUIDE_PATH.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: tests/test_docs.py --write  (rewrites docs/user-guide.md's reference tables)")
    write_tables()
