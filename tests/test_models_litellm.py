"""LiteLLMProvider through the real litellm package against a loopback server speaking OpenAI, Anthropic and
Gemini; the model facts it reads from LiteLLM's map; and proof that LiteLLM opens no connection of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAIServer, check_cancel_mid_stream, http_error, serve, text_reply, tool_call_reply
from fake_wire import FakeWireServer

from dsh_jupyter.models import ModelError, ModelRequest, ReasoningDelta, TextDelta, ToolSpec, collect
from dsh_jupyter.models.facts import SOURCE_LITELLM, SOURCE_TABLE, Prices, model_facts, parse_prices
from dsh_jupyter.models.litellm_provider import KEY_ENVS, LiteLLMProvider, load_litellm
from dsh_jupyter.models.openai_compat import OpenAICompatibleProvider
from dsh_jupyter.models.registry import resolve_model
from dsh_jupyter.session.messages import user_message

SECRET = "sk-test-litellm-5d1c9e"
BASH = ToolSpec("bash", "Run a bash command.", {"type": "object", "properties": {"command": {"type": "string"}},
                                                 "required": ["command"]})
#: (LiteLLM id, the path its requests reach, whether api_base is the server's root or its /v1)
FORMATS = [
    pytest.param("openai/gpt-4o", "/v1/chat/completions", "v1", id="openai"),
    pytest.param("anthropic/claude-sonnet-4-5", "/v1/messages", "root", id="anthropic"),
    pytest.param("gemini/gemini-2.5-flash", "/models/gemini-2.5-flash:streamGenerateContent", "root", id="gemini"),
]


@pytest.fixture
def fake_wire() -> Iterator[FakeOpenAIServer]:
    """A fresh OpenAI / Anthropic / Gemini scripted server on 127.0.0.1 for one test."""
    yield from serve(FakeWireServer())


def _provider(server: FakeWireServer, model_id: str, base: str, **options: Any) -> LiteLLMProvider:
    options.setdefault("backoff", 0.01)
    return LiteLLMProvider(model_id, api_base=server.base_url if base == "v1" else server.root_url,
                           api_key=SECRET, **options)


def _request(text: str = "hello") -> ModelRequest:
    return ModelRequest([user_message(text)], system="Be brief.", tools=[BASH])


@pytest.mark.parametrize(("model_id", "path", "base"), FORMATS)
async def test_text_reasoning_tool_calls_and_priced_usage_stream_in_each_wire_format(
        fake_wire: FakeWireServer, model_id: str, path: str, base: str) -> None:
    fake_wire.queue(text_reply("Hel", "lo", reasoning=["thinking"]),
                    tool_call_reply(("call_1", "bash", ['{"command"', ': "ls"}'])))
    provider = _provider(fake_wire, model_id, base)
    events = [event async for event in provider.stream(_request())]
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Hel"), TextDelta("lo")]
    assert ReasoningDelta("thinking") in events
    blocks, usage, finish = await collect(provider.stream(_request("list files")))
    assert finish == "tool_calls"
    [call] = blocks
    assert call["type"] == "tool-call" and call["name"] == "bash" and json.loads(call["arguments"]) == {"command": "ls"}
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (12, 5)
    facts = model_facts(model_id, model_id.split("/", maxsplit=1)[0])
    assert facts.prices is not None and facts.source == SOURCE_LITELLM
    assert usage.cost == pytest.approx(12 * facts.prices.input + 5 * facts.prices.output)
    assert [r.path.split("?")[0] for r in fake_wire.model_requests] == [path, path]
    sent = fake_wire.model_requests[0]
    assert SECRET in json.dumps(sent.headers) and "Be brief." in json.dumps(sent.body)


@pytest.mark.parametrize(("model_id", "path", "base"), FORMATS)
async def test_a_429_is_retried_in_each_wire_format(fake_wire: FakeWireServer, model_id: str, path: str,
                                                    base: str) -> None:
    fake_wire.queue(http_error(429, "slow down", retry_after="0"), text_reply("after the wait"))
    retries: list[tuple[str, float]] = []
    provider = _provider(fake_wire, model_id, base,
                         on_retry=lambda error, delay, n: retries.append((error.kind, delay)))
    blocks, _, _ = await collect(provider.stream(_request()))
    assert blocks == [{"type": "text", "text": "after the wait"}]
    assert [kind for kind, _ in retries] == ["rate_limit"]


async def test_a_429_that_persists_names_the_provider_and_the_servers_words(fake_wire: FakeWireServer) -> None:
    fake_wire.queue(*[http_error(429, "quota exhausted")] * 2)
    provider = _provider(fake_wire, "anthropic/claude-sonnet-4-5", "root", max_retries=1)
    with pytest.raises(ModelError) as info:
        await collect(provider.stream(_request()))
    error = info.value
    assert error.kind == "rate_limit" and error.status == 429
    assert error.message.startswith("anthropic via LiteLLM") and "quota exhausted" in error.message
    assert "litellm." not in error.message and "Exception" not in error.message
    assert "gave up after 2 attempts" in error.message


async def test_a_missing_key_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = LiteLLMProvider("anthropic/claude-sonnet-4-5")
    assert not provider.key_present()
    with pytest.raises(ModelError) as info:
        await collect(provider.stream(_request()))
    assert info.value.kind == "config" and "\n" not in info.value.message
    assert info.value.message.startswith("$ANTHROPIC_API_KEY is not set")


def test_either_gemini_variable_gives_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    provider = LiteLLMProvider("gemini/gemini-2.5-flash")
    assert provider.api_key_env == "GOOGLE_API_KEY" and provider.key_present()


async def test_cancel_mid_stream_closes_the_connection(fake_wire: FakeWireServer) -> None:
    await check_cancel_mid_stream(fake_wire, _provider(fake_wire, "openai/gpt-4o", "v1"), _request())


def test_the_key_table_names_the_variables_litellm_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = load_litellm()
    for names in KEY_ENVS.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    for provider, names in KEY_ENVS.items():
        missing = litellm.validate_environment(f"{provider}/some-model").get("missing_keys") or []
        assert set(names) <= set(missing), (provider, names, missing)


def test_specs_route_litellm_ids_and_leave_org_names_at_a_base_url_alone() -> None:
    assert isinstance(resolve_model("anthropic/claude-sonnet-4-5"), LiteLLMProvider)
    assert isinstance(resolve_model("litellm:my_proxy/some-model"), LiteLLMProvider)
    assert isinstance(resolve_model("ollama/llama3.1"), LiteLLMProvider)
    custom = resolve_model("meta-llama/Llama-3.1-8B-Instruct", base_url="http://127.0.0.1:8000/v1")
    assert type(custom) is OpenAICompatibleProvider
    with pytest.raises(ModelError, match="provider and a model"):
        resolve_model("litellm:anthropic/")


def test_facts_come_from_litellms_map_and_the_hand_table_without_it() -> None:
    facts = model_facts("claude-sonnet-4-5", "anthropic")
    assert facts.source == SOURCE_LITELLM and facts.context_window == 200_000 and facts.accepts_images
    assert facts.max_output and facts.prices and facts.prices.output > facts.prices.input > 0
    own_server = model_facts("gpt-4o", "local-openai-compatible")
    assert own_server.context_window == 128_000 and own_server.prices is None, "a server of one's own has no bill"
    assert model_facts("ollama/llama3", "ollama").prices == Prices(0.0, 0.0, None)
    assert model_facts("smollm2-135m").source in (SOURCE_TABLE, SOURCE_LITELLM)
    assert model_facts("no-such-model-anywhere").source is None


def test_prices_compute_costs_and_settings_are_checked() -> None:
    prices = Prices.per_million(3.0, 15.0, cached=0.3)
    assert prices.cost(1_000_000, 0) == pytest.approx(3.0)
    assert prices.cost(1_000_000, 1_000_000, cached_tokens=500_000) == pytest.approx(1.5 + 0.15 + 15.0)
    assert parse_prices("m", 0).free and parse_prices("m", {"input": 1, "output": 2}) == Prices.per_million(1, 2)
    for bad, words in ((2, "only be 0"), ({"input": 1}, "needs 'output'"), ({"input": -1, "output": 1}, "≥ 0"),
                       ({"input": 1, "output": 1, "cache": 1}, "unknown price field"), ("cheap", "must be 0")):
        with pytest.raises(ValueError, match=words):
            parse_prices("my-model", bad)


def test_litellm_opens_no_connection_beyond_the_loopback(tmp_path: Path) -> None:
    """Import litellm and stream through it, in a fresh process whose every connect and lookup is audited."""
    script = textwrap.dedent(f"""
        import asyncio, json, socket, sys
        seen = []
        def audit(event, args):
            if event == "socket.connect":
                address = args[1]
                seen.append(address[0] if isinstance(address, tuple) else str(address))
            elif event == "socket.getaddrinfo":
                seen.append(str(args[0]))
        sys.addaudithook(audit)
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from fake_openai import text_reply
        from fake_wire import FakeWireServer
        from dsh_jupyter.models import ModelRequest, collect
        from dsh_jupyter.models.litellm_provider import LiteLLMProvider, load_litellm
        from dsh_jupyter.session.messages import user_message
        load_litellm()
        server = FakeWireServer()
        async def main():
            for model_id, base in (("anthropic/claude-sonnet-4-5", server.root_url),
                                   ("gemini/gemini-2.5-flash", server.root_url), ("openai/gpt-4o", server.base_url)):
                server.queue(text_reply("hi"))
                provider = LiteLLMProvider(model_id, api_base=base, api_key="k")
                await collect(provider.stream(ModelRequest([user_message("hello")])))
        asyncio.run(main())
        import litellm
        litellm.get_model_info("anthropic/claude-sonnet-4-5")
        litellm.completion_cost(model="gpt-4o", prompt="hello", completion="hi")
        server.close()
        print(json.dumps(sorted(set(seen))))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "HTTP_PROXY", "HTTPS_PROXY"))}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env,
                            cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    hosts = json.loads(result.stdout.strip().splitlines()[-1])
    assert hosts and set(hosts) <= {"127.0.0.1", "localhost", "::1"}, hosts


