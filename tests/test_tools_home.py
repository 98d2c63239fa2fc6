"""DSH_HOME precedence and tilde expansion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_jupyter.tools.home import expand_home, resolve_dsh_home


def test_explicit_config_wins_over_environment(tmp_path: Path) -> None:
    env = {"DSH_HOME": str(tmp_path / "from-env"), "HOME": str(tmp_path)}
    assert resolve_dsh_home(tmp_path / "explicit", env) == tmp_path / "explicit"


def test_environment_used_when_no_explicit_value(tmp_path: Path) -> None:
    env = {"DSH_HOME": str(tmp_path / "from-env"), "HOME": str(tmp_path)}
    assert resolve_dsh_home(None, env) == tmp_path / "from-env"


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_blank_environment_falls_back_to_home_dot_dsh(tmp_path: Path, blank: str) -> None:
    env = {"DSH_HOME": blank, "HOME": str(tmp_path)}
    assert resolve_dsh_home(None, env) == tmp_path / ".dsh"


def test_unset_environment_falls_back_to_home_dot_dsh(tmp_path: Path) -> None:
    assert resolve_dsh_home(None, {"HOME": str(tmp_path)}) == tmp_path / ".dsh"


@pytest.mark.parametrize("raw, expected", [("~", ""), ("~/state", "state"), ("~\\state", "state")])
def test_leading_tilde_forms_expand(tmp_path: Path, raw: str, expected: str) -> None:
    env = {"HOME": str(tmp_path)}
    assert resolve_dsh_home(raw, env) == Path(os.path.join(str(tmp_path), expected)).resolve()
    assert resolve_dsh_home(None, {**env, "DSH_HOME": raw}) == Path(os.path.join(str(tmp_path), expected)).resolve()


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_dsh_home("rel/home", {"HOME": "/nowhere"}) == tmp_path / "rel" / "home"
    assert expand_home("~alice/x", {"HOME": "/nowhere"}) == str(tmp_path / "~alice" / "x")


def test_blank_explicit_value_is_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="blank"):
        resolve_dsh_home("  ", {})


def test_default_reads_the_real_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "ambient"))
    assert resolve_dsh_home() == tmp_path / "ambient"
