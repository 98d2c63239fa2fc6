"""Claude Code transcripts: ``<config>/projects/<cwd key>/<session uuid>.jsonl`` (peers.md §A 1.1, 1.2, 1.6).

``<config>`` is ``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``. Each line is one JSON object with a
``type``. ``user`` and ``assistant`` lines wrap an Anthropic Messages-API ``message`` and are threaded by
``parentUuid → uuid``, not by file order: a rewind leaves a dead branch in the file, and sub-agent lines are
marked ``isSidechain``. The live branch is the chain that ends at the last main-chain message of the file.
A ``/compact`` writes a ``system`` line of subtype ``compact_boundary`` (where the chain restarts) and a
``user`` line with ``isCompactSummary`` (the summary): that summary becomes a checkpoint.

Kept: prompts and assistant text. Left out: tool calls and results, thinking, images, ``isMeta`` lines
(harness-injected "user" text), slash-command records (``<command-name>``, ``<local-command-stdout>``, …),
and every other line type. Titles: the latest ``custom-title`` (set by the user) wins, then the latest
``ai-title``, then ``summary``; without any, the first prompt.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .base import ProjectedItem, ScanState, clip_title, parse_time, records, tool_home

TOOL = "Claude Code"
PREFIX = "claude-code:"

#: A transcript's own id (its file name): a UUID in practice; anything else that could reach a path is refused.
_NATIVE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")
#: Harness-written "user" text: slash commands, their output, hook output, interruption notices.
_META_PREFIXES = ("<command-name>", "<command-message>", "<command-args>", "<local-command-", "<bash-input>",
                  "<bash-stdout>", "<bash-stderr>", "<user-prompt-submit-hook>", "<system-reminder>",
                  "[Request interrupted by user")
_TITLE_RANKS = {"summary": 1, "ai-title": 2, "custom-title": 3}
_TITLE_KEYS = {"summary": ("summary",), "ai-title": ("aiTitle", "title"), "custom-title": ("customTitle", "title")}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b["text"] for b in content
                     if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def _message(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    return message if isinstance(message, dict) else {}


def project(record: dict[str, Any]) -> ProjectedItem | None:
    """The projected form of one ``user``/``assistant`` line, or ``None`` when it carries nothing we keep."""
    kind = record.get("type")
    if kind not in ("user", "assistant") or record.get("isSidechain") is True:
        return None
    when = parse_time(record.get("timestamp"))
    text = _text_of(_message(record).get("content")).strip()
    if not text:
        return None
    if kind == "assistant":
        return ProjectedItem("assistant", text, when)
    if record.get("isCompactSummary") is True:
        return ProjectedItem("user", text, when, checkpoint=True)
    if record.get("isMeta") is True or record.get("isVisibleInTranscriptOnly") is True:
        return None
    if text.startswith(_META_PREFIXES):
        return None
    return ProjectedItem("user", text, when)


class ClaudeCodeSource:
    """Read-only access to Claude Code's transcripts (see the module notes)."""

    tool = TOOL
    prefix = PREFIX

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._root = None if root is None else Path(root)

    def root(self) -> Path:
        return tool_home(self._root, "CLAUDE_CONFIG_DIR", ".claude")

    def discover(self) -> Iterator[str]:
        projects = os.path.join(self.root(), "projects")
        try:
            folders = sorted(os.scandir(projects), key=lambda e: e.name)
        except OSError:
            return
        match = _NATIVE_ID.fullmatch
        for folder in folders:
            try:
                if not folder.is_dir(follow_symlinks=False):
                    continue
                names = sorted(os.listdir(folder.path))
            except OSError:
                continue
            base = folder.path + os.sep
            for name in names:
                if name.endswith(".jsonl") and match(name, 0, len(name) - 6):
                    yield base + name

    def locate(self, native_id: str) -> str | None:
        if _NATIVE_ID.fullmatch(native_id) is None:
            return None
        for path in (self.root() / "projects").glob(f"*/{native_id}.jsonl"):
            return str(path)
        return None

    def native_id(self, path: str, state: ScanState) -> str | None:
        name = os.path.basename(path)
        stem = name[:-6] if name.endswith(".jsonl") else name
        return stem if _NATIVE_ID.fullmatch(stem) else None

    def scan_header(self, fh: BinaryIO, state: ScanState) -> ScanState:
        for record, after in records(fh, state.offset):
            state.offset = after
            if state.cwd is None and isinstance(record.get("cwd"), str):
                state.cwd = record["cwd"]
            if not state.created_at:
                state.created_at = parse_time(record.get("timestamp"))
            kind = record.get("type")
            if isinstance(kind, str) and kind in _TITLE_RANKS:
                for key in _TITLE_KEYS[kind]:
                    if isinstance(record.get(key), str):
                        state.offer_title(record[key], _TITLE_RANKS[kind])
                        break
            elif state.first_prompt is None and kind == "user":
                item = project(record)
                if item is not None and not item.checkpoint:
                    state.first_prompt = clip_title(item.text)
        return state

    def read_items(self, fh: BinaryIO) -> tuple[list[ProjectedItem], int]:
        parents: dict[str, str | None] = {}
        items: dict[str, ProjectedItem] = {}
        message_ids: dict[str, str] = {}
        boundaries: set[str] = set()
        before: dict[str, str | None] = {}  # main-chain line -> the main-chain line written before it
        previous: str | None = None
        leaf: str | None = None
        lines = 0
        for record, _after in records(fh):
            lines += 1
            uuid = record.get("uuid")
            if not isinstance(uuid, str):
                continue
            parent = record.get("parentUuid")
            parents[uuid] = parent if isinstance(parent, str) else None
            kind = record.get("type")
            if record.get("isSidechain") is not True and uuid not in before:
                before[uuid], previous = previous, uuid
            if kind == "system" and record.get("subtype") == "compact_boundary":
                boundaries.add(uuid)
                continue
            if kind not in ("user", "assistant") or record.get("isSidechain") is True:
                continue
            leaf = uuid
            item = project(record)
            if item is not None:
                items[uuid] = item
                message_id = _message(record).get("id")
                if kind == "assistant" and isinstance(message_id, str):
                    message_ids[uuid] = message_id
        chain: list[str] = []
        seen: set[str] = set()
        node = leaf
        while node is not None and node not in seen and node not in boundaries:
            seen.add(node)
            chain.append(node)
            parent = parents.get(node)
            # A parent that is not in the file was on a damaged line: go on from the line written before.
            node = before.get(node) if parent is not None and parent not in parents else parent
        chain.reverse()
        out: list[ProjectedItem] = []
        last_id: str | None = None
        for uuid in chain:
            item = items.get(uuid)
            if item is None:
                continue
            message_id = message_ids.get(uuid)
            # One API message is written as one line per content block: its text blocks form one answer.
            if message_id is not None and message_id == last_id and out and out[-1].role == "assistant":
                out[-1].text += "\n" + item.text
            else:
                out.append(ProjectedItem(item.role, item.text, item.time, item.checkpoint))
            last_id = message_id
        return out, lines
