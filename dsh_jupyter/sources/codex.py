"""Codex rollouts: ``<home>/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`` (peers.md §A 2.1, 2.5).

``<home>`` is ``$CODEX_HOME`` when set, else ``~/.codex``; archived rollouts sit flat in
``archived_sessions/``. Each line is ``{timestamp, type, payload}``; the first is ``session_meta`` (``id``,
``cwd``, ``timestamp``). ``response_item`` lines are what the model saw, ``event_msg`` lines the display
log; both name the same conversation. The display log's ``user_message`` and ``agent_message`` hold
exactly the human prompts and the agent's answers, so they are read when present; a rollout without them
(older builds) is read from its ``response_item`` messages, leaving out the instructions and environment
blocks Codex injects as "user" text. A ``compacted`` line replaces everything before it (as on resume):
its ``replacement_history`` (when recorded) and its summary ``message``, which becomes a checkpoint.

Left out: tool calls and their output, reasoning, ``turn_context`` and every other line type. Titles: the
latest thread name (``thread_name_updated``), else the first prompt.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .base import ProjectedItem, ScanState, clip_title, parse_time, records, tool_home

TOOL = "Codex"
PREFIX = "codex:"

_NATIVE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_FILE_ID = re.compile(rf"rollout-.*?({_UUID})\.jsonl")
#: "User" text that Codex itself writes (instructions files, environment and turn context).
_INJECTED_PREFIXES = ("<environment_context>", "<user_instructions>", "<user_shell_command>", "<turn_aborted>",
                      "# AGENTS.md instructions", "<INSTRUCTIONS>")
_DIGITS = re.compile(r"[0-9]{2,4}")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b["text"] for b in content if isinstance(b, dict)
                     and b.get("type") in ("input_text", "output_text", "text") and isinstance(b.get("text"), str))


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    payload = record.get("payload")
    return payload if isinstance(payload, dict) else {}


def _is_injected(text: str) -> bool:
    return text.lstrip().startswith(_INJECTED_PREFIXES)


def _response_item(payload: dict[str, Any], when: int) -> ProjectedItem | None:
    if payload.get("type") != "message" or payload.get("role") not in ("user", "assistant"):
        return None
    text = _content_text(payload.get("content")).strip()
    if not text or (payload["role"] == "user" and _is_injected(text)):
        return None
    return ProjectedItem(str(payload["role"]), text, when)


def _event_item(payload: dict[str, Any], when: int) -> ProjectedItem | None:
    kind = payload.get("type")
    if kind not in ("user_message", "agent_message"):
        return None
    text = payload.get("message")
    if not isinstance(text, str) or not text.strip() or (kind == "user_message" and _is_injected(text)):
        return None
    return ProjectedItem("user" if kind == "user_message" else "assistant", text.strip(), when)


def _compacted(payload: dict[str, Any], when: int) -> list[ProjectedItem]:
    summary = payload.get("message")
    summary = summary.strip() if isinstance(summary, str) else ""
    kept: list[ProjectedItem] = []
    history = payload.get("replacement_history")
    if isinstance(history, list):
        for entry in history:
            item = _response_item(entry, when) if isinstance(entry, dict) else None
            if item is None:
                continue
            if summary and item.role == "user" and summary in item.text:
                item.checkpoint = True
            kept.append(item)
    if summary and not any(item.checkpoint for item in kept):
        kept.append(ProjectedItem("user", summary, when, checkpoint=True))
    return kept


class CodexSource:
    """Read-only access to Codex's rollouts (see the module notes)."""

    tool = TOOL
    prefix = PREFIX

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._root = None if root is None else Path(root)

    def root(self) -> Path:
        return tool_home(self._root, "CODEX_HOME", ".codex")

    @staticmethod
    def _folders(path: Path, depth: int) -> Iterator[Path]:
        """Date folders ``YYYY/MM/DD`` under ``path`` (``depth`` levels), newest names first."""
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name, reverse=True)
        except OSError:
            return
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False) or _DIGITS.fullmatch(entry.name) is None:
                    continue
            except OSError:
                continue
            if depth == 1:
                yield Path(entry.path)
            else:
                yield from CodexSource._folders(Path(entry.path), depth - 1)

    @staticmethod
    def _rollouts(folder: Path) -> Iterator[str]:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        base = os.path.join(folder, "")
        match = _FILE_ID.fullmatch
        for name in names:
            if match(name):
                yield base + name

    def discover(self) -> Iterator[str]:
        root = self.root()
        for folder in self._folders(root / "sessions", 3):
            yield from self._rollouts(folder)
        yield from self._rollouts(root / "archived_sessions")

    def locate(self, native_id: str) -> str | None:
        if _NATIVE_ID.fullmatch(native_id) is None:
            return None
        root = self.root()
        for pattern in (f"sessions/*/*/*/rollout-*{native_id}.jsonl", f"archived_sessions/rollout-*{native_id}.jsonl"):
            for path in root.glob(pattern):
                return str(path)
        return None

    def native_id(self, path: str, state: ScanState) -> str | None:
        match = _FILE_ID.fullmatch(os.path.basename(path))
        if match is not None:
            return match.group(1).lower()
        return state.native_id if state.native_id and _NATIVE_ID.fullmatch(state.native_id) else None

    def scan_header(self, fh: BinaryIO, state: ScanState) -> ScanState:
        for record, after in records(fh, state.offset):
            state.offset = after
            kind = record.get("type")
            payload = _payload(record)
            if not state.created_at:
                state.created_at = parse_time(record.get("timestamp"))
            if kind == "session_meta":
                if state.native_id is None and isinstance(payload.get("id"), str):
                    state.native_id = payload["id"]
                if state.cwd is None and isinstance(payload.get("cwd"), str):
                    state.cwd = payload["cwd"]
                state.created_at = parse_time(payload.get("timestamp")) or state.created_at
            elif kind == "event_msg" and payload.get("type") == "thread_name_updated":
                state.offer_title(payload.get("thread_name"), 3)
            elif state.first_prompt is None and kind in ("event_msg", "response_item"):
                item = _event_item(payload, 0) if kind == "event_msg" else _response_item(payload, 0)
                if item is not None and item.role == "user":
                    state.first_prompt = clip_title(item.text)
        return state

    def read_items(self, fh: BinaryIO) -> tuple[list[ProjectedItem], int]:
        shown: list[ProjectedItem] = []   # from the display log (event_msg)
        seen: list[ProjectedItem] = []    # from what the model saw (response_item)
        displayed = False
        lines = 0
        for record, _after in records(fh):
            lines += 1
            kind = record.get("type")
            payload = _payload(record)
            when = parse_time(record.get("timestamp"))
            if kind == "event_msg":
                item = _event_item(payload, when)
                if payload.get("type") in ("user_message", "agent_message"):
                    displayed = True
                if item is not None:
                    shown.append(item)
            elif kind == "response_item":
                item = _response_item(payload, when)
                if item is not None:
                    seen.append(item)
            elif kind == "compacted":
                kept = _compacted(payload, when)
                shown = [ProjectedItem(i.role, i.text, i.time, i.checkpoint) for i in kept]
                seen = kept
        return (shown if displayed else seen), lines
