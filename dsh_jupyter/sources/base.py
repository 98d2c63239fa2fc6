"""The seam every read-only source of another tool's transcripts fills (Claude Code, Codex).

A source finds transcript files, reads one header-like record of each (:class:`ForeignHeader`: id, cwd,
created, title) and reads a transcript's current surface projected into our own shapes: user prompts and
assistant text as ``user/message`` / ``assistant/message`` events, the tool's compaction summaries as
checkpoints. Tool calls, tool output, thinking and system or meta text never come across. The result is a
:class:`~dsh_jupyter.session.SurfaceSnapshot`, so a reference to it goes through the very same projection,
budget, framing and freezing as a reference to one of our sessions.

Their formats are internal to those tools and change often, so readers are lenient: unknown line types are
skipped, damaged lines (bad JSON, not an object, longer than the store's line cap) are skipped, a final line
without a newline (a write in progress) is not read. Files are opened as our own logs are
(:func:`~dsh_jupyter.store.safe_open.open_log`: regular files only, never through a link, never blocking).

Ids carry the tool's namespace (``claude-code:<uuid>``, ``codex:<uuid>``): ours are plain UUIDs, so the two
never collide and each id has one canonical ``dsh-session:`` URI.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from .._json import loads
from ..secrets import mask_text
from ..session.events import ASSISTANT_MESSAGE, USER_MESSAGE, Event
from ..session.header import SessionHeader
from ..session.messages import USER_SOURCE, assistant_message, compaction_source, text_block, user_message
from ..session.surface import SurfaceSnapshot
from ..store.scan import MAX_LINE_BYTES, OVERLONG, _Lines

#: How a foreign assistant message names who wrote it (our ``source`` field).
FOREIGN_ASSISTANT_KIND = "foreign"

#: Longest title kept (characters); a first prompt used as a title is cut to its first line too.
MAX_TITLE_CHARS = 120


@dataclass(frozen=True)
class ForeignHeader:
    """One transcript as a listing sees it. ``created_at`` is epoch milliseconds (0 when unknown)."""

    session_id: str
    tool: str
    path: str
    cwd: str | None
    created_at: int
    title: str | None


@dataclass
class ProjectedItem:
    """One message of a foreign surface: ``role`` ``user`` or ``assistant``; ``checkpoint`` for a summary."""

    role: str
    text: str
    time: int = 0
    checkpoint: bool = False


@dataclass
class ScanState:
    """What a header scan learned so far; a scan resumes from ``offset`` when the file only grew."""

    offset: int = 0
    native_id: str | None = None
    cwd: str | None = None
    created_at: int = 0
    title: str | None = None
    #: Rank of the title's kind (higher wins; a later title of the same rank replaces an earlier one).
    title_rank: int = 0
    first_prompt: str | None = None

    def to_json(self) -> list[Any]:
        """A compact JSON form: ``[offset, native id, cwd, created, title, title rank, first prompt]``."""
        return [self.offset, self.native_id, self.cwd, self.created_at, self.title, self.title_rank,
                self.first_prompt]

    @classmethod
    def from_json(cls, record: Any) -> ScanState | None:
        """The state :meth:`to_json` wrote, or ``None`` for anything else."""
        if not isinstance(record, list) or len(record) != 7:
            return None
        offset, native, cwd, created, title, rank, first = record
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (offset, created, rank)) or offset < 0:
            return None
        return cls(offset, _opt_str(native), _opt_str(cwd), created, _opt_str(title), rank, _opt_str(first))

    def offer_title(self, text: Any, rank: int) -> None:
        """Keep ``text`` as the title when its kind ranks at least as high as the current one's."""
        if isinstance(text, str) and text.strip() and rank >= self.title_rank:
            self.title, self.title_rank = clip_title(text), rank

    def best_title(self) -> str | None:
        return self.title if self.title is not None else self.first_prompt


