"""``@`` completion in ``%%dsh`` cell bodies through IPython's ``Completer.completions``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.interactiveshell import InteractiveShell
from notebook_helpers import FakeHost, candidate

from dsh_jupyter.escape import host_mention
from dsh_jupyter.notebook import completer as completer_module
from dsh_jupyter.notebook.completer import MATCHER_ID, dsh_matcher, install_completer


@pytest.fixture
def host() -> FakeHost:
    return FakeHost(
        sessions=[
            candidate("id-old", "src review", cwd="/nb", same_workspace=True, created_at=1_000),
            candidate("id-new", "sql notes", cwd="/nb", same_workspace=True, created_at=2_000),
            candidate("id-far", "other", cwd="/other", created_at=3_000),
        ],
        files=["src/", "src/main.py", "src/util.py", "notes.md"],
    )


@pytest.fixture
def ip(host: FakeHost) -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    use_jedi = shell.Completer.use_jedi
    shell.Completer.use_jedi = False  # keep the suite fast; one test below turns Jedi on
    dispose = install_completer(shell, lambda: host)
    try:
        yield shell
    finally:
        dispose()
        shell.Completer.use_jedi = use_jedi


def complete(ip: InteractiveShell, text: str, offset: int | None = None) -> list[Any]:
    with provisionalcompleter():
        return list(ip.Completer.completions(text, len(text) if offset is None else offset))


def ours(completions: list[Any]) -> list[Any]:
    return [c for c in completions if c._origin == MATCHER_ID]


def test_sessions_first_then_files_replacing_the_at_fragment(ip: InteractiveShell, host: FakeHost) -> None:
    text = "%%dsh\nplease compare @s"
    got = complete(ip, text)
    assert [c.type for c in got] == ["session", "session", "path", "path", "path"]
    # sessions in the host's rank order (same workspace, newest first), each the canonical mention
    assert [c.text for c in got[:2]] == [host_mention(host.sessions[1]), host_mention(host.sessions[0])]
    assert got[0].text.startswith("@[sql notes](dsh-session:")
    assert [c.text for c in got[2:]] == ["@src/", "@src/main.py", "@src/util.py"]
    start = text.index("@s")
    assert all((c.start, c.end) == (start, len(text)) for c in got)
    assert ("candidates", "s") in host.calls and ("files", "s") in host.calls


def test_inserting_a_completion_yields_a_parseable_prompt(ip: InteractiveShell, host: FakeHost) -> None:
    from dsh_jupyter.references.mentions import parse_session_reference_text

    text = "%%dsh\nsummarise @sq"
    first = complete(ip, text)[0]
    cell = text[: first.start] + first.text + text[first.end :]
    parsed = parse_session_reference_text(cell.split("\n", 1)[1])
    assert parsed.text == "summarise @sql notes"
    assert parsed.references[0].session_id == "id-new"


def test_bare_at_offers_everything_and_suppresses_python_noise(ip: InteractiveShell) -> None:
    got = complete(ip, "%%dsh\nlook at @")
    assert len(got) == 3 + 4 and all(c._origin == MATCHER_ID for c in got)


def test_bare_at_suppresses_jedi_too(ip: InteractiveShell) -> None:
    ip.Completer.use_jedi = True
    got = complete(ip, "%%dsh\nlook at @")
    assert got and all(c._origin == MATCHER_ID for c in got)


def test_text_after_the_cursor_is_left_alone(ip: InteractiveShell) -> None:
    text = "%%dsh\nlook at @src and more"
    offset = text.index("@src") + len("@src")
    got = complete(ip, text, offset)
    assert got and all((c.start, c.end) == (offset - 4, offset) for c in got)
    assert [c.text for c in got if c.type == "path"] == ["@src/", "@src/main.py", "@src/util.py"]


def test_slash_is_part_of_the_fragment(ip: InteractiveShell, host: FakeHost) -> None:
    got = complete(ip, "%%dsh --bg\nfix @src/ma")
    assert [c.text for c in got] == ["@src/main.py"]
    assert got[0].start == len("%%dsh --bg\nfix ")


def test_second_body_line_and_options_on_the_magic_line(ip: InteractiveShell) -> None:
    got = complete(ip, "%%dsh --model offline\nfirst line\nthen @notes.")
    assert [c.text for c in got] == ["@notes.md"]


def test_leading_blank_lines_before_the_magic(ip: InteractiveShell) -> None:
    assert ours(complete(ip, "\n  \n%%dsh\n@no")) and ours(complete(ip, "  %%dsh\n  @no"))


@pytest.mark.parametrize(
    "text",
    [
        "print(@s",  # not a %%dsh cell
        "x = 1\n%%dsh\n@s",  # the magic is not the first line
        "%%dshx\n@s",  # another magic
        "%dsh @s",  # line magic
        "%%dsh @s",  # the magic line itself
        "%%dsh\nmail a@s",  # '@' inside a word (an e-mail address)
        "%%dsh\nsee @s x",  # whitespace after the fragment
        "%%dsh\nsee @[sql notes](dsh-session:Ig)",  # a mention already written
    ],
)
def test_no_completion_outside_a_dsh_body_fragment(ip: InteractiveShell, text: str) -> None:
    assert ours(complete(ip, text)) == []


def test_ordinary_cells_still_complete(ip: InteractiveShell) -> None:
    ip.user_ns["dsh_test_variable"] = 1
    try:
        assert "dsh_test_variable" in [c.text for c in complete(ip, "dsh_test_var")]
    finally:
        del ip.user_ns["dsh_test_variable"]


def test_failing_host_gives_no_completions_and_logs(
    ip: InteractiveShell, host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    host.fail_candidates = OSError("store unreadable")
    with caplog.at_level(logging.WARNING, logger="dsh_jupyter.notebook.completer"):
        got = complete(ip, "%%dsh\n@s")
    assert [c.type for c in got] == ["path", "path", "path"]
    assert "listing sessions" in caplog.text
    host.fail_files = RuntimeError("no folder")
    assert ours(complete(ip, "%%dsh\n@s")) == []


def test_a_malformed_candidate_is_skipped(ip: InteractiveShell, host: FakeHost) -> None:
    host.sessions.append({"label": "zzz", "sameWorkspace": True, "createdAt": 9})
    host.files.append("zz.txt")
    got = complete(ip, "%%dsh\n@zz")
    assert [c.text for c in got] == ["@zz.txt"]


def test_no_host_yet_means_no_completions(ip: InteractiveShell) -> None:
    dispose = install_completer(ip, lambda: None)
    try:
        assert ours(complete(ip, "%%dsh\n@s")) == []
    finally:
        dispose()


def test_hostile_label_is_inserted_escaped(ip: InteractiveShell, host: FakeHost) -> None:
    evil = "evil\x1b\x07\u009b\ns"
    host.sessions = [candidate(evil, evil, same_workspace=True)]
    host.files = []
    got = complete(ip, "%%dsh\n@ev")
    assert len(got) == 1 and got[0].text.startswith("@[evil\\\\x1b\\\\x07\\\\x9b\\\\x0as](dsh-session:")
    assert "\x1b" not in got[0].text and "\n" not in got[0].text


def test_install_is_idempotent_and_disposable(host: FakeHost) -> None:
    shell = InteractiveShell.instance()
    first = install_completer(shell, lambda: host)
    second = install_completer(shell, lambda: host)
    assert shell.Completer.custom_matchers.count(dsh_matcher) == 1
    assert dsh_matcher.matcher_identifier == MATCHER_ID and dsh_matcher.matcher_api_version == 2
    second()
    assert dsh_matcher not in shell.Completer.custom_matchers
    first()  # disposing twice is harmless
    assert completer_module._installed == []


def test_install_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="callable"):
        install_completer(InteractiveShell.instance(), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Completer"):
        install_completer(object(), lambda: None)  # type: ignore[arg-type]


def test_matcher_never_raises(ip: InteractiveShell) -> None:
    def broken() -> Any:
        raise RuntimeError("host getter exploded")

    dispose = install_completer(ip, broken)
    try:
        assert ours(complete(ip, "%%dsh\n@s")) == []
    finally:
        dispose()


class VariableHost(FakeHost):
    """A host that also lists variables (as the notebook host does, data frames first)."""

    def __init__(self, rows: list[dict[str, str]] | Exception, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows = rows

    def variable_candidates(self, query: str = "", limit: int = 50) -> list[dict[str, str]]:
        if isinstance(self.rows, Exception):
            raise self.rows
        return [r for r in self.rows if query.lower() in r["name"].lower()][:limit]


def test_variables_come_first_as_variable_mentions(host: FakeHost) -> None:
    from dsh_jupyter.references import parse_session_reference_text
    from dsh_jupyter.references.mentions import format_variable_mention

    rows = [{"name": n, "mention": format_variable_mention(n)} for n in ("sales", "series_s", "arr")]
    shell = InteractiveShell.instance()
    use_jedi = shell.Completer.use_jedi
    shell.Completer.use_jedi = False
    with_vars = VariableHost(rows, sessions=host.sessions, files=host.files)
    dispose = install_completer(shell, lambda: with_vars)
    try:
        got = complete(shell, "%%dsh\nplease compare @s")
        assert [c.type for c in got[:2]] == ["variable", "variable"] and got[2].type == "session"
        assert got[0].text == "@[sales](dsh-variable:sales)"
        parsed = parse_session_reference_text("%%dsh\nplease compare " + got[0].text)
        assert [v.name for v in parsed.variables] == ["sales"]
        with_vars.rows = RuntimeError("namespace exploded")
        assert complete(shell, "%%dsh\nplease compare @s")[0].type == "session"
    finally:
        dispose()
        shell.Completer.use_jedi = use_jedi
