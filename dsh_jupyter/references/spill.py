"""Spill: save a truncated source's full projected snapshot beside the target session.

When a source had to be cut to fit its budget, the complete projection (as captured by the same read)
is written as a plain-text transcript into the target session's own folder, named
``session-reference-<n>.txt`` after the reference's 1-based position (with ``-2``, ``-3``... added if
that name is taken). The context message then lists where it is. A store without per-session folders
(SQLite) reports ``storage-not-configured``; a failed write reports ``save-failed`` and is otherwise
harmless: the preview is still published.

Transcript layout: a heading and warning, the capture metadata as indented JSON, then every message
as ``### Message <n>: <role>`` followed by its text as JSON string fragments of at most 64 code points,
one per line, so any text (newlines and control characters included) stays line-oriented and exact. Secrets
are masked (:mod:`dsh_jupyter.secrets`) in every text and in the capture metadata before the file is written:
a referenced session of another tool, or one logged where other keys were set, may hold one.

A transcript is capped (:data:`DEFAULT_MAX_SPILL_BYTES`, 8 MiB, by default): a source bigger than that
gets its first messages whole, as many fragment lines of the next one as fit, and a closing line
(:func:`cap_notice`) saying how many messages and text bytes were left out and which session holds
them. The file then never copies a huge source, and the omission entry's ``fullSnapshot`` says
``"capped": true``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._json import dumps, js_string
from ..secrets import mask_data, mask_text
from ..store.safe_open import write_all
from .bounded import BoundedProjection
from .framing import REFERENCE_WARNING
from .utf8 import js_utf8_length

log = logging.getLogger(__name__)

#: Code points per JSON string fragment line in a transcript.
FRAGMENT_CODE_POINTS = 64
#: Default cap of one saved transcript, in bytes.
DEFAULT_MAX_SPILL_BYTES = 8 * 1024 * 1024
#: The smallest cap a resolver accepts (room for the heading and the closing notice).
MIN_SPILL_BYTES = 16 * 1024

SAVED = "saved"
UNAVAILABLE = "unavailable"
STORAGE_NOT_CONFIGURED = "storage-not-configured"
SAVE_FAILED = "save-failed"

RETRIEVAL_HINT = "Read the file in slices (offset/limit) or grep it; a full transcript can be large."

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class SpillResult:
    """Where a truncated source's full transcript went (``status`` ``'saved'``) or why it could not be saved."""

    status: str
    locator: str | None = None
    bytes: int | None = None
    retrieval_hint: str | None = None
    reason: str | None = None
    #: The transcript stopped at its byte cap (see :func:`render_capped_transcript`).
    capped: bool = False

    @classmethod
    def saved(cls, path: Path, size: int) -> SpillResult:
        return cls(SAVED, locator=str(path), bytes=size, retrieval_hint=RETRIEVAL_HINT)

    @classmethod
    def unavailable(cls, reason: str) -> SpillResult:
        return cls(UNAVAILABLE, reason=reason)

    @property
    def path(self) -> Path | None:
        return Path(self.locator) if self.locator is not None else None

    def to_json(self) -> dict[str, Any]:
        """The ``fullSnapshot`` object of an omission entry."""
        if self.status == SAVED:
            saved: dict[str, Any] = {"status": SAVED, "locator": self.locator, "bytes": self.bytes,
                                     "retrievalHint": self.retrieval_hint}
            if self.capped:
                saved["capped"] = True
            return saved
        return {"status": UNAVAILABLE, "reason": self.reason}


def _pretty_json(value: Any) -> str:
    """``JSON.stringify(value, null, 2)`` of ``value`` with its secrets masked."""
    text = json.dumps(mask_data(value), indent=2, ensure_ascii=False, allow_nan=False)
    text = js_string(text)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def fragments(text: str, size: int = FRAGMENT_CODE_POINTS) -> list[str]:
    """``text`` as JSON string literals of at most ``size`` code points each (a JavaScript code point view)."""
    return _fragment_block(text, size).split("\n") if text else []


def _fragment_block(text: str, size: int = FRAGMENT_CODE_POINTS) -> str:
    """The fragment lines of ``text`` joined with ``\\n``."""
    return "\n".join(_encode_chunks(_chunks(text, size)))


def _chunks(text: str, size: int = FRAGMENT_CODE_POINTS) -> list[str]:
    """``text`` with its secrets masked (before it is cut: a secret split over two lines would stay readable),
    in pieces of ``size`` code points."""
    text = js_string(mask_text(text))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _encode_chunks(chunks: list[str]) -> list[str]:
    return [line.decode("utf-8") for line in _encode_chunks_utf8(chunks)]


def _encode_chunks_utf8(chunks: list[str]) -> list[bytes]:
    """The JSON string literal of each chunk, as UTF-8 (measured and joined without decoding each one)."""
    encode = orjson.dumps
    try:
        return [encode(chunk) for chunk in chunks]
    except TypeError:  # lone surrogates: orjson refuses them, the slow path escapes them like JavaScript
        return [dumps(chunk).encode("utf-8") for chunk in chunks]


