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
from collections.abc import Iterator, Sequence
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
    return b"\n".join(block for block, _ in _fragment_windows(_masked(text), size)).decode("utf-8")


def _masked(text: str, plain: bool = False) -> str:
    """``text`` with its secrets masked (before it is cut: a secret split over two lines would stay readable),
    as JavaScript sees it. ``plain``: ``text`` is known to hold no lone surrogate, and masking only takes
    characters out and puts plain ones in, so the masked text holds none either (no search for them)."""
    masked = mask_text(text)
    return masked if plain else js_string(masked)


#: Fragment lines encoded at a time: the window of a text held encoded at once (about 270 KB of prose).
WINDOW_LINES = 4096


def _fragment_windows(masked: str, size: int = FRAGMENT_CODE_POINTS) -> Iterator[tuple[bytes, str]]:
    """The fragment lines of ``masked`` (already masked), :data:`WINDOW_LINES` at a time: each window's lines
    joined with ``\\n`` as UTF-8, and the text they hold. One encoder call per window, never one per line."""
    step = size * WINDOW_LINES
    for start in range(0, len(masked), step):
        piece = masked[start : start + step]
        yield _encode_lines([piece[i : i + size] for i in range(0, len(piece), size)]), piece


def _encode_lines(chunks: list[str]) -> bytes:
    """The JSON string literal of each chunk, one per line, as UTF-8.

    orjson writes an indented list with one element per line, and a JSON string never holds a raw newline,
    so the lines are the list's elements once the brackets, indentation and commas are taken off. Each
    separator is searched for with the quotes around it: a pattern ending in a space is found slowly in prose."""
    try:
        listed = orjson.dumps(chunks, option=orjson.OPT_INDENT_2)
    except TypeError:  # lone surrogates: orjson refuses them, the slow path escapes them like JavaScript
        return "\n".join(dumps(chunk) for chunk in chunks).encode("utf-8")
    return listed[4:-2].replace(b'",\n  "', b'"\n"')


def _utf8_prefix_length(masked: str, end: int, step: int = FRAGMENT_CODE_POINTS * WINDOW_LINES) -> int:
    """``js_utf8_length(masked[:end])`` of a masked text (:func:`_masked`), ``step`` code points at a time so a huge
    text is never copied whole (the windows cut no surrogate pair: the masked text holds them joined)."""
    return sum(js_utf8_length(masked[start : min(start + step, end)]) for start in range(0, end, step))


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
    pieces, capped = capped_transcript_pieces(source, label, max_bytes)
    return b"".join(pieces).decode("utf-8"), capped


def capped_transcript_pieces(source: BoundedProjection, label: str,
                             max_bytes: int | None = None) -> tuple[list[bytes], bool]:
    """:func:`render_capped_transcript` as UTF-8 pieces to write one after another (``(pieces, capped)``).

    Built a window of fragment lines at a time (:func:`_fragment_windows`) and only up to the cap: it holds
    the transcript (at most ``max_bytes``) plus one window, whatever the size of the messages."""
    total = len(source)
    capture = {key: value for key, value in source.data(label, []).items() if key != "conversation"}
    capture["capturedFormatVersion"] = source.format_version
    heading = "\n".join(_heading(capture)).encode("utf-8")
    pieces = [heading]
    used = len(heading) + 1  # every line is counted with the newline that ends it
    # Room for the closing notice: its longest form (every count at its largest) plus the blank line before it.
    room = len(cap_notice(max_bytes or 0, total, total, source.total_text_bytes, total + 1, source.session_id,
                          source.captured_through_seq).encode("utf-8")) + 2
    limit = math.inf if max_bytes is None else max(max_bytes - room, used)
    whole = 0
    included = 0
    capped = False
    for number, part in enumerate(source.spill, start=1):
        title = f"\n\n### Message {number}: {part.role}\n".encode()  # a blank line, the title, a blank line
        if used + len(title) > limit:
            capped = True
            break
        pieces.append(title)
        used += len(title)
        # Code points of the masked text written so far: their UTF-8 size is counted only if the message is cut.
        kept = 0
        masked = _masked(part.text, part.plain)
        for block, text in _fragment_windows(masked):
            if used + len(block) + 1 <= limit:
                pieces += [b"\n", block]
                used += len(block) + 1
                kept += len(text)
                continue
            lines = block.split(b"\n")
            fitting = 0
            for line in lines:
                if used + len(line) + 1 > limit:
                    break
                used += len(line) + 1
                fitting += 1
            if fitting:
                pieces += [b"\n", b"\n".join(lines[:fitting])]
                kept += min(len(text), fitting * FRAGMENT_CODE_POINTS)
            capped = True
            break
        if capped or not part.whole:
            included += _utf8_prefix_length(masked, kept)
            capped = True
            break
        del masked  # not held while the next message is masked
        whole += 1
        included += source.text_bytes[number - 1]
    if not capped and whole < total:
        capped = True
    if not capped:
        pieces.append(b"\n")
        return pieces, False
    missing = total - whole
    notice = cap_notice(max_bytes or source.spill_bytes or 0, missing, total, source.total_text_bytes - included,
                        whole + 1, source.session_id, source.captured_through_seq)
    pieces.append(f"\n\n{notice}\n".encode())
    return pieces, True


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


#: Bytes of transcript pieces written with one ``write`` (a transcript comes as thousands of small pieces).
WRITE_BYTES = 1 << 20


def _batched(pieces: Sequence[bytes]) -> Iterator[bytes]:
    """``pieces`` joined into runs of about :data:`WRITE_BYTES` (a piece longer than that comes alone)."""
    batch: list[bytes] = []
    held = 0
    for piece in pieces:
        if held and held + len(piece) > WRITE_BYTES:
            yield b"".join(batch)
            batch, held = [], 0
        batch.append(piece)
        held += len(piece)
    if batch:
        yield batch[0] if len(batch) == 1 else b"".join(batch)


def save_transcript(folder: Path | None, input_index: int, content: str | Sequence[bytes]) -> SpillResult:
    """Write ``content`` (text, or UTF-8 pieces written one after another) as ``session-reference-<input_index+1>.txt``
    in ``folder`` (the target's session folder)."""
    if folder is None:
        return SpillResult.unavailable(STORAGE_NOT_CONFIGURED)
    pieces = [content.encode("utf-8")] if isinstance(content, str) else content
    path: Path | None = None
    try:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path, fd = _open_unique(folder, f"session-reference-{input_index + 1}")
        try:
            for batch in _batched(pieces):
                write_all(fd, batch)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not save the full snapshot of reference #%d in %s: %s", input_index + 1, folder, exc)
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()
        return SpillResult.unavailable(SAVE_FAILED)
    return SpillResult.saved(path.resolve(), sum(map(len, pieces)))
