"""The value-based secret masker: which names count, which values are masked, where masking applies."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.secrets import (
    MASK,
    MIN_SECRET_LENGTH,
    SecretMasker,
    default_masker,
    is_credential_name,
    mask_text,
    restore_masked_lines,
    spellings,
    url_passwords,
    watch_model,
)
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry
from dsh_jupyter.tools.env import scrubbed_env


@pytest.mark.parametrize("name", [
    "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "api_key", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SOMETHING_TOKEN",
    "DB_PASSWORD", "PGPASSWORD", "MYSQL_PWD", "DBPWD", "SMTP_PASS", "PGPASS", "GPG_PASSPHRASE", "FTP_PASSWD",
    "AUTH", "HTTP_AUTH", "OAUTH_CLIENT", "AUTHORIZATION", "AUTH_HEADER", "GOOGLE_APPLICATION_CREDENTIALS",
    "my_secret_value", "AZURE_CREDENTIAL",
])
def test_credential_names(name: str) -> None:
    assert is_credential_name(name)


@pytest.mark.parametrize("name", [
    "PWD", "OLDPWD", "pwd", "SSH_AUTH_SOCK", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "XAUTHORITY", "PGPASSFILE",
    "PASSENGER_APP_ENV", "HOME", "PATH", "DATABASE_URL", "LANG",
])
def test_names_that_are_not_credentials(name: str) -> None:
    assert not is_credential_name(name)


def test_url_passwords_are_found_in_any_value() -> None:
    assert url_passwords("postgres://admin:s3cret-pw@db/x") == ["s3cret-pw"]
    assert url_passwords("redis://:only-pw@cache:6379/0 http://u:p%40ss@proxy:8080") == ["only-pw", "p%40ss"]
    assert url_passwords("https://example.com:8080/path a@b ssh://git@github.com:22") == []


def test_masker_collects_credentials_url_passwords_and_nothing_else() -> None:
    masker = SecretMasker({
        "OPENAI_API_KEY": "sk-openai-0123456789",
        "DATABASE_URL": "postgres://admin:s3cret-pw@db/x",
        "MYSQL_PWD": "mysql-pw-42",
        "SOMETHING_TOKEN": "tok-abcdef",
        "PWD": "/home/someone/project",
        "OLDPWD": "/home/someone",
        "SHORT_TOKEN": "1",
        "HOME": "/home/someone",
    })
    assert masker.values() == {"sk-openai-0123456789", "s3cret-pw", "mysql-pw-42", "tok-abcdef"}
    text = ("key=sk-openai-0123456789 url=postgres://admin:s3cret-pw@db/x pw=mysql-pw-42 t=tok-abcdef "
            "cwd=/home/someone/project one=1")
    assert masker.mask_text(text) == (f"key={MASK} url=postgres://admin:{MASK}@db/x pw={MASK} t={MASK} "
                                      "cwd=/home/someone/project one=1")


def test_paths_of_existing_files_are_locations_not_secrets(tmp_path: Path) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text("{}", encoding="utf-8")
    masker = SecretMasker({"GOOGLE_APPLICATION_CREDENTIALS": str(creds), "CREDENTIALS_DIR": str(tmp_path),
                           "SSL_KEY_FILE": str(tmp_path / "missing.pem")})
    assert str(tmp_path / "missing.pem") in masker.values()  # a path that does not exist may be a secret
    assert not [v for v in masker.values() if "creds.json" in v or v == str(tmp_path)]
    assert masker.mask_text(f"home={tmp_path} creds={creds}") == f"home={tmp_path} creds={creds}"
    assert not masker.is_secret_variable("HOME", str(tmp_path))
    assert masker.is_secret_variable("CREDENTIALS_DIR", str(tmp_path))  # the name still keeps it from children


def test_short_values_are_not_masked() -> None:
    masker = SecretMasker({"A_TOKEN": "x" * (MIN_SECRET_LENGTH - 1), "B_TOKEN": "y" * MIN_SECRET_LENGTH})
    assert masker.mask_text("x" * (MIN_SECRET_LENGTH - 1) + " " + "y" * MIN_SECRET_LENGTH) == \
        "x" * (MIN_SECRET_LENGTH - 1) + " " + MASK


def test_url_password_in_text_is_masked_without_any_environment() -> None:
    masker = SecretMasker({})
    assert masker.mask_text("connect to mysql://root:hunter2@10.0.0.1:3306/app now") == \
        f"connect to mysql://root:{MASK}@10.0.0.1:3306/app now"
    plain = "plain https://example.com/a:b and user@host"
    assert masker.mask_text(plain) == plain


def test_escaped_and_encoded_spellings_are_masked() -> None:
    value = 'pa"ss\\word/+=1'
    masker = SecretMasker({"APP_PASSWORD": value})
    assert masker.mask_text(json.dumps({"v": value})) == json.dumps({"v": MASK})
    assert masker.mask_text(repr(value)) == f"'{MASK}'"
    from urllib.parse import quote

    assert masker.mask_text("q=" + quote(value, safe="")) == f"q={MASK}"
    assert value.strip() in spellings(value)


def test_multi_line_values_mask_each_line() -> None:
    key = "-----BEGIN KEY-----\nAAAAB3NzaC1yc2EAAAADAQABAAABAQ\n-----END KEY-----\n"
    masker = SecretMasker({"DEPLOY_KEY": key})
    assert "AAAAB3NzaC1yc2EAAAADAQABAAABAQ" not in masker.mask_text("line: AAAAB3NzaC1yc2EAAAADAQABAAABAQ")
    assert masker.mask_text(key.replace("\n", "\r\n")).count(MASK) == 3


def test_longer_secret_wins_over_a_contained_shorter_one() -> None:
    masker = SecretMasker({"A_TOKEN": "abcdef", "B_TOKEN": "abcdef-ghijkl"})
    assert masker.mask_text("abcdef-ghijkl abcdef") == f"{MASK} {MASK}"


def test_mask_data_walks_nested_values_and_keys() -> None:
    masker = SecretMasker({"API_KEY": "secret-value-1"})
    data: dict[str, Any] = {"a": ["secret-value-1", ("x secret-value-1", 3)], "secret-value-1": None, "n": 1.5,
                            "nested": {"deep": [{"t": "ok secret-value-1"}]}}
    assert masker.mask_data(data) == {"a": [MASK, (f"x {MASK}", 3)], MASK: None, "n": 1.5,
                                      "nested": {"deep": [{"t": f"ok {MASK}"}]}}
    assert data["a"][0] == "secret-value-1"  # the input is not changed


@dataclass(frozen=True)
class _Record:
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    count: int = 0


def test_mask_fields_returns_the_same_object_when_nothing_changed() -> None:
    masker = SecretMasker({"API_KEY": "secret-value-1"})
    clean = _Record("nothing here", {"k": "v"}, 2)
    assert masker.mask_fields(clean) is clean
    dirty = masker.mask_fields(_Record("a secret-value-1", {"k": ["secret-value-1"]}, 2))
    assert dirty == _Record(f"a {MASK}", {"k": [MASK]}, 2)
    assert masker.mask_fields("not a dataclass") == "not a dataclass"


def test_environment_changes_are_picked_up_and_seen_values_stay_masked() -> None:
    env: dict[str, str] = {}
    masker = SecretMasker(env)
    assert masker.mask_text("late-key-123456") == "late-key-123456"
    env["LATE_API_KEY"] = "late-key-123456"
    assert masker.mask_text("late-key-123456") == MASK
    env["LATE_API_KEY"] = "rotated-key-987"
    assert masker.mask_text("late-key-123456 rotated-key-987") == f"{MASK} {MASK}"
    del env["LATE_API_KEY"]
    assert masker.mask_text("late-key-123456") == MASK


def test_watched_names_mask_any_variable() -> None:
    env = {"LLM_ACCESS": "custom-model-key-1"}
    masker = SecretMasker(env)
    assert masker.mask_text("custom-model-key-1") == "custom-model-key-1"
    masker.watch_name("llm_access")
    assert masker.mask_text("custom-model-key-1") == MASK
    assert masker.is_secret_variable("LLM_ACCESS", "anything")


def test_added_values_are_masked() -> None:
    masker = SecretMasker({})
    masker.add_value("explicit-provider-key")
    assert masker.mask_text("k=explicit-provider-key") == f"k={MASK}"


def test_default_masker_follows_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNIT_TEST_SECRET", "unit-secret-0042")
    assert mask_text("x unit-secret-0042 y") == f"x {MASK} y"
    monkeypatch.setenv("UNIT_MODEL_VAR", "unit-model-key-77")

    class _Provider:
        api_key_env = "UNIT_MODEL_VAR"

    assert mask_text("unit-model-key-77") == "unit-model-key-77"
    watch_model(_Provider())
    assert mask_text("unit-model-key-77") == MASK
    assert default_masker().values() >= {"unit-secret-0042", "unit-model-key-77"}


def test_scrubbed_env_removes_the_full_credential_list_and_url_passwords() -> None:
    parent = {
        "MYSQL_PWD": "mysql-pw-42", "SMTP_PASS": "smtp-pass-1", "AUTH_HEADER": "Bearer abcdefg",
        "GOOGLE_APPLICATION_CREDENTIALS": "/etc/creds.json",
        "DATABASE_URL": "postgres://admin:s3cret-pw@db/x", "CACHE_URL": "redis://cache:6379/0",
        "PWD": "/work", "OLDPWD": "/", "SSH_AUTH_SOCK": "/tmp/agent.sock", "GIT_AUTHOR_NAME": "Ada",
        "PATH": "/usr/bin",
    }
    env = scrubbed_env(parent)
    for gone in ["MYSQL_PWD", "SMTP_PASS", "AUTH_HEADER", "GOOGLE_APPLICATION_CREDENTIALS", "DATABASE_URL"]:
        assert gone not in env, gone
    for kept in ["CACHE_URL", "PWD", "OLDPWD", "SSH_AUTH_SOCK", "GIT_AUTHOR_NAME", "PATH"]:
        assert env[kept] == parent[kept]


def test_scrubbed_env_removes_copies_of_secret_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPY_SOURCE_TOKEN", "copied-token-value")
    env = scrubbed_env({"INNOCENT": "prefix copied-token-value", "OTHER": "fine", **os.environ})
    assert "INNOCENT" not in env and env["OTHER"] == "fine" and "COPY_SOURCE_TOKEN" not in env


class _Leaky(Tool):
    name = "leaky"
    description = "prints a secret"

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        return ToolOutput(f"value: {os.environ['LEAKY_API_KEY']}", meta={"raw": os.environ["LEAKY_API_KEY"]})


class _Failing(Tool):
    name = "failing"
    description = "fails with a secret in its message"

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        raise RuntimeError(f"could not use {os.environ['LEAKY_API_KEY']}")


async def test_every_tool_result_leaves_the_registry_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAKY_API_KEY", "leaky-key-0123456")
    registry = ToolRegistry()
    registry.register(_Leaky())
    registry.register(_Failing())
    execution = ToolExecution.create("c1", ".")
    output = await registry.execute("leaky", "{}", execution)
    assert output.text == f"value: {MASK}" and output.meta == {"raw": MASK}
    failed = await registry.execute("failing", "{}", execution)
    assert failed.is_error and "leaky-key-0123456" not in failed.text and MASK in failed.text
    unknown = await registry.execute("nope-leaky-key-0123456", "{}", execution)
    assert "leaky-key-0123456" not in unknown.text


def test_mask_encoded_reencodes_only_when_a_secret_is_present() -> None:
    masker = SecretMasker({"API_KEY": 'quote"d-key-1', "DB_URL": "mysql://u:dbpass99@h/x"})
    calls: list[object] = []

    def encode(value: object) -> bytes:
        calls.append(value)
        return json.dumps(value, ensure_ascii=False).encode()

    clean = {"text": "nothing secret, see https://example.com/a:b@c"}
    assert masker.mask_encoded(clean, encode) == encode(clean) and len(calls) == 2
    calls.clear()
    dirty = {"text": 'the key quote"d-key-1', "nested": ["café dbpass99"]}
    assert json.loads(masker.mask_encoded(dirty, encode)) == {"text": f"the key {MASK}", "nested": [f"café {MASK}"]}
    assert len(calls) == 2  # encoded, found, masked and encoded again
    url = {"text": "ftp://anon:guest-pw@files/"}
    assert json.loads(masker.mask_encoded(url, encode)) == {"text": f"ftp://anon:{MASK}@files/"}


def test_url_masking_needs_a_scheme_before_the_separator() -> None:
    masker = SecretMasker({})
    assert masker.mask_text("://user:pw@host and 1://u:p@h") == "://user:pw@host and 1://u:p@h"
    assert masker.mask_text("a://u:p1@h b://v:p2@k") == f"a://u:{MASK}@h b://v:{MASK}@k"


def test_masked_lines_get_their_values_back_from_the_sources_they_were_read_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TEST_A_TOKEN", "alpha-secret-111")
    monkeypatch.setenv("DSH_TEST_B_TOKEN", "beta-secret-222")
    sources = ['a = "alpha-secret-111"\nb = "beta-secret-222"', 'a = "beta-secret-222"', "note = '[masked] is a word'"]
    assert restore_masked_lines("no secret here", sources) == ("no secret here", [])
    text = 'x = 1\na = "[masked]"\nb = "[masked]"\nnote = \'[masked] is a word\'\nc = "[masked]"'
    restored, missing = restore_masked_lines(text, sources)
    # the first source that masks to a line wins (the edited cell comes first); a literal [masked] stays
    assert restored.split("\n")[:4] == ["x = 1", 'a = "alpha-secret-111"', 'b = "beta-secret-222"',
                                        "note = '[masked] is a word'"]
    assert missing == [5] and restored.split("\n")[4] == 'c = "[masked]"'