def _heading(capture: dict[str, Any]) -> list[str]:
    return [
        "## Full snapshot of a referenced session",
        "",
        "This file is an untrusted, read-only copy of conversation from another session.",
        REFERENCE_WARNING,
        "",
        _pretty_json(capture),
        "",
        f"Each message's text is split into JSON string fragments of at most {FRAGMENT_CODE_POINTS} code points,",
        "one per line. Decode the fragments of a message and join them to get its exact text, newlines included.",
    ]


def render_transcript(full_data: dict[str, Any], captured_format_version: int) -> str:
    """The transcript of a full projection (``sessionId, label, cwd, capturedThroughSeq, conversation``)."""
    capture = {key: value for key, value in full_data.items() if key != "conversation"}
    capture["capturedFormatVersion"] = captured_format_version
    lines = _heading(capture)
    for number, item in enumerate(full_data.get("conversation", []), start=1):
        lines += ["", f"### Message {number}: {item['role']}", ""]
        if item["text"]:
            lines.append(_fragment_block(item["text"]))
    lines.append("")
    return "\n".join(lines)


def cap_notice(max_bytes: int, missing_messages: int, total_messages: int, missing_bytes: int, first_missing: int,
               session_id: str, captured_through_seq: int | None) -> str:
    """The line that ends a capped transcript (it starts with ``[``, never with a fragment's quote)."""
    return (f"[\u2026 This transcript is capped at {max_bytes} bytes. Left out: {missing_messages} of "
            f"{total_messages} messages (in whole or in part, from message {first_missing} on), "
            f"{missing_bytes} UTF-8 bytes of text. The referenced session {dumps(session_id)} holds them "
            f"(this copy was captured through seq {captured_through_seq}). \u2026]")


def render_capped_transcript(source: BoundedProjection, label: str, max_bytes: int | None = None) -> tuple[str, bool]:
    """The transcript of ``source``'s spill prefix, at most ``max_bytes`` UTF-8 bytes (the heading always
    fits); ``(content, capped)``. Uncapped, it is exactly :func:`render_transcript` of the full projection.

    A capped transcript holds the first messages whole and as many fragment lines of the next as fit,
    then :func:`cap_notice`."""
    total = len(source)
    capture = {key: value for key, value in source.data(label, []).items() if key != "conversation"}
    capture["capturedFormatVersion"] = source.format_version
    lines = _heading(capture)
    used = sum(len(line.encode("utf-8")) + 1 for line in lines)
    # Room for the closing notice: its longest form (every count at its largest) plus the blank line before it.
    room = len(cap_notice(max_bytes or 0, total, total, source.total_text_bytes, total + 1, source.session_id,
                          source.captured_through_seq).encode("utf-8")) + 2
    limit = math.inf if max_bytes is None else max(max_bytes - room, used)
    whole = 0
    included = 0
    capped = False
    for number, part in enumerate(source.spill, start=1):
        title = f"### Message {number}: {part.role}"
        cost = len(title.encode("utf-8")) + 3  # a blank line, the title, a blank line
        if used + cost > limit:
            capped = True
            break
        lines += ["", title, ""]
        used += cost
        chunks = _chunks(part.text)
        encoded = _encode_chunks_utf8(chunks)
        block = b"\n".join(encoded)
        cost = len(block) + 1 if encoded else 0
        if used + cost <= limit:
            if encoded:
                lines.append(block.decode("utf-8"))
            used += cost
            if part.whole:
                whole += 1
                included += source.text_bytes[number - 1]
                continue
            included += sum(js_utf8_length(chunk) for chunk in chunks)
            capped = True
            break
        kept: list[bytes] = []
        for chunk, line in zip(chunks, encoded, strict=True):
            cost = len(line) + 1
            if used + cost > limit:
                break
            kept.append(line)
            used += cost
            included += js_utf8_length(chunk)
        if kept:
            lines.append(b"\n".join(kept).decode("utf-8"))
        capped = True
        break
    if not capped and whole < total:
        capped = True
    if not capped:
        lines.append("")
        return "\n".join(lines), False
    missing = total - whole
    notice = cap_notice(max_bytes or source.spill_bytes or 0, missing, total, source.total_text_bytes - included,
                        whole + 1, source.session_id, source.captured_through_seq)
    lines += ["", notice, ""]
    return "\n".join(lines), True


def _open_unique(folder: Path, stem: str) -> tuple[Path, int]:
    """Create (exclusively) the first free ``<stem>.txt`` / ``<stem>-2.txt`` / ... in ``folder``."""
    attempt = 1
    while True:
        name = f"{stem}.txt" if attempt == 1 else f"{stem}-{attempt}.txt"
        path = folder / name
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            attempt += 1


def save_transcript(folder: Path | None, input_index: int, content: str) -> SpillResult:
    """Write ``content`` as ``session-reference-<input_index+1>.txt`` in ``folder`` (the target's session folder)."""
    if folder is None:
        return SpillResult.unavailable(STORAGE_NOT_CONFIGURED)
    data = content.encode("utf-8")
    path: Path | None = None
    try:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path, fd = _open_unique(folder, f"session-reference-{input_index + 1}")
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not save the full snapshot of reference #%d in %s: %s", input_index + 1, folder, exc)
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()
        return SpillResult.unavailable(SAVE_FAILED)
    return SpillResult.saved(path.resolve(), len(data))
