"""The tool seam: executions, outputs and the registry the agent loop calls."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.session import SessionHeader
from dsh_jupyter.store.base import SessionLocation
from dsh_jupyter.tools.base import (
    Tool,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    ToolRegistryError,
    check_arguments,
    parse_arguments,
)


class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back."

    def __init__(self) -> None:
        self.parameters = {"type": "object", "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
                           "required": ["text"]}

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        return ToolOutput(arguments["text"] * arguments.get("times", 1), meta={"call": execution.call_id})


class BrokenTool(EchoTool):
    name = "broken"

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        raise RuntimeError("kaboom")


class SlowTool(EchoTool):
    name = "slow"

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        await asyncio.sleep(30)
        return ToolOutput("late")


def _execution(tmp_path: Path, **kw: Any) -> ToolExecution:
    return ToolExecution.create("call-7", str(tmp_path), **kw)


def test_execution_defaults(tmp_path: Path) -> None:
    execution = _execution(tmp_path)
    assert execution.header is None and execution.session_id is None
    assert execution.locate() is None and execution.session_dir is None
    assert isinstance(execution.cancel, threading.Event) and not execution.background
    header = SessionHeader.new(tmp_path)
    located = _execution(tmp_path, header=header, locate=lambda: SessionLocation("jsonl", "/x.jsonl"))
    assert located.session_id == header.id and located.locate() == SessionLocation("jsonl", "/x.jsonl")
    with pytest.raises(AttributeError):
        located.cwd = "/elsewhere"  # type: ignore[misc]


def test_output_defaults_are_independent() -> None:
    one, two = ToolOutput("a"), ToolOutput("b")
    one.meta["x"] = 1
    assert two.meta == {} and not one.is_error


def test_register_specs_and_dispose() -> None:
    registry = ToolRegistry()
    dispose = registry.register(EchoTool())
    assert registry.specs() == [{"name": "echo", "description": "Echo the text back.",
                                 "parameters": EchoTool().parameters}]
    assert registry.openai_specs()[0]["type"] == "function"
    assert registry.openai_specs()[0]["function"]["name"] == "echo"
    assert "echo" in registry and registry.get("echo") is not None and len(registry) == 1
    dispose()
    dispose()
    assert registry.get("echo") is None and registry.specs() == []


def test_duplicate_names_fail_clearly() -> None:
    registry = ToolRegistry()
    registry.register(EchoTool())
    with pytest.raises(ToolRegistryError, match="'echo' is already registered"):
        registry.register(EchoTool())


def test_stale_disposer_leaves_replacement_alone() -> None:
    registry = ToolRegistry()
    first = registry.register(EchoTool())
    first()
    replacement = EchoTool()
    registry.register(replacement)
    first()
    assert registry.get("echo") is replacement


def test_unregister_by_name() -> None:
    registry = ToolRegistry()
    registry.register(EchoTool())
    registry.unregister("echo")
    with pytest.raises(KeyError, match="no tool named 'echo'"):
        registry.unregister("echo")


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, None, "dots.no"])
def test_bad_tool_names_are_refused(name: Any) -> None:
    tool = EchoTool()
    tool.name = name
    with pytest.raises(ToolRegistryError, match="not valid"):
        ToolRegistry().register(tool)


def test_bad_schema_is_refused() -> None:
    tool = EchoTool()
    tool.parameters = {"type": "string"}
    with pytest.raises(ToolRegistryError, match="parameters"):
        ToolRegistry().register(tool)


async def test_execute_runs_the_tool(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(EchoTool())
    out = await registry.execute("echo", '{"text": "hi", "times": 2}', _execution(tmp_path))
    assert out == ToolOutput("hihi", meta={"call": "call-7"})
    out = await registry.execute("echo", {"text": "dict"}, _execution(tmp_path))
    assert out.text == "dict"


async def test_unknown_tool_is_an_error_output(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(EchoTool())
    out = await registry.execute("nope", "{}", _execution(tmp_path))
    assert out.is_error and "'nope'" in out.text and "echo" in out.text


@pytest.mark.parametrize("raw, fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('"text"', "must be a JSON object"),
    ("{}", "missing required argument(s): text"),
    ('{"text": 5}', "'text' must be of type string"),
    ('{"text": "a", "times": "2"}', "'times' must be of type integer"),
    ('{"text": "a", "times": true}', "'times' must be of type integer"),
])
async def test_bad_arguments_are_error_outputs(tmp_path: Path, raw: str, fragment: str) -> None:
    registry = ToolRegistry()
    registry.register(EchoTool())
    out = await registry.execute("echo", raw, _execution(tmp_path))
    assert out.is_error and fragment in out.text


async def test_tool_exception_becomes_error_output(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(BrokenTool())
    out = await registry.execute("broken", '{"text": "x"}', _execution(tmp_path))
    assert out.is_error and "kaboom" in out.text and "broken" in out.text


async def test_cancelled_execution_does_not_start(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(EchoTool())
    execution = _execution(tmp_path)
    execution.cancel.set()
    out = await registry.execute("echo", '{"text": "x"}', execution)
    assert out.is_error and out.meta["cancelled"]


async def test_task_cancellation_propagates(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(SlowTool())
    task = asyncio.ensure_future(registry.execute("slow", '{"text": "x"}', _execution(tmp_path)))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_argument_helpers() -> None:
    assert parse_arguments(None) == {} and parse_arguments("  ") == {}
    assert parse_arguments(3) == "tool arguments must be a JSON object, got int"  # type: ignore[arg-type]
    assert check_arguments({"properties": {"n": {"type": "number"}}}, {"n": 2.5}) is None
    assert check_arguments({"properties": {"n": {"type": ["string", "null"]}}}, {"n": None}) is None
    assert check_arguments({"properties": {"n": {"type": "integer"}}}, {"n": 2.0}) is None


def test_masking_a_result_keeps_its_images(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.images import ToolImage
    from dsh_jupyter.tools.base import Tool, ToolExecution, ToolOutput, ToolRegistry

    monkeypatch.setenv("IMAGES_TEST_API_KEY", "very-secret-value-123")
    image = ToolImage("image/png", b"\x89PNG very-secret-value-123", 4, 2)

    class Leaky(Tool):
        name = "leaky"
        description = "Prints a secret and draws."
        effect = "read"

        def __init__(self) -> None:
            self.parameters = {"type": "object", "properties": {}}

        async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
            return ToolOutput("key: very-secret-value-123", images=(image,))

    tools = ToolRegistry()
    tools.register(Leaky())
    output = asyncio.run(tools.execute("leaky", "{}", ToolExecution.create("c1", ".")))
    assert output.text == "key: [masked]"
    assert output.images == (image,)
