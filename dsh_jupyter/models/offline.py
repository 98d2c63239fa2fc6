"""The offline model: the keyless default. Deterministic, no network, no waiting.

It does not think. It answers from what it was sent, so that a demo shows the whole machinery working
without any key, and it says so in its first words (``"Offline model (no API key needed) — ..."``).
Its context window is :data:`OFFLINE_CONTEXT_WINDOW` (32,768 tokens).

**Turns** (``purpose="turn"``). The *current turn* is the user messages after the last assistant message.

- It quotes the user's latest request (shortened), i.e. the last user text that is not a reference
  snapshot; in the ``prompt-prefix`` placement, the text after the ``## My request:`` delimiter.
- When the turn holds a ``<referenced-sessions>`` block, it parses the JSON inside (every ``<`` in it is
  written ``\\u003c``, which JSON decoding undoes) and the ``## Reference omissions`` JSON after it, and
  reports each referenced session: label, id, cwd, captured-through seq, message counts by role, whether
  it was compacted (a conversation text holding ``<compacted-summary>``) and whether it was truncated
  (listed under omissions, or a text carrying an ``[… omitted N UTF-8 bytes …]`` notice), with the first
  request and the last answer seen there.
- **Tool calls on request.** A line of the latest request starting with

  - ``/bash <command>`` calls the ``bash`` tool with ``{"command": "<command>"}``;
  - ``/python <code>`` calls ``python`` with ``{"code": "<code>"}``; ``/python`` followed by a fenced
    code block (```` ```python ... ``` ````) sends the block's code (``/bash`` accepts a fence too);
  - ``/tool <name> <json-object>`` calls any tool with those arguments.

  Required string parameters of the tool's schema that the command does not fill (say a ``description``)
  get a short note. A tool that is not in ``request.tools`` is not called; the answer says which tools
  exist. Several command lines give several calls, in order (finish reason ``"tool_calls"``).
- When the last message is a tool result, it reports the first lines of each result of that step and
  finishes (``"stop"``).

**Titles** (``purpose="title"``): the first words (at most six) of the first user text, mentions
``@[label](uri)`` shown as their label. **Compaction** (``purpose="compaction"``): a summary listing
the user requests, the assistant answers, tool use, referenced sessions and any earlier summary of the
messages it was sent (put any instruction to summarise in the system message: user messages are
summarised).

**Scripted mode.** :meth:`OfflineModel.queue` takes responses consumed in order, before the deterministic
behaviour, by requests of the given ``purpose`` (``"turn"`` by default). A response is a ``str`` (text), a
list of blocks (``str``, ``{"type": "text"|"reasoning", "text"}``, ``{"type": "tool-call", "name",
"arguments", "id"?}`` or :class:`ToolCall`), a single :class:`ToolCall` or block dict, an exception (class
or instance) to raise, or a callable taking the :class:`ModelRequest` and returning one of those.

Text streams in chunks of a few words; ``Usage`` counts are estimates (characters / 4, rounded up).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Mapping, Sequence, Union

from .base import (
    Finish,
    ModelError,
    ModelInfo,
    ModelProvider,
    ModelRequest,
    Purpose,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)

OFFLINE_CONTEXT_WINDOW = 32_768
OFFLINE_BANNER = "Offline model (no API key needed)"
SWITCH_NOTE = "For real answers, set DEEPSEEK_API_KEY or pick a model with --model (`%dsh models` lists them)."

_OPEN_TAG = "<referenced-sessions>"
_CLOSE_TAG = "</referenced-sessions>"
_OMISSIONS_HEADING = "## Reference omissions"
_REQUEST_DELIMITER = "## My request:"
_OMITTED_NOTICE = re.compile(r"\[… omitted \d+ UTF-8 bytes …\]")
_MENTION = re.compile(r"@\[([^\]]*)\]\([^)]*\)")
_COMMAND = re.compile(r"^[ \t]*/(bash|python|tool)(?:[ \t]+(.*))?$")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)\n?```", re.S)


@dataclass(frozen=True)
class ToolCall:
    """A scripted tool call: ``arguments`` as a dict (sent as JSON) or a raw JSON string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


ScriptedResponse = Union[str, ToolCall, Mapping[str, Any], Sequence[Any], BaseException, type,
                         Callable[[ModelRequest], Any]]


@dataclass
class ReferencedSession:
    """One referenced session as the offline model read it from a ``<referenced-sessions>`` block."""

    session_id: str
    label: str
    cwd: str | None
    captured_through_seq: int | None
    conversation: list[dict[str, str]]
    compacted: bool
    truncated: bool
    omitted_messages: int = 0
    omitted_bytes: int = 0
    full_snapshot: Mapping[str, Any] | None = None

    @property
    def user_messages(self) -> int:
        return sum(1 for item in self.conversation if item.get("role") == "user")

    @property
    def assistant_messages(self) -> int:
        return sum(1 for item in self.conversation if item.get("role") == "assistant")


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat-completions message (string content, or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    return ""


def parse_referenced_sessions(text: str) -> tuple[list[ReferencedSession], list[str]]:
    """Every referenced session in ``text`` and the problems met while reading the blocks."""
    sessions: list[ReferencedSession] = []
    problems: list[str] = []
    position = 0
    while True:
        start = text.find(_OPEN_TAG, position)
        if start < 0:
            break
        end = text.find(_CLOSE_TAG, start)
        if end < 0:
            problems.append("a <referenced-sessions> block has no closing tag")
            break
        position = end + len(_CLOSE_TAG)
        try:
            entries = json.loads(text[start + len(_OPEN_TAG):end])
        except ValueError as exc:
            problems.append(f"a <referenced-sessions> block does not hold valid JSON ({exc})")
            continue
        if not isinstance(entries, list):
            problems.append("a <referenced-sessions> block does not hold a JSON array")
            continue
        omissions = _read_omissions(text, position)
        for entry in entries:
            if not isinstance(entry, Mapping):
                problems.append("a referenced-session entry is not a JSON object")
                continue
            conversation = [
                {"role": str(item.get("role")), "text": str(item.get("text", ""))}
                for item in entry.get("conversation") or [] if isinstance(item, Mapping)
            ]
            session_id = str(entry.get("sessionId", ""))
            omission = omissions.get(session_id)
            seq = entry.get("capturedThroughSeq")
            sessions.append(ReferencedSession(
                session_id=session_id,
                label=str(entry.get("label", session_id)),
                cwd=entry.get("cwd") if isinstance(entry.get("cwd"), str) else None,
                captured_through_seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
                conversation=conversation,
                compacted=any("<compacted-summary>" in item["text"] for item in conversation),
                truncated=omission is not None or any(_OMITTED_NOTICE.search(item["text"]) for item in conversation),
                omitted_messages=int(omission.get("omittedMessages") or 0) if omission else 0,
                omitted_bytes=int(omission.get("omittedBytes") or 0) if omission else 0,
                full_snapshot=omission.get("fullSnapshot") if omission and isinstance(omission.get("fullSnapshot"), Mapping) else None,
            ))
    return sessions, problems


def _read_omissions(text: str, after: int) -> dict[str, Mapping[str, Any]]:
    """The ``## Reference omissions`` entries right after a block, by session id."""
    rest = text[after:]
    heading = rest.find(_OMISSIONS_HEADING)
    if heading < 0 or rest[:heading].strip() or _OPEN_TAG in rest[:heading]:
        return {}
    bracket = rest.find("[", heading)
    if bracket < 0:
        return {}
    try:
        entries, _ = json.JSONDecoder().raw_decode(rest, bracket)
    except ValueError:
        return {}
    if not isinstance(entries, list):
        return {}
    return {str(e.get("sessionId")): e for e in entries if isinstance(e, Mapping)}


def _direct_text(text: str) -> str:
    """The user's own words in a message: all of it, or what follows a snapshot's request delimiter."""
    if _OPEN_TAG not in text:
        return text
    delimiter = text.rfind(_REQUEST_DELIMITER)
    if delimiter > text.rfind(_CLOSE_TAG):
        return text[delimiter + len(_REQUEST_DELIMITER):].strip("\n")
    return ""


def _shorten(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _quote(text: str, limit: int = 160) -> str:
    return "“" + _shorten(text, limit) + "”"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _estimate_tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def _word_chunks(text: str, words: int = 3) -> list[str]:
    pieces = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    return ["".join(pieces[i:i + words]) for i in range(0, len(pieces), words)]


class OfflineModel(ModelProvider):
    """The deterministic keyless model (see the module docstring)."""

    def __init__(self, *, chunk_words: int = 3) -> None:
        if chunk_words < 1:
            raise ValueError("chunk_words must be at least 1")
        self.info = ModelInfo("offline", "offline", OFFLINE_CONTEXT_WINDOW)
        self.chunk_words = chunk_words
        self._scripts: dict[str, deque[Any]] = {"turn": deque(), "title": deque(), "compaction": deque()}

    def __repr__(self) -> str:
        return f"OfflineModel(context_window={OFFLINE_CONTEXT_WINDOW}, queued={self.pending()})"

    # -- scripted mode ---------------------------------------------------------------------------------

    def queue(self, *responses: ScriptedResponse, purpose: Purpose = "turn") -> None:
        """Queue scripted responses for requests of ``purpose``; they are used in order, then the
        deterministic behaviour resumes."""
        if purpose not in self._scripts:
            raise ValueError(f"purpose must be 'turn', 'title' or 'compaction', got {purpose!r}")
        for response in responses:
            if not callable(response) or isinstance(response, type) and issubclass(response, BaseException):
                self._normalise(response)  # fail now, not in the middle of a later turn
            self._scripts[purpose].append(response)

    def pending(self, purpose: Purpose | None = None) -> int:
        """How many scripted responses are still queued (for ``purpose``, or in all)."""
        if purpose is None:
            return sum(len(q) for q in self._scripts.values())
        return len(self._scripts[purpose])

    def clear(self) -> None:
        """Drop every queued response."""
        for scripts in self._scripts.values():
            scripts.clear()

    def _normalise(self, response: Any) -> list[dict[str, Any]]:
        if isinstance(response, BaseException) or (isinstance(response, type) and issubclass(response, BaseException)):
            return [{"type": "raise", "error": response}]
        if isinstance(response, (str, ToolCall, Mapping)):
            response = [response]
        if not isinstance(response, Sequence):
            raise TypeError(f"a scripted offline response must be a str, a list of blocks, a ToolCall, an "
                            f"exception or a callable, got {type(response).__name__}")
        blocks: list[dict[str, Any]] = []
        for item in response:
            if isinstance(item, str):
                blocks.append({"type": "text", "text": item})
            elif isinstance(item, ToolCall):
                arguments = item.arguments if isinstance(item.arguments, str) else json.dumps(dict(item.arguments))
                blocks.append({"type": "tool-call", "id": item.id, "name": item.name, "arguments": arguments})
            elif isinstance(item, Mapping) and item.get("type") in ("text", "reasoning") and isinstance(item.get("text"), str):
                blocks.append({"type": item["type"], "text": item["text"]})
            elif isinstance(item, Mapping) and item.get("type") == "tool-call" and isinstance(item.get("name"), str):
                arguments = item.get("arguments", "{}")
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments)
                blocks.append({"type": "tool-call", "id": item.get("id"), "name": item["name"], "arguments": arguments})
            else:
                raise TypeError(f"cannot script an offline response block {item!r}: use a str, "
                                "{'type': 'text'|'reasoning', 'text': ...}, {'type': 'tool-call', 'name': ..., "
                                "'arguments': ...} or ToolCall(name, arguments)")
        return blocks

    # -- streaming ------------------------------------------------------------------------------------

    async def stream(self, request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        """Stream the scripted or deterministic answer to ``request``."""
        if cancel is not None and cancel.is_set():
            raise ModelError("cancelled", "the offline model's answer was cancelled before it started")
        scripts = self._scripts[request.purpose]
        if scripts:
            response = scripts.popleft()
            if callable(response) and not (isinstance(response, type) and issubclass(response, BaseException)):
                response = response(request)
            blocks = self._normalise(response)
        else:
            blocks = self.answer(request)
        if blocks and blocks[0]["type"] == "raise":
            error = blocks[0]["error"]
            raise error() if isinstance(error, type) else error
        blocks = self._limit(blocks, request.max_tokens)
        finish = "length" if any(b.get("truncated") for b in blocks) else (
            "tool_calls" if any(b["type"] == "tool-call" for b in blocks) else "stop")
        ids = _call_ids(request)
        output_chars = 0
        call_index = 0
        for block in blocks:
            if block["type"] == "tool-call":
                call_id = block.get("id") or next(ids)
                arguments = block["arguments"]
                half = len(arguments) // 2
                for piece_no, piece in enumerate((arguments[:half], arguments[half:])):
                    await self._pause(cancel)
                    first = piece_no == 0
                    yield ToolCallDelta(call_index, call_id if first else None, block["name"] if first else None, piece)
                output_chars += len(block["name"]) + len(arguments)
                call_index += 1
                continue
            kind = TextDelta if block["type"] == "text" else ReasoningDelta
            for piece in _word_chunks(block["text"], self.chunk_words):
                await self._pause(cancel)
                yield kind(piece)
            output_chars += len(block["text"])
        await self._pause(cancel)
        yield Usage(input_tokens=_estimate_tokens(_request_chars(request)), output_tokens=_estimate_tokens(output_chars))
        yield Finish(finish)

    @staticmethod
    async def _pause(cancel: asyncio.Event | None) -> None:
        await asyncio.sleep(0)  # let the consumer (and a cancel) run between deltas
        if cancel is not None and cancel.is_set():
            raise ModelError("cancelled", "the offline model's answer was cancelled")

    @staticmethod
    def _limit(blocks: list[dict[str, Any]], max_tokens: int | None) -> list[dict[str, Any]]:
        if not max_tokens or any(b["type"] == "tool-call" for b in blocks):
            return blocks
        budget = max_tokens * 4
        limited: list[dict[str, Any]] = []
        for block in blocks:
            if budget <= 0:
                limited[-1]["truncated"] = True
                break
            if len(block["text"]) > budget:
                limited.append({"type": block["type"], "text": block["text"][:budget], "truncated": True})
                break
            limited.append(block)
            budget -= len(block["text"])
        return limited

    # -- deterministic behaviour -----------------------------------------------------------------------

    def answer(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The deterministic blocks for ``request`` (what :meth:`stream` sends when nothing is queued)."""
        if request.purpose == "title":
            return [{"type": "text", "text": offline_title(request.messages)}]
        if request.purpose == "compaction":
            return [{"type": "text", "text": offline_summary(request.messages)}]
        return _turn_blocks(request)


def _call_ids(request: ModelRequest) -> Any:
    digest = hashlib.sha256(json.dumps(list(request.messages), sort_keys=True, default=str).encode()).hexdigest()[:12]
    number = 0
    while True:
        yield f"call_offline_{digest}_{number}"
        number += 1


def _request_chars(request: ModelRequest) -> int:
    tools = [t.to_openai() for t in request.tools]
    return len(json.dumps(list(request.messages), ensure_ascii=False, default=str)) + len(json.dumps(tools))


# -- turns ------------------------------------------------------------------------------------------------


def _turn_blocks(request: ModelRequest) -> list[dict[str, Any]]:
    messages = list(request.messages)
    if messages and messages[-1].get("role") == "tool":
        return [{"type": "text", "text": _tool_result_summary(messages)}]
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    current = [m for m in messages[last_assistant + 1:] if m.get("role") == "user"]
    sessions: list[ReferencedSession] = []
    problems: list[str] = []
    direct: list[str] = []
    for message in current:
        text = message_text(message)
        if _OPEN_TAG in text:
            found, issues = parse_referenced_sessions(text)
            sessions.extend(found)
            problems.extend(issues)
        own = _direct_text(text)
        if own.strip():
            direct.append(own)
    request_text = direct[-1] if direct else ""
    calls, call_notes = _requested_calls(request_text, request.tools)

    lines: list[str] = []
    if calls:
        names = ", ".join(f"`{c['name']}`" for c in calls)
        lines.append(f"{OFFLINE_BANNER} — calling {names} as you asked.")
        lines.extend(call_notes)
        return [{"type": "text", "text": "\n".join(lines)}] + calls
    lines.append(f"{OFFLINE_BANNER} — I don't reason; I report what this request contained.")
    lines.append("")
    if request_text.strip():
        lines.append(f"You asked: {_quote(_MENTION.sub(lambda m: '@' + m.group(1), request_text))}")
    elif last_assistant == len(messages) - 1 and messages:
        lines.append("There is no new user message to answer.")
    else:
        lines.append("Your message had no text of its own.")
    if sessions:
        lines.append("")
        lines.append(f"You referenced {_plural(len(sessions), 'session')}:")
        for session in sessions:
            lines.extend(_describe_session(session))
    for problem in problems:
        lines.append(f"Note: {problem}.")
    lines.extend(call_notes)
    lines.append("")
    if request.tools:
        offered = ", ".join(t.name for t in request.tools)
        lines.append(f"Tools I can call here: {offered}. Put `/bash <command>`, `/python <code>` or "
                     "`/tool <name> <json>` on a line of its own to have me call one.")
    lines.append(SWITCH_NOTE)
    return [{"type": "text", "text": "\n".join(lines)}]


def _describe_session(session: ReferencedSession) -> list[str]:
    where = [f"session {session.session_id}"]
    if session.cwd:
        where.append(f"cwd {session.cwd}")
    if session.captured_through_seq is not None:
        where.append(f"captured through seq {session.captured_through_seq}")
    total = len(session.conversation)
    counts = (f"{_plural(total, 'message')} ({session.user_messages} from the user, "
              f"{session.assistant_messages} from the assistant)")
    state = ["compacted" if session.compacted else "not compacted"]
    if session.truncated:
        omitted = []
        if session.omitted_messages:
            omitted.append(f"{_plural(session.omitted_messages, 'message')} dropped")
        if session.omitted_bytes:
            omitted.append(f"{session.omitted_bytes:,} bytes of text omitted")
        detail = f" ({', '.join(omitted)})" if omitted else ""
        state.append(f"truncated{detail}")
        snapshot = session.full_snapshot or {}
        if snapshot.get("status") == "saved" and snapshot.get("locator"):
            state.append(f"full snapshot saved at {snapshot['locator']}")
        elif snapshot.get("status") == "unavailable":
            state.append(f"full snapshot unavailable ({snapshot.get('reason', 'no reason given')})")
    else:
        state.append("complete")
    lines = [f"- {_quote(session.label, 80)} ({', '.join(where)}): {counts}; {'; '.join(state)}."]
    first_user = next((item["text"] for item in session.conversation if item["role"] == "user"), None)
    last_answer = next((item["text"] for item in reversed(session.conversation) if item["role"] == "assistant"), None)
    if first_user:
        lines.append(f"  First request there: {_quote(first_user, 120)}")
    if last_answer:
        lines.append(f"  Last answer there: {_quote(last_answer, 120)}")
    return lines


def _requested_calls(text: str, tools: Sequence[ToolSpec]) -> tuple[list[dict[str, Any]], list[str]]:
    """Tool-call blocks for the ``/bash``, ``/python`` and ``/tool`` lines of ``text``, and notes."""
    by_name = {tool.name: tool for tool in tools}
    calls: list[dict[str, Any]] = []
    notes: list[str] = []
    lines = text.splitlines()
    offset = 0
    for line in lines:
        line_start = offset
        offset += len(line) + 1
        match = _COMMAND.match(line)
        if match is None:
            continue
        verb, rest = match.group(1), (match.group(2) or "").strip()
        if verb == "tool":
            name, _, raw = rest.partition(" ")
            if not name:
                notes.append("`/tool` needs a tool name and JSON arguments, e.g. `/tool bash {\"command\": \"ls\"}`.")
                continue
            try:
                arguments = json.loads(raw.strip() or "{}")
            except ValueError as exc:
                notes.append(f"The arguments after `/tool {name}` are not valid JSON ({exc.msg}); nothing was called.")
                continue
            if not isinstance(arguments, dict):
                notes.append(f"The arguments after `/tool {name}` must be a JSON object; nothing was called.")
                continue
        else:
            name = verb
            body = rest
            if not body or body.startswith("```"):
                fence = _FENCE.search(text, line_start)
                body = fence.group(2) if fence else ""
            if not body.strip():
                notes.append(f"`/{verb}` needs {'a command' if verb == 'bash' else 'code'} after it; nothing was called.")
                continue
            arguments = {"command": body} if verb == "bash" else {"code": body}
        tool = by_name.get(name)
        if tool is None:
            offered = ", ".join(f"`{n}`" for n in by_name) or "none"
            notes.append(f"The `{name}` tool is not available in this session (tools offered: {offered}); "
                         "nothing was called for it.")
            continue
        _fill_required(arguments, tool, verb)
        calls.append({"type": "tool-call", "id": None, "name": name, "arguments": json.dumps(arguments, ensure_ascii=False)})
    return calls, notes


def _fill_required(arguments: dict[str, Any], tool: ToolSpec, verb: str) -> None:
    schema = tool.parameters if isinstance(tool.parameters, Mapping) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    for name in schema.get("required") or ():
        if name in arguments:
            continue
        spec = properties.get(name) if isinstance(properties, Mapping) else None
        if isinstance(spec, Mapping) and spec.get("type") == "string":
            arguments[name] = f"requested with /{verb} in the prompt"


def _tool_result_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    start = len(messages)
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    names: dict[str, str] = {}
    if start > 0 and messages[start - 1].get("role") == "assistant":
        for call in messages[start - 1].get("tool_calls") or []:
            if isinstance(call, Mapping):
                function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
                names[str(call.get("id"))] = str(function.get("name", "tool"))
    results = messages[start:]
    lines = [f"{OFFLINE_BANNER} — here is what the {'tool' if len(results) == 1 else 'tools'} returned."]
    for message in results:
        call_id = str(message.get("tool_call_id", ""))
        text = message_text(message)
        all_lines = text.splitlines()
        shown = all_lines[:10]
        body = "\n".join(line if len(line) <= 200 else line[:199] + "…" for line in shown)
        lines.append("")
        lines.append(f"`{names.get(call_id, 'tool')}` ({call_id or 'no call id'}):")
        lines.append("```")
        lines.append(body if body.strip() else "(no output)")
        lines.append("```")
        if len(all_lines) > len(shown):
            lines.append(f"({len(all_lines) - len(shown)} more lines not shown)")
    lines.append("")
    lines.append("That's the result; I can't interpret it further. " + SWITCH_NOTE)
    return "\n".join(lines)


# -- titles and summaries -----------------------------------------------------------------------------------


def offline_title(messages: Sequence[Mapping[str, Any]], max_words: int = 6) -> str:
    """A short title from the first user text: its first ``max_words`` words."""
    for message in messages:
        if message.get("role") != "user":
            continue
        text = _direct_text(message_text(message))
        text = _MENTION.sub(lambda m: m.group(1), text)
        text = re.sub(r"^[ \t]*/(bash|python|tool)\b", "", text, flags=re.M)
        text = _FENCE.sub(" ", text)
        words = re.findall(r"[^\s`*_#>\"“”()\[\]{}]+", text)
        words = [w for w in words if re.search(r"\w", w)]
        if not words:
            continue
        title = " ".join(words[:max_words]).rstrip(".,;:!?—-")
        return title[:1].upper() + title[1:]
    return "Offline session"


def offline_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    """A deterministic summary of ``messages``: requests, answers, tools, references, earlier summaries."""
    requests: list[str] = []
    answers: list[str] = []
    tool_counts: dict[str, int] = {}
    references: list[str] = []
    earlier: list[str] = []
    for message in messages:
        role = message.get("role")
        text = message_text(message)
        if role == "user":
            if "<compacted-summary>" in text:
                summary = text.split("<compacted-summary>", 1)[1].replace("</compacted-summary>", "")
                earlier.append(_shorten(summary, 600))
                continue
            if _OPEN_TAG in text:
                found, _ = parse_referenced_sessions(text)
                references.extend(f"{_quote(s.label, 80)} ({s.session_id})" for s in found)
            own = _direct_text(text)
            if own.strip():
                requests.append(_shorten(_MENTION.sub(lambda m: "@" + m.group(1), own)))
        elif role == "assistant":
            if text.strip():
                answers.append(_shorten(text))
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping):
                    name = str(function.get("name", "tool"))
                    tool_counts[name] = tool_counts.get(name, 0) + 1
    lines = [f"{OFFLINE_BANNER} — a mechanical summary of the earlier conversation (no language model wrote it)."]
    if earlier:
        lines += ["", "## Earlier summary"] + [f"- {item}" for item in earlier]
    lines += ["", "## User requests"]
    lines += _numbered(requests, "(none)")
    lines += ["", "## Assistant answers"]
    lines += _numbered(answers, "(none)", keep_last=True)
    if tool_counts:
        lines += ["", "## Tools used"] + [f"- {name}: {_plural(n, 'call')}" for name, n in sorted(tool_counts.items())]
    if references:
        lines += ["", "## Referenced sessions"] + [f"- {item}" for item in dict.fromkeys(references)]
    return "\n".join(lines)


def _numbered(items: list[str], empty: str, limit: int = 20, keep_last: bool = False) -> list[str]:
    if not items:
        return [empty]
    if len(items) <= limit:
        return [f"{n}. {item}" for n, item in enumerate(items, 1)]
    skipped = len(items) - limit
    if keep_last:
        kept = list(enumerate(items, 1))[skipped:]
        return [f"({skipped} earlier ones not listed)"] + [f"{n}. {item}" for n, item in kept]
    kept = list(enumerate(items, 1))[:limit]
    return [f"{n}. {item}" for n, item in kept] + [f"({skipped} more not listed)"]
