"""LiteLLM models through a real kernel: ``%%dsh --model <LiteLLM id>`` against the loopback server in the
OpenAI, Anthropic and Gemini wire formats — the answer streams in, the bash tool runs, and the turn footer
shows the cost computed from LiteLLM's prices (no provider here reports one)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer, serve, text_reply, tool_call_reply
from fake_wire import FakeWireServer
from kernel_helpers import KernelRunner, output_text

from dsh_jupyter.conversation.usage import format_cost
from dsh_jupyter.models.facts import model_facts

#: (LiteLLM id, whether LiteLLM's api_base is the server's /v1 or its root)
MODELS = (("openai/gpt-4o", "v1"), ("anthropic/claude-sonnet-4-5", "root"), ("gemini/gemini-2.5-flash", "root"))
USAGE = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}


@pytest.fixture
def wire() -> Iterator[FakeOpenAIServer]:
    yield from serve(FakeWireServer())


def test_litellm_models_stream_run_tools_and_show_their_cost_in_the_footer(
        kernel_runner: KernelRunner, wire: FakeWireServer, tmp_path: Path) -> None:
    cells = ["%load_ext dsh_jupyter\n%config DshMagics.approval = 'auto'\n%config DshMagics.model_titles = False"]
    for index, (model_id, base) in enumerate(MODELS):
        marker = f"tool-ran-{index}"
        wire.queue(tool_call_reply((f"call_{index}", "bash", [json.dumps({"command": f"echo {marker}"})])),
                   text_reply("The tool ", f"said {marker}.", usage=USAGE))
        url = wire.base_url if base == "v1" else wire.root_url
        cells += [f'%config DshMagics.base_url = "{url}"', f"%%dsh --new --model {model_id}\nrun the tool {index}"]
    nb = kernel_runner.run(cells, tmp_path, env={"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a",
                                                 "GEMINI_API_KEY": "g-k"})
    for index, (model_id, _) in enumerate(MODELS):
        outputs = nb.cells[2 + 2 * index].outputs
        text = output_text(outputs)
        assert f"The tool said tool-ran-{index}." in text, text
        assert f"tool-ran-{index}" in output_text(outputs, "text/html"), "the bash tool's output is shown"
        footer = text.strip().splitlines()[-1]
        prices = model_facts(model_id, model_id.split("/")[0]).prices
        assert prices is not None
        # the tool step's call reports the fake's default usage (12 in, 5 out), the answer's USAGE
        expected = prices.cost(12, 5) + prices.cost(1200, 300)
        assert f"cost {format_cost(expected)}" in footer, footer
        assert f"litellm:{model_id}" in footer, footer
    bodies = [r for r in wire.model_requests if "run the tool" in json.dumps(r.body)]
    assert {r.path.split("?")[0].rsplit("/", 1)[-1] for r in bodies} >= {
        "completions", "messages", "gemini-2.5-flash:streamGenerateContent"}
