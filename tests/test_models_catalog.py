"""Known context windows and model-name normalisation."""

from __future__ import annotations

import pytest

from dsh_jupyter.models.catalog import known_context_window, normalise_model_name


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("deepseek-v4-flash", 1_000_000),
        ("deepseek-chat", 131_072),
        ("deepseek-reasoner", 131_072),
        ("gpt-4o", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4-0613", 8_192),
        ("o3", 200_000),
        ("o3-2025-04-16", 200_000),
        ("Qwen/Qwen2.5-7B-Instruct", 32_768),
        ("llama3.1:8b", 131_072),
        ("meta-llama/Llama-3.1-8B-Instruct", 131_072),
        ("llama3:latest", 8_192),
    ],
)
def test_known_windows(model: str, window: int) -> None:
    assert known_context_window(model) == window


@pytest.mark.parametrize("model", ["mystery-model", "o3x", "gpt-4oz-thing", ""])
def test_unknown_models_give_none(model: str) -> None:
    assert known_context_window(model) is None


def test_normalise_model_name() -> None:
    assert normalise_model_name(" Org/Model-X:7b ") == "model-x"


@pytest.mark.parametrize(
    ("model", "takes_images"),
    [
        ("gpt-4o", True),
        ("gpt-4o-mini-2024-07-18", True),
        ("gpt-4.1-nano", True),
        ("gpt-5", True),
        ("o3", True),
        ("o3-mini", False),
        ("o4-mini", True),
        ("gpt-4-0613", False),
        ("gpt-3.5-turbo", False),
        ("deepseek-chat", False),
        ("deepseek-v4-flash", False),
        ("smollm2", False),
        ("llava:13b", True),
        ("Qwen/Qwen2.5-VL-7B-Instruct", True),
        ("llama3.2-vision:11b", True),
        ("llama3.1:8b", False),
        ("my-finetune", False),
    ],
)
def test_which_models_take_images(model: str, takes_images: bool) -> None:
    from dsh_jupyter.models.catalog import accepts_images

    assert accepts_images(model) is takes_images
