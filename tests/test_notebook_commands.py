"""The %dsh command table: parsing, generated help, the help-request transformer and the command tables."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from notebook_helpers import HOSTILE_LABELS

from dsh_jupyter.models.registry import ModelListing, list_models
from dsh_jupyter.notebook import commands
from dsh_jupyter.notebook.commands import (
    COMMANDS,
    CommandLineError,
    EnvValues,
    find_command,
    help_request_transformer,
    line_magic_help,
    markdown_tables,
    models_table,
    parse_line,
    readme_tables,
    settings_table,
)
from dsh_jupyter.notebook.config import DshSettings
from dsh_jupyter.notebook.magics import DshMagics


def words(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- the table and the handlers


def test_every_command_has_a_handler_and_every_handler_a_command() -> None:
    handlers = {name[len("_cmd_"):] for name in vars(DshMagics) if name.startswith("_cmd_")}
    assert handlers == {c.name for c in COMMANDS} - {"help"}


def test_overview_lists_every_command_with_its_arguments_and_summary() -> None:
    text = line_magic_help()
    flat = words(text)
    for command in COMMANDS:
        assert words(command.usage()[len("%dsh "):]) in flat
        assert words(command.summary) in flat
    assert "%dsh COMMAND?" in text and "::" not in text
    assert DshMagics.dsh_line.__doc__ == text
    assert all(len(line) <= commands.HELP_WIDTH for line in text.splitlines())


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_command_help_names_every_argument_and_its_help(command: commands.Command) -> None:
    assert command.usage() == words(command.parser().format_usage())[len("usage: "):]
    text = command.help()
    assert text.startswith(f"usage: %dsh {command.name}")
    assert words(command.summary) in words(text)
    for argument in command.arguments:
        assert argument.metavar in text if argument.metavar else all(n in text for n in argument.names)
        assert words(argument.help) in words(text)


def test_cell_magic_help_is_plain_text_named_for_the_cell_magic() -> None:
    doc = DshMagics.dsh.__doc__ or ""
    assert doc.startswith("usage: %%dsh [-s ID] [-n] [-m SPEC]")
    assert "::" not in doc and "usage: %dsh" not in doc
    flat = words(doc)
    for action in DshMagics.dsh.parser._actions:
        assert all(option in doc for option in action.option_strings)
        assert words(action.help or "") in flat
    assert "Send the cell below the %%dsh line as a prompt" in doc
    assert commands.CELL_MAGIC_EPILOG in flat


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("line", ["", "  ", "?", "-h", "--help", "help"])
def test_overview_requests(line: str) -> None:
    request = parse_line(line)
    assert request.help == line_magic_help() and request.args is None


@pytest.mark.parametrize("line", ["models?", "models ?", "models -h", "models --help", "help models",
                                  "help models?", "models??"])
def test_one_command_help_requests(line: str) -> None:
    request = parse_line(line)
    assert request.command.name == "models" and request.help == find_command("models").help()


def test_arguments_are_parsed_per_command() -> None:
    args = parse_line("sessions forecast q3 --body --limit 3").args
    assert args == argparse.Namespace(query=["forecast", "q3"], limit=3, body=True)
    assert parse_line("sessions").args == argparse.Namespace(query=[], limit=None, body=False)
    assert parse_line("new -m offline").args == argparse.Namespace(model="offline", discard=False)
    assert parse_line("new --model deepseek:deepseek-chat --discard").args == argparse.Namespace(
        model="deepseek:deepseek-chat", discard=True)
    assert parse_line("resume 'Regional sales Q3'").args == argparse.Namespace(session=["Regional sales Q3"],
                                                                                 discard=False)
    assert parse_line("resume  6a9e04f1 ").args == argparse.Namespace(session=["6a9e04f1"], discard=False)
    assert parse_line("title Why churn rose?").args == argparse.Namespace(text=["Why churn rose?"])
    assert parse_line("title Don't  panic").args == argparse.Namespace(text=["Don't  panic"])
    assert parse_line('title "--bg is fast"').args == argparse.Namespace(text=["--bg is fast"])
    assert parse_line("title --bg").args == argparse.Namespace(text=["--bg"])
    assert parse_line("pick churn").args == argparse.Namespace(query=["churn"])
    assert parse_line("\tpick\tchurn  ").args == argparse.Namespace(query=["churn"])
    assert parse_line("models").args == argparse.Namespace()


@pytest.mark.parametrize(("line", "command", "reason"), [
    ("sessions --limit x", "sessions", "argument --limit: takes a positive whole number, got 'x'"),
    ("sessions --limit 0", "sessions", "argument --limit: takes a positive whole number, got '0'"),
    ("sessions --lim 3", "sessions", "unrecognized arguments: --lim"),
    ("resume", "resume", "the following arguments are required: ID"),
    ("title", "title", "the following arguments are required: TEXT"),
    ("models extra", "models", "unrecognized arguments: extra"),
    ("new --model", "new", "argument -m/--model: expected one argument"),
])
def test_bad_arguments_name_the_command_and_what_was_wrong(line: str, command: str, reason: str) -> None:
    with pytest.raises(CommandLineError) as caught:
        parse_line(line)
    assert str(caught.value) == reason and caught.value.command == command
    advice = caught.value.advice(line)
    assert advice == f"'%dsh {line}': {reason}; see %dsh {command}?"
    assert "\n" not in advice


@pytest.mark.parametrize("line", ["frobnicate", "frobnicate?", "help frobnicate"])
def test_unknown_commands_list_the_real_ones(line: str) -> None:
    with pytest.raises(CommandLineError) as caught:
        parse_line(line)
    message = str(caught.value)
    assert message.startswith("unknown command 'frobnicate'; the commands are sessions, new, resume")
    advice = caught.value.advice(line)
    assert advice.endswith("; see %dsh?") or advice.endswith("; see %dsh help?")


def test_an_open_quote_is_reported() -> None:
    with pytest.raises(CommandLineError) as caught:
        parse_line("sessions 'open")
    assert "close the quote" in str(caught.value) and caught.value.command == "sessions"
    assert caught.value.advice("sessions 'open").startswith("\"%dsh sessions 'open\": cannot split")


# --------------------------------------------------------------------------- `%dsh NAME?` in IPython's input


def test_help_request_transformer_rewrites_only_dsh_lines_ending_in_a_question_mark() -> None:
    assert help_request_transformer(["%dsh models?\n"]) == ["get_ipython().run_line_magic('dsh', 'models?')\n"]
    assert help_request_transformer(["  %dsh help sessions?"]) == [
        "  get_ipython().run_line_magic('dsh', 'help sessions?')"
    ]
    assert help_request_transformer(["x = 1\n", "%dsh title It's done?\n"]) == [
        "x = 1\n", "get_ipython().run_line_magic('dsh', \"title It's done?\")\n"
    ]
    for untouched in (["%dsh?\n"], ["%dsh models\n"], ["x = %dsh models?\n"], ["%dshx models?\n"],
                      ["%%dsh\n", "%dsh models?\n"], ["print('%dsh models?')\n"]):
        assert help_request_transformer(list(untouched)) == untouched


def test_installed_transformer_routes_the_question_to_the_magic() -> None:
    manager = TransformerManager()
    assert manager.transform_cell("%dsh models?") == "get_ipython().run_line_magic('pinfo', 'models')\n"
    manager.cleanup_transforms.append(help_request_transformer)
    assert manager.transform_cell("%dsh models?") == "get_ipython().run_line_magic('dsh', 'models?')\n"
    assert manager.transform_cell("%dsh?") == "get_ipython().run_line_magic('pinfo', '%dsh')\n"
    assert manager.transform_cell("%%dsh?") == "get_ipython().run_line_magic('pinfo', '%%dsh')\n"


def test_install_and_dispose() -> None:
    class Shell:
        def __init__(self) -> None:
            self.input_transformers_cleanup: list[Callable[[list[str]], list[str]]] = []

    shell = Shell()
    dispose = commands.install_help_requests(shell)
    commands.install_help_requests(shell)
    assert shell.input_transformers_cleanup == [help_request_transformer]
    dispose()
    dispose()
    assert shell.input_transformers_cleanup == []


# --------------------------------------------------------------------------- what the commands show


def test_models_table_has_a_row_per_model_and_marks_the_one_in_use() -> None:
    listings = list_models({})
    table = models_table(listings, 0, mark="current")
    bundle = table._repr_mimebundle_()
    plain = bundle["text/plain"].splitlines()
    assert plain[0].split()[:3] == ["spec", "provider", "model"]
    body = plain[1:1 + len(listings)]
    assert [line.split()[0] for line in body] == [listing.spec for listing in listings]
    assert body[0].startswith("offline (current)")
    assert sum("(current)" in line for line in plain) == 1
    deepseek = next(line for line in body if line.startswith("deepseek "))
    assert "DEEPSEEK_API_KEY not set" in deepseek and re.search(r"\bno\b", deepseek)
    assert "not needed" in body[0] and "32,768" in body[0]
    assert "%%dsh --model SPEC" in bundle["text/plain"]
    html = bundle["text/html"]
    assert html.count("<tr") == len(listings) + 1 and "<code>offline</code> <em>(current)</em>" in html
    assert '<tr style="font-weight:600">' in html


def test_models_table_with_a_key_set_and_an_unlisted_model() -> None:
    listings = list_models({"DEEPSEEK_API_KEY": "sk-test"})
    spec_row = next(i for i, listing in enumerate(listings) if listing.spec == "deepseek")
    plain = models_table(listings, spec_row, mark="default")._plain()
    line = next(line for line in plain.splitlines() if line.startswith("deepseek (default)"))
    assert "DEEPSEEK_API_KEY set" in line and "sk-test" not in plain
    unlisted = models_table(listings, None, mark="current", unlisted="This session uses ollama model 'qwen'.")
    assert "(current)" not in unlisted._plain() and "This session uses ollama model 'qwen'." in unlisted._plain()


@pytest.mark.parametrize("hostile", HOSTILE_LABELS)
def test_models_table_escapes_every_field(hostile: str) -> None:
    listing = ModelListing(hostile, "custom", hostile, None, None, True, True, hostile)
    bundle = models_table([listing], 0, mark="current")._repr_mimebundle_()
    assert "<img" not in bundle["text/html"] and "\x1b" not in bundle["text/html"]
    assert "\x1b" not in bundle["text/plain"] and "\x00" not in bundle["text/plain"]


def test_settings_table_shows_every_setting_its_help_and_what_changed() -> None:
    settings = DshSettings(placement="prompt-prefix", max_steps=7)
    table = settings_table(settings)
    plain = table._plain()
    lines = plain.splitlines()
    for name, default, text in commands.setting_rows(DshSettings):
        row = next(line for line in lines if line.split() and line.split()[0] == name)
        index = lines.index(row)
        assert lines[index + 1].strip() == text
        if name == "placement":
            assert row.split()[1:] == ['"prompt-prefix"', "changed", '(default', '"separate")']
        elif name == "max_steps":
            assert row.split()[1:] == ["7", "changed", "(default", "25)"]
        else:
            assert row.split()[1:] == [default]
    html = table._html()
    assert html.count("<tr") == len(DshSettings.class_trait_names(config=True)) + 1
    assert html.count('<tr style="font-weight:600">') == 2 and "&quot;prompt-prefix&quot;" in html


def test_env_values_are_a_mapping_shown_as_a_table() -> None:
    env = EnvValues({"DSH_SHELL": "1", "DSH_HOME": "/home/<me>/.dsh"})
    assert dict(env) == {"DSH_HOME": "/home/<me>/.dsh", "DSH_SHELL": "1"} and list(env) == ["DSH_HOME", "DSH_SHELL"]
    assert env["DSH_SHELL"] == "1" and len(env) == 2
    plain = repr(env).splitlines()
    assert plain[:3] == ["variable   value", "DSH_HOME   /home/<me>/.dsh", "DSH_SHELL  1"]
    html = env._repr_mimebundle_()["text/html"]
    assert "<code>/home/&lt;me&gt;/.dsh</code>" in html
    assert "No DSH_* values." in repr(EnvValues({}))


# --------------------------------------------------------------------------- README tables


def test_readme_tables_escape_pipes_and_keep_one_line_per_row() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-x", "--example", metavar="A|B", help="one | two\nthree")
    tables = readme_tables(parser, DshSettings)
    assert tables["| option | meaning |"].splitlines()[2] == "| `-x/--example A\\|B` | one \\| two three |"
    text = "intro\n\n" + "\n\n".join(tables.values()) + "\n\nafter\n"
    assert markdown_tables(text) == tables


def test_config_help_shows_code_as_code_and_no_math() -> None:
    from dsh_jupyter.notebook.commands import inline_code_html, settings_table
    from dsh_jupyter.notebook.config import DshSettings

    assert inline_code_html("set `a<b` or `$X`, one ` left") == "set <code>a&lt;b</code> or <code>$X</code>, one ` left"
    html = settings_table(DshSettings())._repr_mimebundle_()["text/html"]
    row = html[html.index("foreign_sessions"):]
    row = row[:row.index("</tr>")]
    assert "`" not in row and "<code>&#36;CODEX_HOME</code>" in row
    assert "$" not in html  # every dollar is an entity MathJax's source scan never pairs