def test_a_bad_model_prices_setting_is_refused_in_the_users_terms() -> None:
    from traitlets import TraitError

    from dsh_jupyter.notebook.config import DshSettings

    settings = DshSettings()
    settings.model_prices = {"my-llama": 0, "my-gpt": {"input": 0.5, "output": 1.5}}
    with pytest.raises(TraitError, match=r"model_prices: a single number for 'my-llama' can only be 0"):
        settings.model_prices = {"my-llama": 2}
    assert settings.model_prices == {"my-llama": 0, "my-gpt": {"input": 0.5, "output": 1.5}}, "nothing was lost"


async def test_a_price_override_prices_a_server_of_ones_own(fake_wire: FakeWireServer) -> None:
    fake_wire.queue(text_reply("hi", usage={"prompt_tokens": 1_000_000, "completion_tokens": 0}), text_reply("again"))
    unpriced = resolve_model("my-llama", base_url=fake_wire.base_url)
    assert type(unpriced) is OpenAICompatibleProvider and unpriced.prices is None
    _, usage, _ = await collect(resolve_model("my-llama", base_url=fake_wire.base_url,
                                              prices=parse_prices("my-llama", {"input": 0.5, "output": 1}))
                                .stream(_request()))
    assert usage is not None and usage.cost == pytest.approx(0.5)
    _, usage, _ = await collect(unpriced.stream(_request()))
    assert usage is not None and usage.cost is None, "unknown prices give no cost rather than a guess"


