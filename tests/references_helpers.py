"""Shared helpers for the reference tests: an in-memory store, log builders and stalling queries."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget, SessionReferenceResolver
from dsh_jupyter.references.retention import js_utf8_length
from dsh_jupyter.session import Event, ReplaceOp, SessionHeader, SessionLog, SessionNotFoundError, SurfaceSnapshot
from dsh_jupyter.session.messages import (
    assistant_message,
    compaction_source,
    text_block,
    tool_result_message,
    user_message,
)
from dsh_jupyter.store.base import SessionLocation, SessionStore, SessionWriter

MODEL_SOURCE = {"kind": "model", "provider": "mock", "model": "mock"}


class MemoryWriter(SessionWriter):
    """Writes straight into the owning :class:`MemoryStore` on flush."""

    def __init__(self, store: MemoryStore, header: SessionHeader) -> None:
        self.store = store
        self.header = header
        self._pending: list[Event] = []
        self._closed = False

    def append(self, events: Iterable[Event]) -> None:
        self._pending.extend(events)

    def flush(self) -> None:
        if not self._pending:
            return
        log = self.store.logs.get(self.header.id)
        if log is None:
            log = SessionLog(self.header)
            self.store.logs[self.header.id] = log
        for event in self._pending:
            if event.seq >= len(log):
                log._admit(event)
        self._pending.clear()

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True

    @property
    def materialized(self) -> bool:
        return self.header.id in self.store.logs


class MemoryStore(SessionStore):
    """A :class:`SessionStore` over in-memory :class:`SessionLog` objects; ``root`` gives session folders."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.logs: dict[str, SessionLog] = {}
        self.title_failures: set[str] = set()

    def add(self, log: SessionLog) -> SessionLog:
        self.logs[log.header.id] = log
        return log

    def new_log(self, session_id: str, *, cwd: str | None = None, created_at: int = 1) -> SessionLog:
        return self.add(SessionLog(SessionHeader(session_id, created_at, cwd)))

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        folder = self.session_dir(header)
        return SessionLocation("memory", str(folder / "session.jsonl")) if folder is not None else None

    def session_dir(self, header: SessionHeader) -> Path | None:
        if self.root is None:
            return None
        return self.root / re.sub(r"[^A-Za-z0-9_-]", lambda m: f"~{ord(m.group(0)):04x}", header.id)

    def create(self, header: SessionHeader) -> SessionWriter:
        return MemoryWriter(self, header)

    def open(self, session_id: str) -> tuple[SessionLog, SessionWriter]:
        log = self.load(session_id)
        writer = MemoryWriter(self, log.header)
        writer.attach(log)
        return log, writer

    def _log(self, session_id: str) -> SessionLog:
        try:
            return self.logs[session_id]
        except KeyError:
            raise SessionNotFoundError(session_id, "memory") from None

    def load(self, session_id: str) -> SessionLog:
        return self._log(session_id)

    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        return self._log(session_id).snapshot()

    def read_title(self, session_id: str) -> dict[str, Any] | None:
        if session_id in self.title_failures:
            raise OSError(f"title log of {session_id} is unreadable")
        return self._log(session_id).title()

    def list_headers(self) -> list[SessionHeader]:
        return [log.header for log in self.logs.values()]

    def delete(self, session_id: str) -> None:
        self._log(session_id)
        del self.logs[session_id]


class StallingQuery(SessionQuery):
    """A query whose chosen operations block until ``release`` is set (or forever)."""

    def __init__(self, store: SessionStore, *, stall_reads: bool = False, stall_list: bool = False,
                 stall_titles: bool = False) -> None:
        super().__init__(store)
        self.stall_reads = stall_reads
        self.stall_list = stall_list
        self.stall_titles = stall_titles
        self.release = threading.Event()
        self.entered = threading.Event()
        self.finished = threading.Event()
        self.reads: list[str] = []

    def _stall(self) -> None:
        self.entered.set()
        self.release.wait(30)

    def read_surface(self, session_id: str, *, skip_data: Collection[str] = ()) -> SurfaceSnapshot:
        self.reads.append(session_id)
        if self.stall_reads:
            self._stall()
        try:
            return super().read_surface(session_id, skip_data=skip_data)
        finally:
            self.finished.set()

    def list_sessions(self):  # type: ignore[no-untyped-def]
        if self.stall_list:
            self._stall()
        return super().list_sessions()

    def title(self, session_id: str) -> str | None:
        if self.stall_titles:
            self._stall()
        return super().title(session_id)


def append_user(log: SessionLog, text: str, source: dict[str, Any] | None = None, **extra: Any) -> Event:
    return log.append("user/message", user_message(text, source, **extra))


def append_assistant(log: SessionLog, *blocks: dict[str, Any], turn: int = 1, step: int = 1) -> Event:
    return log.append("assistant/message", {"turn": turn, "step": step,
                                            "message": assistant_message(list(blocks), MODEL_SOURCE)})


def append_checkpoint(log: SessionLog, text: str, start: int, end: int) -> Event:
    shadowed = [s for s in log._fold.seqs]
    first, last = shadowed.index(start), shadowed.index(end)
    return log.append("user/message", user_message(text, compaction_source("cmp-1")),
                      surface_op=ReplaceOp(start, end), source_event_seqs=shadowed[first:last + 1])


