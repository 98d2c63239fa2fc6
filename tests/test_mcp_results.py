"""An MCP tool result as the agent's tool output: bounded text, images, named blocks, garbage refused."""

from __future__ import annotations

import base64
from types import ModuleType
from typing import Any

import pytest

from dsh_jupyter.mcp_client.results import MAX_IMAGES, mcp_output
from dsh_jupyter.tools.base import MAX_RESULT_CHARS

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


@pytest.fixture(scope="module")
def t() -> ModuleType:
    """``mcp.types``, imported by the tests that use it (seconds on a busy machine: not at collection)."""
    import mcp.types

    return mcp.types


def test_text_is_joined_and_named_with_its_server_and_tool(t: Any) -> None:
    text = [t.TextContent(type="text", text="a"), t.TextContent(type="text", text="b")]
    out = mcp_output(t.CallToolResult(content=text), "notes", "read")
    assert (out.text, out.is_error, out.meta) == ("a\nb", False, {"mcp": {"server": "notes", "tool": "read"}})


def test_long_text_is_cut_with_a_note(t: Any) -> None:
    text = t.TextContent(type="text", text="x" * (MAX_RESULT_CHARS + 500))
    out = mcp_output(t.CallToolResult(content=[text]), "s", "t")
    assert out.text.startswith("x" * 100) and out.text.endswith("(500 more characters of the result not shown)")
    assert len(out.text) < MAX_RESULT_CHARS + 100


def test_images_become_tool_images_and_bad_ones_are_named(t: Any) -> None:
    content = [t.ImageContent(type="image", data=PNG, mime_type="image/png") for _ in range(MAX_IMAGES + 1)]
    content.append(t.ImageContent(type="image", data="%%%not base64", mime_type="image/png"))
    out = mcp_output(t.CallToolResult(content=content), "s", "plot")
    assert len(out.images) == MAX_IMAGES and out.images[0].mime == "image/png"
    assert out.images[0].data.startswith(b"\x89PNG")
    assert "one more image (image/png) left out" in out.text and "not valid base64 was left out" in out.text


def test_other_blocks_are_named_not_inlined(t: Any) -> None:
    out = mcp_output(t.CallToolResult(content=[
        t.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        t.EmbeddedResource(type="resource", resource=t.TextResourceContents(uri="file:///a.txt", text="inside")),
        t.EmbeddedResource(type="resource", resource=t.BlobResourceContents(uri="file:///b.bin", blob="AAAAAAAA")),
        t.ResourceLink(type="resource_link", uri="file:///c", name="c")]), "s", "t")
    assert out.text.splitlines() == ["[audio (audio/wav) not shown]", "[resource file:///a.txt]", "inside",
                                     "[resource file:///b.bin: binary, about 6 bytes, not shown]",
                                     "[resource link file:///c (c)]"]


def test_structured_content_alone_is_shown_as_json(t: Any) -> None:
    out = mcp_output(t.CallToolResult(content=[], structured_content={"rows": 3}), "s", "t")
    assert '"rows": 3' in out.text


def test_an_error_result_says_which_server(t: Any) -> None:
    text = t.TextContent(type="text", text="no such note")
    out = mcp_output(t.CallToolResult(content=[text], is_error=True), "s", "t")
    assert out.is_error and out.text == "Error from MCP server 's' (t): no such note"


def test_an_empty_result_says_so_and_garbage_is_an_error(t: Any) -> None:
    assert mcp_output(t.CallToolResult(content=[]), "s", "t").text == "(no output)"
    out = mcp_output({"weird": True}, "s", "t")
    assert out.is_error and "not a tool result" in out.text and out.meta["error"] == "mcp-garbage"