def test_models_lists_what_a_configured_server_serves_and_where_facts_came_from(fake_wire: FakeWireServer) -> None:
    from dsh_jupyter.models.registry import list_models

    fake_wire.models = ["my-llama", "qwen2.5-coder"]
    rows = {row.spec: row for row in list_models({"ANTHROPIC_API_KEY": "k"}, base_url=fake_wire.base_url)}
    served = rows["qwen2.5-coder"]
    assert served.available and served.key_env is None and fake_wire.base_url in served.note
    assert served.context_window == 32_768 and served.price == "", "a server of one's own has no known price"
    claude = rows["anthropic/claude-sonnet-4-5"]
    assert claude.available and claude.key_present and claude.facts == SOURCE_LITELLM
    assert claude.price == "$3.00 / $15.00 per 1M"
    assert not rows["gemini/gemini-2.5-flash"].available, "no Gemini key in this environment"
    assert [r.path for r in fake_wire.requests if r.method == "GET"] == ["/v1/models"]
    assert "my-llama" not in {row.spec for row in list_models({}, base_url=None)}, "nothing probed unasked"


def test_listing_models_and_their_facts_never_imports_litellm(tmp_path: Path) -> None:
    script = ("import sys\nfrom dsh_jupyter.models.registry import list_models, resolve_model\n"
              "rows = list_models(probe=False)\nresolve_model('anthropic/claude-sonnet-4-5')\n"
              "assert any(r.facts == 'LiteLLM model map' for r in rows)\n"
              "print('litellm' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"


def test_models_table_says_where_each_fact_came_from_with_and_without_the_map(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.models import facts
    from dsh_jupyter.models.registry import list_models
    from dsh_jupyter.notebook.commands import models_table

    def facts_column(env: dict[str, str]) -> dict[str, str]:
        table = models_table(list_models(env, probe=False), 0, mark="current")
        header, *lines = table._plain().splitlines()
        start, end = header.index("facts from"), header.index("API key")
        return {line.split()[0]: line[start:end].strip() for line in lines
                if line and not line.startswith(("Use ", "Window "))}

    with_map = facts_column({"ANTHROPIC_API_KEY": "k"})
    assert with_map["anthropic/claude-sonnet-4-5"] == SOURCE_LITELLM
    monkeypatch.setattr(facts, "litellm_map", lambda: {})  # as without dsh-jupyter[litellm]
    without = facts_column({})
    assert without["deepseek"] == SOURCE_TABLE and SOURCE_LITELLM not in without.values()
