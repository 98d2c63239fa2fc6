"""The managed DSH_* registry (validation, collection, listing) and child-environment scrubbing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.session import SessionHeader
from dsh_jupyter.store.base import SessionLocation
from dsh_jupyter.tools.base import ToolExecution
from dsh_jupyter.tools.env import (
    DSH_SESSION_JSONL,
    ShellEnvContributor,
    ShellEnvError,
    ShellEnvRegistry,
    child_env,
    scrubbed_env,
)


def _execution(tmp_path: Path, header: SessionHeader | None = None,
               location: SessionLocation | None = None) -> ToolExecution:
    return ToolExecution.create("call-1", str(tmp_path), header=header, locate=lambda: location)


def _contributor(name: str, variables: Mapping[str, Any],
                 values: Mapping[str, Any] | None = None) -> ShellEnvContributor:
    return ShellEnvContributor(name, variables, lambda execution: dict(values or {}))


@pytest.fixture
def registry(tmp_path: Path) -> ShellEnvRegistry:
    return ShellEnvRegistry(tmp_path / "home")


# -- registration rules ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", " ", "\t"])
def test_blank_contributor_name_is_refused(registry: ShellEnvRegistry, name: str) -> None:
    with pytest.raises(ShellEnvError, match="non-blank name"):
        registry.register(_contributor(name, {"DSH_X": "x"}))


def test_duplicate_contributor_name_is_refused(registry: ShellEnvRegistry) -> None:
    registry.register(_contributor("tools", {"DSH_A": "a"}))
    with pytest.raises(ShellEnvError, match='"tools" is already registered'):
        registry.register(_contributor("tools", {"DSH_B": "b"}))


@pytest.mark.parametrize("key", ["dsh_invalid", "DSH_", "DSH_lower", "DSH_1X", "OTHER_X", "DSH-X", "DSH_A-B"])
def test_malformed_key_is_refused(registry: ShellEnvRegistry, key: str) -> None:
    with pytest.raises(ShellEnvError, match=f'declared invalid key "{key}"'):
        registry.register(_contributor("bad", {key: "something"}))


@pytest.mark.parametrize("key", ["DSH_HOME", "DSH_SHELL", "DSH_SESSION_ID"])
def test_reserved_keys_cannot_be_owned(registry: ShellEnvRegistry, key: str) -> None:
    with pytest.raises(ShellEnvError, match=f'cannot own reserved key "{key}"'):
        registry.register(_contributor("greedy", {key: "mine"}))


@pytest.mark.parametrize("description", ["", "  ", {"description": " "}, {"other": "x"}, 3])
def test_blank_description_is_refused(registry: ShellEnvRegistry, description: Any) -> None:
    with pytest.raises(ShellEnvError, match='must describe "DSH_X"'):
        registry.register(_contributor("quiet", {"DSH_X": description}))


def test_key_owned_by_another_contributor_names_both(registry: ShellEnvRegistry) -> None:
    registry.register(_contributor("first", {"DSH_SHARED": "one"}))
    with pytest.raises(ShellEnvError) as info:
        registry.register(_contributor("second", {"DSH_SHARED": "two"}))
    message = str(info.value)
    assert '"DSH_SHARED"' in message and '"first"' in message and '"second"' in message


def test_builtin_jsonl_key_is_owned_by_session_persistence(registry: ShellEnvRegistry) -> None:
    with pytest.raises(ShellEnvError, match='owned by contributor "session-persistence"'):
        registry.register(_contributor("thief", {DSH_SESSION_JSONL: "stolen"}))


def test_validation_order_and_no_partial_registration(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    # The first bad key in declaration order is reported, and nothing of the contributor remains.
    with pytest.raises(ShellEnvError, match="invalid key"):
        registry.register(_contributor("mixed", {"DSH_GOOD": "fine", "bad": "x", "DSH_HOME": "y"}))
    with pytest.raises(ShellEnvError, match="reserved"):
        registry.register(_contributor("mixed", {"DSH_GOOD": "fine", "DSH_HOME": "y", "bad": "x"}))
    # Neither attempt kept the name or DSH_GOOD.
    registry.register(_contributor("mixed", {"DSH_GOOD": "fine"}, {"DSH_GOOD": "1"}))
    assert registry.collect(_execution(tmp_path))["DSH_GOOD"] == "1"


def test_disposal_frees_name_and_keys(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    dispose = registry.register(_contributor("temp", {"DSH_TEMP": "temporary"}, {"DSH_TEMP": "on"}))
    assert registry.collect(_execution(tmp_path))["DSH_TEMP"] == "on"
    dispose()
    dispose()  # idempotent
    assert "DSH_TEMP" not in registry.collect(_execution(tmp_path))
    assert all(entry.key != "DSH_TEMP" for entry in registry.list())
    registry.register(_contributor("temp", {"DSH_TEMP": "again"}))


def test_stale_disposer_does_not_remove_a_newer_registration(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    old = registry.register(_contributor("temp", {"DSH_TEMP": "temporary"}, {"DSH_TEMP": "old"}))
    old()
    registry.register(_contributor("temp", {"DSH_TEMP": "temporary"}, {"DSH_TEMP": "new"}))
    old()
    assert registry.collect(_execution(tmp_path))["DSH_TEMP"] == "new"


# -- collection ------------------------------------------------------------------------------------
def test_collect_without_agent(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    values = registry.collect(_execution(tmp_path))
    assert dict(values) == {"DSH_HOME": str(tmp_path / "home"), "DSH_SHELL": "1"}


def test_collect_with_agent_adds_session_id(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    header = SessionHeader.new(tmp_path)
    values = registry.collect(_execution(tmp_path, header))
    assert values["DSH_SESSION_ID"] == header.id
    assert values["DSH_SHELL"] == "1"


def test_snapshot_is_frozen_and_sorted(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    registry.register(_contributor("zeta", {"DSH_ZZ": "z"}, {"DSH_ZZ": "z"}))
    registry.register(_contributor("alpha", {"DSH_AA": "a"}, {"DSH_AA": "a"}))
    values = registry.collect(_execution(tmp_path, SessionHeader.new(tmp_path)))
    assert list(values) == sorted(values)
    with pytest.raises(TypeError):
        values["DSH_AA"] = "changed"  # type: ignore[index]


def test_contributors_run_in_name_order(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    calls: list[str] = []

    def tracer(name: str) -> ShellEnvContributor:
        def resolve(execution: Any) -> dict[str, str]:
            calls.append(name)
            return {}

        return ShellEnvContributor(name, {f"DSH_{name.upper()}": name}, resolve)

    for name in ["b", "C", "a"]:
        registry.register(tracer(name))
    registry.collect(_execution(tmp_path))
    assert calls == ["a", "b", "C"]


def test_undeclared_key_is_an_error(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    registry.register(_contributor("liar", {"DSH_DECLARED": "d"}, {"DSH_OTHER": "x"}))
    with pytest.raises(ShellEnvError, match='"liar" returned undeclared key "DSH_OTHER"'):
        registry.collect(_execution(tmp_path))


@pytest.mark.parametrize("value", [42, None, b"bytes", True])
def test_non_string_value_is_an_error(registry: ShellEnvRegistry, tmp_path: Path, value: Any) -> None:
    registry.register(_contributor("sloppy", {"DSH_N": "n"}, {"DSH_N": value}))
    with pytest.raises(ShellEnvError, match='"sloppy" returned a non-string value for "DSH_N"'):
        registry.collect(_execution(tmp_path))


def test_omitted_key_stays_unset(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    registry.register(_contributor("maybe", {"DSH_MAYBE": "sometimes"}, {}))
    assert "DSH_MAYBE" not in registry.collect(_execution(tmp_path))


def test_resolver_sees_each_execution(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    registry.register(ShellEnvContributor("call", {"DSH_CALL": "the call id"},
                                          lambda execution: {"DSH_CALL": execution.call_id}))
    one = ToolExecution.create("one", str(tmp_path))
    two = ToolExecution.create("two", str(tmp_path))
    assert registry.collect(one)["DSH_CALL"] == "one"
    assert registry.collect(two)["DSH_CALL"] == "two"


# -- DSH_SESSION_JSONL -----------------------------------------------------------------------------
def test_jsonl_location_is_published(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    header = SessionHeader.new(tmp_path)
    target = str(tmp_path / "sessions" / f"{header.id}.jsonl")
    values = registry.collect(_execution(tmp_path, header, SessionLocation("jsonl", target)))
    assert values[DSH_SESSION_JSONL] == target
    assert not Path(target).exists()  # a location hint: nothing was created


@pytest.mark.parametrize("location", [None, SessionLocation("sqlite", "/tmp/db.sqlite"),
                                      SessionLocation("jsonl.zst", "/tmp/x.jsonl.zst")])
def test_jsonl_location_absent_for_other_backends(registry: ShellEnvRegistry, tmp_path: Path,
                                                  location: SessionLocation | None) -> None:
    values = registry.collect(_execution(tmp_path, SessionHeader.new(tmp_path), location))
    assert DSH_SESSION_JSONL not in values


def test_jsonl_location_absent_without_agent(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    asked: list[bool] = []

    def locate() -> SessionLocation:
        asked.append(True)
        return SessionLocation("jsonl", "/tmp/x.jsonl")

    values = registry.collect(ToolExecution.create("c", str(tmp_path), locate=locate))
    assert DSH_SESSION_JSONL not in values and not asked


def test_locate_is_queried_at_execution_time(registry: ShellEnvRegistry, tmp_path: Path) -> None:
    current: dict[str, SessionLocation | None] = {"loc": None}
    execution = ToolExecution.create("c", str(tmp_path), header=SessionHeader.new(tmp_path),
                                     locate=lambda: current["loc"])
    assert DSH_SESSION_JSONL not in registry.collect(execution)
    current["loc"] = SessionLocation("jsonl", "/later/x.jsonl")
    assert registry.collect(execution)[DSH_SESSION_JSONL] == "/later/x.jsonl"


def test_session_persistence_can_be_left_out(tmp_path: Path) -> None:
    registry = ShellEnvRegistry(tmp_path, session_persistence=False)
    values = registry.collect(_execution(tmp_path, SessionHeader.new(tmp_path), SessionLocation("jsonl", "/x.jsonl")))
    assert DSH_SESSION_JSONL not in values
    registry.register(_contributor("mine", {DSH_SESSION_JSONL: "my own"}))


# -- listing ---------------------------------------------------------------------------------------
def test_list_includes_builtins_and_contributors_sorted(registry: ShellEnvRegistry) -> None:
    registry.register(_contributor("extra", {"DSH_ZED": "last", "DSH_ALPHA": {"description": "first"}}))
    entries = registry.list()
    keys = [entry.key for entry in entries]
    assert keys == sorted(keys)
    by_key = {entry.key: entry for entry in entries}
    assert by_key["DSH_HOME"].builtin and by_key["DSH_SHELL"].builtin and by_key["DSH_SESSION_ID"].builtin
    assert by_key[DSH_SESSION_JSONL].contributor == "session-persistence" and by_key[DSH_SESSION_JSONL].builtin
    assert by_key["DSH_ALPHA"].description == "first" and not by_key["DSH_ALPHA"].builtin
    assert by_key["DSH_ZED"].contributor == "extra"


def test_list_runs_no_resolver(registry: ShellEnvRegistry) -> None:
    def explode(execution: ToolExecution) -> dict[str, str]:
        raise AssertionError("resolver must not run")

    registry.register(ShellEnvContributor("lazy", {"DSH_LAZY": "lazy"}, explode))
    assert any(entry.key == "DSH_LAZY" for entry in registry.list())


def test_home_is_resolved_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "first"))
    registry = ShellEnvRegistry()
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "second"))
    assert registry.collect(_execution(tmp_path))["DSH_HOME"] == str(tmp_path / "first")


# -- scrubbing and merge order ---------------------------------------------------------------------
PARENT = {
    "PATH": "/usr/bin",
    "HOME": "/home/me",
    "DSH_TEST_API_KEY": "k",
    "DSH_TEST_TOKEN": "t",
    "DSH_TEST_PLAIN": "plain",
    "dsh_lowercase": "x",
    "OPENAI_API_KEY": "sk-secret",
    "GITHUB_TOKEN": "ghp",
    "DB_PASSWORD": "pw",
    "my_secret_value": "s",
    "DSH_SESSION_ID": "stale",
    "TERM": "xterm-256color",
}


def test_scrub_removes_credentials_and_every_dsh_name() -> None:
    env = scrubbed_env(PARENT)
    for gone in ["DSH_TEST_API_KEY", "DSH_TEST_TOKEN", "DSH_TEST_PLAIN", "dsh_lowercase", "OPENAI_API_KEY",
                 "GITHUB_TOKEN", "DB_PASSWORD", "my_secret_value", "DSH_SESSION_ID"]:
        assert gone not in env, gone
    assert env["PATH"] == "/usr/bin" and env["HOME"] == "/home/me"
    assert env["NO_COLOR"] == "1" and env["TERM"] == "dumb" and env["PAGER"] == "cat" and env["GIT_PAGER"] == "cat"


def test_merge_order_caller_then_managed_last() -> None:
    env = child_env({"DSH_SESSION_ID": "managed", "DSH_SHELL": "1"},
                    {"DSH_SESSION_ID": "caller", "TERM": "vt100", "EXTRA": "e", "DSH_CALLER_ONLY": "c"},
                    PARENT)
    assert env["DSH_SESSION_ID"] == "managed"
    assert env["TERM"] == "vt100"  # the caller may change terminal settings
    assert env["EXTRA"] == "e" and env["DSH_CALLER_ONLY"] == "c"
    assert "DSH_TEST_PLAIN" not in env


def test_default_parent_is_os_environ_and_is_not_modified(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TEST_PLAIN", "plain")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_SESSION_ID", "stale-parent")
    before = dict(os.environ)
    env = child_env({"DSH_SHELL": "1"})
    assert "DSH_TEST_PLAIN" not in env and "OPENAI_API_KEY" not in env and "DSH_SESSION_ID" not in env
    assert dict(os.environ) == before