def build_projection_log(session_id: str = "source", cwd: str | None = "/source") -> SessionLog:
    """The reference's projection fixture: capturedThroughSeq 13, conversation of four messages."""
    log = SessionLog(SessionHeader(session_id, 5, cwd))
    old_user = append_user(log, "old user")
    old_assistant = append_assistant(log, text_block("old assistant"))
    append_checkpoint(log, "<compacted-summary>checkpoint</compacted-summary>", old_user.seq, old_assistant.seq)
    append_user(log, "recent user")
    append_user(log, "workspace secret", {"kind": "plugin", "plugin": "workspace"})
    append_user(log, "human steer")
    append_user(log, "plugin steer", {"kind": "plugin", "plugin": "goal"})
    log.append("tool/result",
               {"turn": 2, "step": 1, "message": tool_result_message("call", [text_block("tool output")])})
    append_assistant(log, {"type": "reasoning", "text": "private reasoning"}, text_block("visible answer"), turn=2)
    append_user(log, "plugin-generated user", {"kind": "plugin", "plugin": "goal"})
    log.append("user/message", user_message([{"type": "reasoning", "text": "empty projected user"}]))
    log.append("user/message", user_message([{"type": "reasoning", "text": "empty projected steering"}]))
    append_assistant(log, {"type": "reasoning", "text": "empty projected assistant"}, turn=2, step=2)
    log.append("assistant/chunk", {"turn": 2, "step": 2,
                                   "chunk": {"type": "text-delta", "index": 0, "text": "unfinished answer"}})
    return log


PROJECTION_CONVERSATION = [
    {"role": "user", "text": "<compacted-summary>checkpoint</compacted-summary>"},
    {"role": "user", "text": "recent user"},
    {"role": "user", "text": "human steer"},
    {"role": "assistant", "text": "visible answer"},
]


def make_resolver(store: MemoryStore, **config: Any) -> tuple[SessionReferenceResolver, SessionQuery]:
    query = SessionQuery(store)
    return SessionReferenceResolver(query, **config), query


def target_for(store: MemoryStore, session_id: str = "target", *, cwd: str | None = None,
               context_window: int | None = None) -> ReferenceTarget:
    log = store.logs[session_id] if session_id in store.logs else store.new_log(session_id, cwd=cwd)
    return ReferenceTarget.from_header(log.header, store, context_window=context_window)


def prompt_data(text: str) -> Any:
    """The JSON array between the tags of a context text (fails the test when it is missing)."""
    match = re.search(r"<referenced-sessions>\n([\s\S]*)\n</referenced-sessions>", text)
    assert match is not None, "missing <referenced-sessions> payload"
    return json.loads(match.group(1))


def omission_entries(text: str) -> list[dict[str, Any]]:
    """The JSON array of the ``## Reference omissions`` section (its last line)."""
    _, sep, tail = text.partition("\n\n## Reference omissions\n\n")
    assert sep, "missing omission section"
    entries: list[dict[str, Any]] = json.loads(tail.split("\n")[-1])
    return entries


def context_text(prepared: Any) -> str:
    assert prepared.additional_context is not None
    blocks = prepared.additional_context["content"]
    assert len(blocks) == 1 and blocks[0]["type"] == "text"
    return str(blocks[0]["text"])


def object_size(value: Any) -> int:
    """UTF-8 bytes of a value's tag-safe compact JSON (as the budget measures it)."""
    from dsh_jupyter.references.framing import tag_safe_dumps

    return js_utf8_length(tag_safe_dumps(value))


def whole_text_retention(messages: list[tuple[str, str, bool]], data_of: Any, max_bytes: int
                         ) -> tuple[dict[str, Any], tuple[int, int, int]] | None:
    """An independent oracle: retention as first written, on whole texts held in memory.

    ``messages`` are ``(role, text, checkpoint)``; ``data_of(pairs)`` builds the source object. Returns
    the fitted object and ``(retained, omitted messages, omitted bytes)``, or ``None`` when nothing fits."""
    from dsh_jupyter.references.framing import tag_safe_dumps
    from dsh_jupyter.references.retention import truncate_with_notice

    def size(items: list[list[Any]]) -> int:
        return js_utf8_length(tag_safe_dumps(data_of([(item[0], item[1]) for item in items])))

    items: list[list[Any]] = [[role, text, checkpoint, text, 0] for role, text, checkpoint in messages]
    omitted_messages = dropped = 0
    while size(items) > max_bytes:
        droppable = [i for i, item in enumerate(items[:-1]) if not item[2]]
        if not droppable:
            break
        dropped += js_utf8_length(items[droppable[0]][1])
        del items[droppable[0]]
        omitted_messages += 1
    while size(items) > max_bytes:
        longest = max(range(len(items)), key=lambda i: (js_utf8_length(items[i][1]), -i), default=None)
        if longest is None or js_utf8_length(items[longest][1]) == 0:
            return None
        item = items[longest]
        target = max(0, js_utf8_length(item[1]) - (size(items) - max_bytes))
        text, omitted = truncate_with_notice(item[3], target)
        if text == item[1]:
            return None
        item[1], item[4] = text, omitted
    data = data_of([(item[0], item[1]) for item in items])
    return data, (len(items), omitted_messages, dropped + sum(item[4] for item in items))


def context_of(prepared: Any) -> dict[str, Any]:
    """The context message of a preparation that had references."""
    assert prepared.additional_context is not None
    context: dict[str, Any] = prepared.additional_context
    return context


def spill_path(result: Any) -> Path:
    """Where a saved spill went."""
    assert result.path is not None
    path: Path = result.path
    return path


def folder_of(target: Any) -> Path:
    """The target's session folder (the tests' targets always have one)."""
    assert target.session_dir is not None
    folder: Path = target.session_dir
    return folder
