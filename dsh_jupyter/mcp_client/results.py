"""An MCP tool result as the agent's :class:`~dsh_jupyter.tools.base.ToolOutput`, bounded like every result.

Text blocks are joined and cut at :data:`~dsh_jupyter.tools.base.MAX_RESULT_CHARS` with a note; images go to
the agent as :class:`~dsh_jupyter.images.ToolImage` (downscaled and saved as artifacts by the loop, like a
plot's); audio, binary resources and links are named, not inlined. Anything that is not a result at all
becomes a one-line error. Secrets are masked later, where every result passes (``ToolRegistry.execute``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..clip import capped, one_line
from ..images import ToolImage
from ..tools.base import MAX_RESULT_CHARS, ToolOutput

#: The most images one result hands the model; the rest are named.
MAX_IMAGES = 4


def _image(block: Any) -> ToolImage | str:
    mime = str(getattr(block, "mime_type", "") or "")
    try:
        data = base64.b64decode(str(getattr(block, "data", "")), validate=True)
    except (binascii.Error, ValueError):
        return f"[an image ({mime or 'no type'}) that is not valid base64 was left out]"
    return ToolImage(mime, data)


def _resource(block: Any) -> str:
    resource = getattr(block, "resource", None)
    uri = str(getattr(resource, "uri", "") or "")
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return f"[resource {uri}]\n{text}"
    blob = str(getattr(resource, "blob", "") or "")
    mime = getattr(resource, "mime_type", None) or "binary"
    return f"[resource {uri}: {mime}, about {len(blob) * 3 // 4:,} bytes, not shown]"


def mcp_output(result: Any, server: str, tool: str) -> ToolOutput:
    """``result`` (a ``CallToolResult``) as a bounded output whose ``meta`` names the server and the tool."""
    meta: dict[str, Any] = {"mcp": {"server": server, "tool": tool}}
    content = getattr(result, "content", None)
    if not isinstance(content, list):
        return ToolOutput(f"Error: MCP server {server!r} answered {tool} with something that is not a tool "
                          f"result ({one_line(repr(result), 120)})", is_error=True,
                          meta={**meta, "error": "mcp-garbage"})
    parts: list[str] = []
    images: list[ToolImage] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "image":
            image = _image(block)
            if isinstance(image, str):
                parts.append(image)
            elif len(images) < MAX_IMAGES:
                images.append(image)
            else:
                parts.append(f"[one more image ({image.mime}) left out: at most {MAX_IMAGES} per result]")
        elif kind == "audio":
            parts.append(f"[audio ({getattr(block, 'mime_type', '') or 'no type'}) not shown]")
        elif kind == "resource":
            parts.append(_resource(block))
        elif kind == "resource_link":
            name = getattr(block, "name", "") or ""
            parts.append(f"[resource link {getattr(block, 'uri', '')}{f' ({name})' if name else ''}]")
        else:
            parts.append(f"[a {kind or 'nameless'} block not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1, default=str))
    text = "\n".join(parts)
    if not text and not images:
        text = "(no output)"
    is_error = bool(getattr(result, "is_error", False))
    if is_error:
        text = f"Error from MCP server {server!r} ({tool}): {text}"
    return ToolOutput(capped(text, MAX_RESULT_CHARS, "characters of the result"), is_error=is_error, meta=meta,
                      images=tuple(images))
