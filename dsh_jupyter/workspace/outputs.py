"""Cell outputs as the agent reads them, from IPython's mime bundles and from nbformat output dicts.

Both the kernel's record (:mod:`.kernel_record`) and the live notebook (:mod:`.live_document`) reduce what a
cell printed, showed or raised to :class:`~.document.CellOutput` here: terminal colours removed, tracebacks
trimmed to their start and end, images decoded (bad base64 is left out).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from .document import CellOutput, ImageData

MAX_TRACEBACK_LINES = 40

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes."""
    return _ANSI.sub("", text)


def trim_traceback(lines: list[str] | tuple[str, ...], limit: int = MAX_TRACEBACK_LINES) -> tuple[str, ...]:
    """Traceback text lines, ANSI removed, at most ``limit`` lines (the start and the end are kept)."""
    text = "\n".join(strip_ansi(str(line)) for line in lines)
    flat = [line.rstrip() for line in text.splitlines()]
    while flat and not flat[-1]:
        flat.pop()
    if len(flat) <= limit:
        return tuple(flat)
    head = limit // 4
    tail = limit - head - 1
    return (*flat[:head], f"… ({len(flat) - head - tail} traceback lines not shown)", *flat[-tail:])


def image_outputs(bundle: Mapping[str, Any]) -> tuple[ImageData, ...]:
    """The images of a mime bundle (bytes, or base64 text), in the order of :data:`_IMAGE_MIMES`."""
    images: list[ImageData] = []
    for mime in _IMAGE_MIMES:
        payload = bundle.get(mime)
        if isinstance(payload, bytes):
            images.append(ImageData(mime, payload))
        elif isinstance(payload, str):
            try:
                images.append(ImageData(mime, base64.b64decode(payload, validate=False)))
            except (binascii.Error, ValueError):
                continue
    return tuple(images)


def plain_text(bundle: Mapping[str, Any]) -> str:
    """A mime bundle's ``text/plain`` (nbformat may split it into a list of lines)."""
    text = bundle.get("text/plain", "")
    if isinstance(text, list):
        text = "".join(str(part) for part in text)
    return str(text)


def _joined(value: Any) -> str:
    """nbformat text: a string, or a list of strings to join (anything else: empty)."""
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else ""


def output_from_json(output: Mapping[str, Any]) -> CellOutput | None:
    """One nbformat output (a run's capture, or a cell the browser sent) as the agent reads it; ``None`` for a
    shape that is not an output. Colours are removed; images are decoded (bad base64 is left out)."""
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name")
        return CellOutput("stream", strip_ansi(_joined(output.get("text"))),
                          name=name if isinstance(name, str) else "stdout")
    if kind == "error":
        ename, evalue = str(output.get("ename", "")), strip_ansi(str(output.get("evalue", "")))
        traceback = output.get("traceback")
        lines = trim_traceback([str(line) for line in traceback]) if isinstance(traceback, list) else ()
        return CellOutput("error", f"{ename}: {evalue}", ename=ename, evalue=evalue, traceback=lines)
    if kind not in ("execute_result", "display_data"):
        return None
    data = output.get("data")
    data = {mime: _joined(value) if isinstance(value, list) else value
            for mime, value in data.items()} if isinstance(data, Mapping) else {}
    count = output.get("execution_count")
    return CellOutput("result" if kind == "execute_result" else "display", strip_ansi(plain_text(data)),
                      images=image_outputs(data),
                      execution_count=count if kind == "execute_result" and isinstance(count, int) else None)

