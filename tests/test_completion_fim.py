"""Fill-in-the-middle completions against a fake model server on 127.0.0.1 (``fake_fim``): the prefix and the
suffix reach it, bounded, with secrets masked, in each API's shape; its streamed answer comes back; a failing
server is an error saying which endpoint answered what."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fake_fim import FakeFimServer

from dsh_jupyter.completion.backends import ChatBackend, FimBackend, FimKind, OfflineBackend
from dsh_jupyter.completion.context import CellAbove, CompletionRequest, Limits, Variable
from dsh_jupyter.completion.service import CompletionService
from dsh_jupyter.models.base import ModelError
from dsh_jupyter.models.offline import OfflineModel
from dsh_jupyter.secrets import MASK, SecretMasker

SECRET = "sk-proj-5f1b2c3d4e5f6a7b8c9d"
PREFIX = "\n".join(f"row_{i} = load({i})" for i in range(3000)) + f"\ntoken = '{SECRET}'\nrad"
SUFFIX = "\nprint(area)\n" + "\n".join(f"tail_{i} = {i}" for i in range(3000))
CELLS = tuple(CellAbove("code", f"step_{i} = {i}  # key {SECRET}", f"out {i}") for i in range(200))


@pytest.fixture
def fim() -> Iterator[FakeFimServer]:
    server = FakeFimServer()
    yield server
    server.close()


def complete(server: FakeFimServer, kind: FimKind, *, key_env: str | None = None) -> tuple[str, CompletionService]:
    backend = FimBackend(kind, model="coder", base_url=server.base_url, api_key_env=key_env,
                         chat=ChatBackend(OfflineModel()))
    service = CompletionService(lambda: backend, masker=SecretMasker({"SERVICE_TOKEN": SECRET}))
    request = CompletionRequest("fim-1", PREFIX, SUFFIX, cells=CELLS, variables=(Variable("radius", "float"),))

    async def run() -> str:
        context, hit = service.start(request)
        assert hit is None
        try:
            return "".join([piece async for piece in service.stream(request, context)])
        finally:
            await backend.close()

    return asyncio.run(run()), service


@pytest.mark.parametrize(("kind", "path", "prefix_field", "suffix_field"), [
    ("deepseek", "/beta/completions", "prompt", "suffix"),
    ("llama.cpp", "/infill", "input_prefix", "input_suffix"),
    ("ollama", "/api/generate", "prompt", "suffix"),
])
def test_prefix_and_suffix_reach_the_model_bounded_and_masked(fim: FakeFimServer, kind: FimKind, path: str,
                                                              prefix_field: str, suffix_field: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-test-key")
    text, service = complete(fim, kind)
    assert text == "ius * 2"
    (seen,) = fim.requests
    assert seen.path == path
    prompt, suffix = seen.body[prefix_field], seen.body[suffix_field]
    assert prompt.endswith(f"token = '{MASK}'\nrad") and suffix.startswith("\nprint(area)\n")
    sent = repr(seen.body)
    assert SECRET not in sent and sent.count(MASK) >= 2  # the prefix's and the cells above'
    budget = Limits().total_bytes
    extra = "".join(e["text"] for e in seen.body.get("input_extra", []))
    assert len((prompt + suffix + extra).encode()) <= budget + 200  # the header line names the variables
    assert "step_199 = 199" in prompt + extra and "step_0 = 0" not in prompt + extra
    assert "radius (float)" in prompt + extra
    usage = service.usage
    assert (usage.input_tokens, usage.output_tokens, usage.served) == (40, 3, 1)
    if kind == "deepseek":
        assert seen.headers["authorization"] == "Bearer sk-deepseek-test-key"
        assert seen.body["model"] == "coder" and seen.body["stream"] is True
    else:
        assert "authorization" not in seen.headers


def test_a_failing_server_is_named_with_its_answer(fim: FakeFimServer) -> None:
    fim.status = 503
    with pytest.raises(ModelError, match=r"the ollama completion endpoint http://127\.0\.0\.1:\d+/api/generate "
                                         r"answered 503: \{\"error\": \"model not loaded\"\}"):
        complete(fim, "ollama")


def test_deepseek_without_a_key_says_which_variable(fim: FakeFimServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(ModelError, match=r"\$DEEPSEEK_API_KEY is not set in the Jupyter server's environment"):
        complete(fim, "deepseek")
    assert fim.requests == []


def test_prose_goes_to_chat_never_to_fim(fim: FakeFimServer) -> None:
    model = OfflineModel()
    model.queue("the weekly totals")
    backend = FimBackend("ollama", model="coder", base_url=fim.base_url, api_key_env=None, chat=ChatBackend(model))
    service = CompletionService(lambda: backend, masker=SecretMasker({}))
    request = CompletionRequest("p", "%%dsh\nSummarise ", mode="prose")

    async def run() -> str:
        context, _ = service.start(request)
        return "".join([piece async for piece in service.stream(request, context)])

    assert asyncio.run(run()) == "the weekly totals" and fim.requests == []
    assert OfflineBackend().name == "offline"
