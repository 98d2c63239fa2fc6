"""Hook configuration parsing for both dialects, and matcher semantics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.tools.hooks.config import (
    CommandHook,
    HookConfigError,
    claude_code_matcher,
    codex_matcher,
    parse_hook_config,
)


def _settings(event: str = "PreToolUse", matcher: Any = "Bash", **entry: Any) -> dict[str, Any]:
    hook = {"type": "command", "command": "echo hi", **entry}
    group: dict[str, Any] = {"hooks": [hook]}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


# -- matchers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("matcher", [None, "", "*", "  "])
@pytest.mark.parametrize("compile_", [claude_code_matcher, codex_matcher])
def test_empty_and_star_match_everything(matcher: str | None, compile_: Any) -> None:
    match = compile_(matcher)
    assert match("bash") and match("python") and match("")


def test_claude_code_exact_names_and_alternatives() -> None:
    exact = claude_code_matcher("Bash")
    assert exact("Bash") and not exact("bash") and not exact("BashOutput") and not exact("MyBash")
    either = claude_code_matcher("bash|Bash")
    assert either("bash") and either("Bash") and not either("bash_output")
    listed = claude_code_matcher("Edit, Write")
    assert listed("Edit") and listed("Write") and not listed("Edit, Write")
    # A plain name is never a substring match, even one that looks like a prefix.
    assert not claude_code_matcher("mcp__memory")("mcp__memory__create")


def test_claude_code_regex_is_unanchored() -> None:
    regex = claude_code_matcher("Notebook.*")
    assert regex("NotebookEdit") and regex("MyNotebookEdit") and not regex("Edit")
    anchored = claude_code_matcher("^bash$")
    assert anchored("bash") and not anchored("bash_output")


def test_codex_matchers_are_unanchored_regexes() -> None:
    match = codex_matcher("Bash")
    assert match("Bash") and match("BashOutput") and match("MyBash") and not match("bash")
    assert codex_matcher("^bash$")("bash") and not codex_matcher("^bash$")("bash_output")
    assert codex_matcher("startup|resume")("resume")


# -- parsing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", ["claude-code", "codex"])
def test_nested_shape_is_parsed(dialect: str) -> None:
    config = parse_hook_config({
        "hooks": {
            "PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "a", "timeout": 5},
                                                         {"type": "command", "command": "b"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "c"}]}],
        },
        "permissions": {"allow": []},  # other settings keys are ignored
    }, dialect=dialect)
    assert config.hooks_for("PreToolUse", "bash") == [CommandHook("a", 5.0), CommandHook("b", None)]
    assert config.hooks_for("PreToolUse", "python") == []
    assert config.hooks_for("Stop", None) == [CommandHook("c", None)]
    assert config.warnings == () and not config.empty


def test_matcher_is_ignored_for_events_without_one() -> None:
    config = parse_hook_config(_settings("UserPromptSubmit", matcher="nothing-matches"), dialect="claude-code")
    assert config.hooks_for("UserPromptSubmit", None) == [CommandHook("echo hi")]


def test_session_start_matcher_filters_source() -> None:
    config = parse_hook_config(_settings("SessionStart", matcher="startup|resume"), dialect="codex")
    assert config.hooks_for("SessionStart", "resume") and not config.hooks_for("SessionStart", "compact")


def test_codex_accepts_timeout_sec() -> None:
    config = parse_hook_config(_settings(timeoutSec=7), dialect="codex")
    assert config.hooks_for("PreToolUse", "Bash")[0].timeout == 7.0


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(_settings(timeout=3)))
    config = parse_hook_config(path, dialect="claude-code")
    assert config.origin == str(path) and config.hooks_for("PreToolUse", "Bash")[0].timeout == 3.0
    assert parse_hook_config(str(path), dialect="claude-code").hooks_for("PreToolUse", "Bash")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(HookConfigError, match="does not exist"):
        parse_hook_config(tmp_path / "missing.json", dialect="codex")
    broken = tmp_path / "hooks.json"
    broken.write_text("{not json")
    with pytest.raises(HookConfigError, match=f"{broken}.*not valid JSON"):
        parse_hook_config(broken, dialect="codex")


def test_settings_without_hooks_is_empty() -> None:
    config = parse_hook_config({"model": "x"}, dialect="claude-code")
    assert config.empty and config.hooks_for("PreToolUse", "bash") == []
    assert parse_hook_config({"hooks": None}, dialect="codex").empty


def test_disable_all_hooks() -> None:
    settings = {**_settings(), "disableAllHooks": True}
    config = parse_hook_config(settings, dialect="claude-code")
    assert config.empty and "disable" in config.warnings[0]


def test_unsupported_types_and_unfired_events_are_warnings() -> None:
    config = parse_hook_config({"hooks": {
        "PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "judge it"}, {"type": "command", "command": "x"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
    }}, dialect="claude-code")
    assert config.hooks_for("PreToolUse", "bash") == [CommandHook("x")]
    assert any("'prompt' is not supported" in w for w in config.warnings)
    assert any("'Notification'" in w for w in config.warnings)


def test_missing_type_means_command() -> None:
    config = parse_hook_config({"hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}}, dialect="codex")
    assert config.hooks_for("Stop", None) == [CommandHook("x")]


@pytest.mark.parametrize("document, fragment", [
    ([], "JSON object"),
    ({"PreToolUse": []}, "under a top-level \"hooks\" key"),
    ({"hooks": []}, "must be an object"),
    ({"hooks": {"Stop": {"hooks": []}}}, "hooks.Stop must be a list"),
    ({"hooks": {"Stop": ["x"]}}, r"hooks.Stop\[0\] must be an object"),
    ({"hooks": {"Stop": [{"matcher": 3, "hooks": []}]}}, "matcher must be a string"),
    ({"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}, "not a valid regular expression"),
    ({"hooks": {"Stop": [{"hooks": {"command": "x"}}]}}, r"\.hooks must be a list"),
    ({"hooks": {"Stop": [{"hooks": ["echo"]}]}}, "must be an object"),
    ({"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}, "non-empty \"command\""),
    ({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "  "}]}]}}, "non-empty \"command\""),
    ({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}}, "positive number"),
    ({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": "9"}]}]}}, "positive number"),
])
def test_malformed_configuration_is_explained(document: Any, fragment: str) -> None:
    with pytest.raises(HookConfigError, match=fragment):
        parse_hook_config(document, dialect="codex")


def test_claude_code_regex_error_is_explained() -> None:
    with pytest.raises(HookConfigError, match="not a valid regular expression"):
        parse_hook_config(_settings(matcher="Bash("), dialect="claude-code")


def test_unknown_dialect() -> None:
    with pytest.raises(ValueError, match="unknown hook dialect"):
        parse_hook_config({}, dialect="vim")
