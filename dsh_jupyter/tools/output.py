"""Bounded capture of process output: keep a head and a tail in memory, spill the whole to a file.

A command can print gigabytes; the model should see at most ``limit`` bytes. :class:`OutputCapture`
keeps the first and last parts within that budget and, when given a spill path, streams everything
to that file once the output outgrows the budget, so nothing is lost and memory stays bounded.

Every file of tool output is written through :class:`OutputFile`, which masks secrets as the bytes stream
past (:class:`~dsh_jupyter.secrets.MaskedStream`): a session folder is something people copy and commit.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..secrets import MaskedStream, default_masker

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]")


def safe_filename(name: str, suffix: str = ".txt") -> str:
    """A file name derived from an id that may contain path separators or other odd characters."""
    cleaned = _UNSAFE_FILENAME.sub("_", name).lstrip(".") or "output"
    return cleaned[:150] + suffix


def tool_output_path(session_dir: Path | None, call_id: str) -> Path | None:
    """``<session_dir>/tool-output/<call_id>.txt``, or ``None`` when the session has no folder."""
    if session_dir is None:
        return None
    return Path(session_dir) / "tool-output" / safe_filename(call_id)


#: Bytes kept past the head's end and before the tail's start, so that a secret the cut falls in can be kept
#: whole (and so masked) instead of leaving a piece of it that no longer looks like the secret.
SECRET_CONTEXT = 4096


def _safe_cut(data: bytes | bytearray, at: int) -> int:
    """``at`` (a byte offset at a character start) moved back to where no secret is cut in two."""
    text = bytes(data).decode("utf-8", "surrogateescape")
    chars = len(bytes(data[:at]).decode("utf-8", "surrogateescape"))
    safe = default_masker().safe_cut(text, chars)
    return at if safe == chars else len(text[:safe].encode("utf-8", "surrogateescape"))


def _char_start(data: bytes | bytearray, index: int) -> int:
    """Move ``index`` back to the start of the UTF-8 character it falls in."""
    while 0 < index < len(data) and (data[index] & 0xC0) == 0x80:
        index -= 1
    return index


def _skip_continuation(data: bytes | bytearray) -> int:
    """Index of the first byte of ``data`` that starts a UTF-8 character."""
    index = 0
    while index < len(data) and (data[index] & 0xC0) == 0x80 and index < 3:
        index += 1
    return index


class OutputFile:
    """A file of tool output, written with every secret masked (the one way tool output reaches a file).

    ``path``'s folder is created; :class:`OSError` from opening or writing is the caller's to report.
    :meth:`flush` writes what is known to be safe and flushes it, so the file can be followed while a job
    runs (a line is held only while a secret could still span it); :meth:`close` writes the rest.
    """

    def __init__(self, path: Path) -> None:
        os.makedirs(path.parent, exist_ok=True)
        self.path = path
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._masked = MaskedStream()

    def write(self, chunk: bytes | bytearray) -> None:
        if self._file is not None:
            self._file.write(self._masked.feed(bytes(chunk)))

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Write what is still held and close; safe to call twice."""
        handle, self._file = self._file, None
        if handle is None:
            return
        try:
            handle.write(self._masked.finish())
        finally:
            handle.close()


@dataclass(frozen=True)
class CapturedOutput:
    """The result of a capture: the text to show, whether it was cut, and where the whole is kept."""

    head: str
    tail: str
    total_bytes: int
    truncated: bool
    head_bytes: int
    tail_bytes: int
    spill_path: Path | None = None
    spill_error: str | None = None

    @property
    def text(self) -> str:
        """Head and tail joined (the whole output when nothing was cut)."""
        return self.head + self.tail

    def preview(self) -> str:
        """The text with an explanatory marker between head and tail when the output was cut."""
        if not self.truncated:
            return self.text
        if self.spill_path is not None:
            where = f"full output saved to {self.spill_path}"
        elif self.spill_error is not None:
            where = f"full output could not be saved: {self.spill_error}"
        else:
            where = "full output not saved (no session folder)"
        omitted = self.total_bytes - self.head_bytes - self.tail_bytes
        return (
            f"{self.head}\n[... {omitted} bytes omitted: showing the first {self.head_bytes} and last "
            f"{self.tail_bytes} of {self.total_bytes} bytes; {where} ...]\n{self.tail}"
        )


class OutputCapture:
    """Accumulate a byte stream within ``limit`` bytes of memory for the preview.

    ``spill_path`` (optional) receives the complete stream, written only once the output exceeds the
    limit (small outputs create no file). ``always_spill`` writes the file from the first byte.
    """

    def __init__(self, limit: int, spill_path: Path | None = None, *, always_spill: bool = False) -> None:
        if limit < 64:
            raise ValueError(f"output limit must be at least 64 bytes, got {limit}")
        self.limit = limit
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.spill_path = spill_path
        self.total = 0
        self._buffer = bytearray()  # whole output while it fits; afterwards the head
        self._tail = bytearray()
        self._overflowed = False
        self._file: OutputFile | None = None
        self._spill_error: str | None = None
        if always_spill:
            self._open_spill()

    @property
    def overflowed(self) -> bool:
        return self._overflowed

    def _open_spill(self) -> None:
        if self.spill_path is None or self._file is not None or self._spill_error is not None:
            return
        try:
            self._file = OutputFile(self.spill_path)
            self._file.write(self._buffer)
        except OSError as exc:
            self._spill_error = f"{type(exc).__name__}: {exc}"
            self._file = None

    def _write_spill(self, chunk: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(chunk)
        except OSError as exc:
            self._spill_error = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.total += len(chunk)
        self._write_spill(chunk)
        if not self._overflowed:
            self._buffer.extend(chunk)
            if len(self._buffer) <= self.limit:
                return
            self._overflowed = True
            self._open_spill_after_overflow()
            data = bytes(self._buffer)
            # Keep bytes past the head limit so finish() sees where the last character (or a secret) ends.
            del self._buffer[self.head_limit + SECRET_CONTEXT:]
            self._tail = bytearray(data[self.head_limit:])
        else:
            self._tail.extend(chunk)
        kept = self.tail_limit + SECRET_CONTEXT
        if len(self._tail) > kept * 2:
            del self._tail[: len(self._tail) - kept]

    def _open_spill_after_overflow(self) -> None:
        if self._file is None:
            self._open_spill()  # writes the whole buffer, which includes the current chunk

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self._spill_error = f"{type(exc).__name__}: {exc}"
            self._file = None

    def finish(self) -> CapturedOutput:
        """Close the spill file and return what to show."""
        self.close()
        if not self._overflowed:
            spilled = self.spill_path if (self.spill_path is not None and self._spill_error is None
                                          and self.spill_path.exists()) else None
            return CapturedOutput(self._buffer.decode("utf-8", "replace"), "", self.total, False,
                                  len(self._buffer), 0, spilled, self._spill_error)
        # Neither cut may fall inside a secret: the piece left would no longer be recognised and masked.
        head_end = _safe_cut(self._buffer, _char_start(self._buffer, min(self.head_limit, len(self._buffer))))
        head = bytes(self._buffer[:head_end])
        start = max(0, len(self._tail) - self.tail_limit)
        start += _skip_continuation(self._tail[start:])
        tail = bytes(self._tail[_safe_cut(self._tail, start):])
        spilled = self.spill_path if (self.spill_path is not None and self._spill_error is None) else None
        return CapturedOutput(head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"), self.total, True,
                              len(head), len(tail), spilled, self._spill_error)
