"""What an image block of a message says, read without decoding it: whether a block is one, its one-line
summary, and a message's text with each image as a note. Pure functions of the message shapes, shared by the
image handling (:mod:`dsh_jupyter.images`, which prepares and describes images) and every transcript view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: The ``type`` of an image content block.
IMAGE_BLOCK = "image"


def is_image_block(block: object) -> bool:
    """Whether ``block`` is an image content block."""
    return isinstance(block, Mapping) and block.get("type") == IMAGE_BLOCK


def whole_number(value: object) -> int | None:
    """``value`` when it is an int (not a bool), else ``None``: what a block field read from a log may be."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def image_summary(block: Mapping[str, Any]) -> str:
    """``PNG image, 640×480 pixels, 23,456 bytes`` (what every description starts with)."""
    mime = str(block.get("mediaType") or "image")
    kind = mime.split("/", 1)[-1].upper() if mime.startswith("image/") else mime
    parts = [f"{kind} image"]
    width, height = whole_number(block.get("width")), whole_number(block.get("height"))
    if width and height:
        parts.append(f"{width}×{height} pixels")
    size = whole_number(block.get("bytes"))
    if size is not None:
        parts.append(f"{size:,} bytes")
    return ", ".join(parts)


def content_text(blocks: Iterable[object], joiner: str = "\n") -> str:
    """The text of ``blocks`` with each image block as a one-line note (exports, transcripts)."""
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif is_image_block(block):
            artifact = block.get("artifact")
            where = f" ({artifact})" if isinstance(artifact, str) and artifact else ""
            parts.append(f"[image: {image_summary(block)}{where}]")
    return joiner.join(parts)