class ForeignSource(Protocol):
    """A read-only source of another tool's transcripts."""

    #: The tool's name as shown to users ("Claude Code", "Codex").
    tool: str
    #: The id namespace, colon included ("claude-code:").
    prefix: str

    def root(self) -> Path:
        """Where this tool keeps its transcripts (whether or not it exists)."""
        ...

    def discover(self) -> Iterator[str]:
        """The path of every transcript file (no file is opened)."""
        ...

    def locate(self, native_id: str) -> str | None:
        """The transcript of one native id (without the namespace), or ``None``."""
        ...

    def scan_header(self, fh: BinaryIO, state: ScanState) -> ScanState:
        """Continue a header scan from ``state.offset`` (a fresh ``ScanState()`` for a new file)."""
        ...

    def native_id(self, path: str, state: ScanState) -> str | None:
        """The transcript's own id, from what the scan found or from its file name."""
        ...

    def read_items(self, fh: BinaryIO) -> tuple[list[ProjectedItem], int]:
        """The transcript's current surface, projected, and how many lines were read."""
        ...


# -- helpers shared by the readers ---------------------------------------------------------------------------
def tool_home(explicit: Path | None, variable: str, default: str) -> Path:
    """Where a tool keeps its files: ``explicit``, else a non-blank ``$variable``, else ``~/<default>``."""
    if explicit is not None:
        return explicit
    configured = os.environ.get(variable, "").strip()
    return Path(os.path.expanduser(configured)) if configured else Path.home() / default


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def clip_title(text: str) -> str:
    """A one-line title of at most :data:`MAX_TITLE_CHARS` characters, its secrets masked first (a key cut in
    two by the clip would no longer be recognised)."""
    line = " ".join(mask_text(text.strip().split("\n", 1)[0]).split())
    return line if len(line) <= MAX_TITLE_CHARS else line[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def parse_time(value: Any) -> int:
    """Epoch milliseconds of an ISO 8601 timestamp (``...Z`` included), or 0 when it is not one."""
    if not isinstance(value, str) or not value:
        return 0
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return 0
    if moment.tzinfo is None:
        return 0
    return max(0, int(moment.timestamp() * 1000))


def records(fh: BinaryIO, offset: int = 0) -> Iterator[tuple[dict[str, Any], int]]:
    """Each complete line from ``offset`` that holds a JSON object, with the offset just past it.

    Damaged lines (unparsable, not an object, longer than the store's line cap) are skipped; a final line
    without a newline is never read (it may be a write in progress)."""
    for buf, start, end, at in _Lines(fh, offset, max_line=MAX_LINE_BYTES):
        after = at + (end - start) + 1
        if buf is OVERLONG or end <= start:
            yield {}, after
            continue
        try:
            record = loads(buf[start:end])
        except (ValueError, RecursionError, MemoryError):
            record = None
        yield (record if isinstance(record, dict) else {}), after


def snapshot(header: SessionHeader, items: list[ProjectedItem], lines: int) -> SurfaceSnapshot:
    """Our surface shape of a projected foreign transcript (one appended event a message).

    Every text is masked here (:func:`~dsh_jupyter.secrets.mask_text`), as it enters this process: the other
    tool never masked it, and from here it can reach a log, a cell, a saved full snapshot."""
    events: list[Event] = []
    for seq, item in enumerate(items):
        text = mask_text(item.text)
        if item.role == "assistant":
            message = assistant_message([text_block(text)], {"kind": FOREIGN_ASSISTANT_KIND})
            events.append(Event(ASSISTANT_MESSAGE, seq, item.time, {"message": message}, "append"))
        else:
            source = compaction_source(f"{header.id}#{seq}") if item.checkpoint else USER_SOURCE
            events.append(Event(USER_MESSAGE, seq, item.time, user_message(text, source), "append"))
    return SurfaceSnapshot(header, lines - 1 if lines > 0 else None, events)


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """``(size, mtime_ns, inode)`` of a regular file, not following a link; ``None`` otherwise."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino
