"""Tool images through the agent loop: artifacts in the session, image parts or descriptions on the wire.

Real parts throughout: the loop, the JSONL and SQLite stores, the ``openai`` client against the local
chat-completions server (tests/fake_openai.py), the offline model.
"""

from __future__ import annotations

import base64
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAIServer, text_reply, tool_call_reply
from PIL import Image

from dsh_jupyter.agent import Agent, AgentConfig
from dsh_jupyter.images import MAX_BYTES, MAX_SIDE, ToolImage
from dsh_jupyter.models.offline import OfflineModel
from dsh_jupyter.models.openai_compat import OpenAICompatibleProvider
from dsh_jupyter.store import JsonlStore, SqliteStore
from dsh_jupyter.store.base import SessionStore
from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry


def big_plot() -> bytes:
    """A 2400×1600 PNG of lines (a line plot at high dpi)."""
    from PIL import ImageDraw

    rng = random.Random(3)
    image = Image.new("RGB", (2400, 1600), "white")
    draw = ImageDraw.Draw(image)
    for _ in range(60):
        draw.line([(rng.randrange(2400), rng.randrange(1600)) for _ in range(8)], fill=(20, 60, 200), width=4)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


PLOT = big_plot()


class Plot(Tool):
    name = "plot"
    description = "Draw a plot."
    effect = "read"

    def __init__(self, images: tuple[ToolImage, ...] = (ToolImage("image/png", PLOT),)) -> None:
        self.parameters = {"type": "object", "properties": {}}
        self.images = images

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        return ToolOutput("<Figure size 2400x1600 with 1 Axes>", images=self.images)


def agent_for(store: SessionStore, provider: Any, tool: Tool | None = None) -> Agent:
    tools = ToolRegistry()
    tools.register(tool or Plot())
    return Agent.create(store, provider, cwd="/tmp", tools=tools, config=AgentConfig(model_titles=False))


def provider(server: FakeOpenAIServer, model: str, **kwargs: Any) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(server.base_url, model, api_key="sk-test-images", max_retries=0, **kwargs)


def tool_results(agent: Agent) -> list[dict[str, Any]]:
    return [e.data["message"]["content"][0] for e in agent.session.events if e.type == "tool/result"]


async def test_a_model_that_takes_images_gets_a_bounded_image_part(tmp_path: Path,
                                                                    fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(tool_call_reply(("call_p", "plot", ["{}"])), text_reply("A scatter plot."))
    store = JsonlStore(tmp_path / "sessions")
    agent = agent_for(store, provider(fake_openai, "gpt-4o"))
    assert agent.model.info.accepts_images
    result = await agent.send("plot it")
    assert result.reason == "completed"
    messages = fake_openai.chat_requests[1].body["messages"]
    tool, images = messages[-2], messages[-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_p"
    assert tool["content"].startswith("<Figure size 2400x1600 with 1 Axes>\n[PNG image, 1024×683 pixels")
    assert "sent in the next message as the image output of tool call call_p (plot)" in tool["content"]
    assert images["role"] == "user"
    marker, part = images["content"]
    assert marker == {"type": "text", "text": "The image output of tool call call_p (plot): "
                                              f"{tool['content'].split('[', 1)[1].split(':', 1)[0]}."}
    url = part["image_url"]["url"]
    assert part["type"] == "image_url" and url.startswith("data:image/png;base64,")
    sent = base64.b64decode(url.split(",", 1)[1])
    assert len(sent) <= MAX_BYTES
    with Image.open(io.BytesIO(sent)) as back:
        assert back.size == (MAX_SIDE, 683)
    # The log holds a reference, never the bytes; the artifact is a file in the session folder.
    block = tool_results(agent)[0]["content"][1]
    assert block["type"] == "image" and block["width"] == 1024 and block["originalWidth"] == 2400
    artifact = store.session_dir(agent.header) / block["artifact"]
    assert artifact.read_bytes() == sent
    log = Path(agent.locate().path).read_text()
    assert url.split(",", 1)[1][:200] not in log and "base64" not in log
    assert max(len(line) for line in log.splitlines()) < 5_000


async def test_a_model_without_image_input_gets_a_description(tmp_path: Path,
                                                              fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(tool_call_reply(("call_p", "plot", ["{}"])), text_reply("It drew something."))
    store = JsonlStore(tmp_path / "sessions")
    agent = agent_for(store, provider(fake_openai, "deepseek-chat"))
    assert not agent.model.info.accepts_images
    await agent.send("plot it")
    body = fake_openai.chat_requests[1].body
    tool = body["messages"][-1]
    block = tool_results(agent)[0]["content"][1]
    assert tool["role"] == "tool" and tool["content"] == (
        "<Figure size 2400x1600 with 1 Axes>\n[Image from the `plot` tool: PNG image, 1024×683 pixels, "
        f"{block['bytes']:,} bytes (downscaled from 2400×1600); saved as session artifact {block['artifact']}. "
        "This model does not take images, so only this description was sent.]")
    assert "image_url" not in json.dumps(body)


async def test_an_unknown_server_model_gets_descriptions_unless_told(tmp_path: Path,
                                                                     fake_openai: FakeOpenAIServer) -> None:
    assert not provider(fake_openai, "my-finetune").info.accepts_images
    fake_openai.queue(tool_call_reply(("call_p", "plot", ["{}"])), text_reply("ok"))
    agent = agent_for(JsonlStore(tmp_path / "s"), provider(fake_openai, "my-finetune", accepts_images=True))
    await agent.send("plot it")
    assert fake_openai.chat_requests[1].body["messages"][-1]["content"][1]["type"] == "image_url"


async def test_two_calls_in_one_step_keep_tool_messages_together(tmp_path: Path,
                                                                  fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue(tool_call_reply(("call_1", "plot", ["{}"]), ("call_2", "plot", ["{}"])), text_reply("two"))
    agent = agent_for(JsonlStore(tmp_path / "s"), provider(fake_openai, "gpt-4.1-mini"))
    await agent.send("plot twice")
    roles = [m["role"] for m in fake_openai.chat_requests[1].body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    last = fake_openai.chat_requests[1].body["messages"][-1]["content"]
    assert [p["type"] for p in last] == ["text", "image_url", "text", "image_url"]
    assert "call_1" in last[0]["text"] and "call_2" in last[2]["text"]
    # The same plot twice is one artifact.
    folder = JsonlStore(tmp_path / "s").session_dir(agent.header) / "artifacts"
    assert len(list(folder.iterdir())) == 1


async def test_the_offline_model_says_it_received_the_image(tmp_path: Path) -> None:
    model = OfflineModel()
    agent = agent_for(SqliteStore(tmp_path / "sessions.db"), model)
    result = await agent.send("/tool plot {}")
    block = tool_results(agent)[0]["content"][1]
    assert result.reason == "completed"
    assert (f"I received an image: PNG image, 1024×683 pixels, {block['bytes']:,} bytes "
            f"({block['bytes']:,} bytes arrived).") in result.text
    # SQLite keeps the artifact in its table: the next request loads it again from there.
    request = agent.next_request()
    sent = request.messages[-2]["content"][0]["content"][1]
    assert base64.b64decode(sent["data"]) == SqliteStore(tmp_path / "sessions.db").load_artifact(
        agent.header, block["artifact"])


async def test_a_corrupt_image_is_a_note_and_the_turn_goes_on(tmp_path: Path) -> None:
    agent = agent_for(JsonlStore(tmp_path / "s"), OfflineModel(),
                      Plot((ToolImage("image/png", b"\x89PNG\r\n\x1a\n broken"),)))
    result = await agent.send("/tool plot {}")
    assert result.reason == "completed"
    content = tool_results(agent)[0]["content"]
    assert content[1]["type"] == "text" and content[1]["text"].startswith(
        "[An image from `plot` (image/png, 15 bytes) was not kept: it could not be decoded "
        "(cannot identify image file)")
    assert "was not kept" in result.text


async def test_without_a_store_the_image_is_described(tmp_path: Path) -> None:
    from dsh_jupyter.session import SessionHeader, SessionLog

    tools = ToolRegistry()
    tools.register(Plot())
    agent = Agent(SessionLog(SessionHeader.new("/tmp")), None, None, OfflineModel(), tools=tools,
                  config=AgentConfig(model_titles=False))
    result = await agent.send("/tool plot {}")
    assert "not saved (this session has no store to keep it in)" in result.text


async def test_logs_without_images_send_the_same_request(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    class Echo(Tool):
        name = "echo"
        description = "Echo."
        effect = "read"

        def __init__(self) -> None:
            self.parameters = {"type": "object", "properties": {}}

        async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
            return ToolOutput("plain")

    fake_openai.queue(tool_call_reply(("call_e", "echo", ["{}"])), text_reply("done"))
    agent = agent_for(JsonlStore(tmp_path / "s"), provider(fake_openai, "gpt-4o"), Echo())
    await agent.send("echo")
    assert fake_openai.chat_requests[1].body["messages"][-1] == {"role": "tool", "tool_call_id": "call_e",
                                                                 "content": "plain"}
    assert tool_results(agent)[0]["content"] == [{"type": "text", "text": "plain"}]


@pytest.mark.parametrize("model", ["gpt-4o", "deepseek-chat"])
async def test_compaction_gets_descriptions_only(tmp_path: Path, fake_openai: FakeOpenAIServer, model: str) -> None:
    fake_openai.queue(tool_call_reply(("call_p", "plot", ["{}"])), text_reply("drawn"), text_reply("second"),
                      text_reply("A summary."))
    agent = agent_for(JsonlStore(tmp_path / "s"), provider(fake_openai, model))
    await agent.send("plot it")
    await agent.send("and now?")
    assert await agent.compact(keep_recent=1)
    summary_request = json.dumps(fake_openai.chat_requests[-1].body)
    assert "image_url" not in summary_request and "[Image from the `plot` tool" in summary_request


@pytest.mark.parametrize("eyes", [True, False])
async def test_images_count_toward_the_window_as_the_model_gets_them(tmp_path: Path, eyes: bool) -> None:
    """Plots fill a model's window: each one it gets as an image costs hundreds of tokens, so a session of plots
    compacts once they near the window (the text alone is a small fraction of it). A model without image input
    gets a line of text for each, and the same session stays far below."""
    import dataclasses

    from agent_helpers import ScriptedModel, call, say

    from dsh_jupyter.images import image_tokens

    model = ScriptedModel(context_window=8192)
    model.info = dataclasses.replace(model.info, accepts_images=eyes)
    tools = ToolRegistry()
    tools.register(Plot())
    agent = Agent.create(JsonlStore(tmp_path / "sessions"), model, cwd=str(tmp_path), tools=tools,
                         config=AgentConfig(model_titles=False, auto_compact_fraction=0.5))  # compacts at 4,096
    sizes = []
    for n in range(6):
        model.queue(call("plot", "{}", f"c{n}"), say(f"plot {n} drawn"))
        assert (await agent.send(f"Draw plot {n}.")).reason == "completed"
        meter = agent.context_meter()
        assert meter is not None
        sizes.append(meter.used)
    compacted = any(e.type == "compaction/end" for e in agent.session.events)
    picture = image_tokens(tool_results(agent)[0]["content"][-1])
    assert picture > 900  # the 2400×1600 plot, sent at 1024×683
    if eyes:
        assert sizes[3] - sizes[0] >= 3 * picture  # each plot counted at its image cost
        assert compacted and min(sizes[4:]) < max(sizes)  # past 4,096: compacted, and the meter dropped
    else:
        assert not compacted and sizes[-1] < 2048  # described in a line each
