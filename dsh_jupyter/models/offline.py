"""The offline model: the keyless default. Deterministic, no network, no waiting.

It does not think. It answers from what it was sent, so that a demo shows the whole machinery working
without any key, and it says so in its first words (``"Offline model (no API key needed) — ..."``).
Its context window is :data:`OFFLINE_CONTEXT_WINDOW` (32,768 tokens).

It reads the same provider-neutral request every provider gets (session messages, see
:mod:`.base`). **Turns** (``purpose="turn"``). The *current turn* is the user messages after the last
assistant message that said or called something.

- It quotes the user's latest request (shortened): the last user text outside any reference snapshot; in
  the ``prompt-prefix`` placement, the message's ``envelope.displayContent`` (the prompt as typed).
- When the turn holds a ``<referenced-sessions>`` block, it reads it back with
  :func:`dsh_jupyter.references.framing.parse_prompt` and reports each referenced session: label, id, cwd,
  captured-through seq, message counts by role, whether it was compacted and truncated (from the context
  message's ``source`` metadata and the omissions section), with the first request and the last answer
  seen there.
- **Tool calls on request.** A line of the latest request starting with

  - ``/bash <command>`` calls the ``bash`` tool with ``{"command": "<command>"}``;
  - ``/python <code>`` calls ``python`` with ``{"code": "<code>"}``; ``/python`` followed by a fenced
    code block (```` ```python ... ``` ````) sends the block's code (``/bash`` accepts a fence too);
  - ``/tool <name> <json-object>`` calls any tool with those arguments.

  Required string parameters of the tool's schema that the command does not fill (say a ``description``)
  get a short note. A tool that is not in ``request.tools`` is not called; the answer says which tools
  exist. Several command lines give several calls, in order (finish reason ``"tool_calls"``).
- When the last message is a tool result, it reports the first lines of each result of that step and
  finishes (``"stop"``). It takes images (``info.accepts_images``): for each image of a result it says
  that it received one, with its type, size in pixels and bytes.

**Titles** (``purpose="title"``): the first sentence of the first user text (cut at a word boundary when
long), its command lines left out and mentions ``@[label](uri)`` shown as their label.
**Compaction** (``purpose="compaction"``): a summary listing
the user requests, the assistant answers, tool use, referenced sessions and any earlier checkpoint
(recognised by its source) of the messages it was sent (instructions to summarise belong in
``request.system``: user messages are summarised).

**Scripted mode.** :meth:`OfflineModel.queue` takes responses consumed in order, before the deterministic
behaviour, by requests of the given ``purpose`` (``"turn"`` by default). A response is a ``str`` (text), a
list of blocks (``str``, ``{"type": "text"|"reasoning", "text"}``, ``{"type": "tool-call", "name",
"arguments", "id"?}`` or :class:`ToolCall`), a single :class:`ToolCall` or block dict, an exception (class
or instance) to raise, or a callable taking the :class:`ModelRequest` and returning one of those.

Text streams in chunks of a few words; ``Usage`` counts are estimates (characters / 4, rounded up).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import math
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clip import keep_end, one_line
from ..images import image_summary, is_image_block
from ..references.framing import parse_prompt
from ..session.messages import SESSION_REFERENCE_KIND, blocks_text, display_content, is_checkpoint_source
from ..session.titles import request_title
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
    blocks_of_type,
    content_blocks,
    is_prompt,
)

if TYPE_CHECKING:
    from ..references.framing import FramedOmission, FramedSource

OFFLINE_CONTEXT_WINDOW = 32_768
OFFLINE_BANNER = "Offline model (no API key needed)"
#: How the offline answer starts its list of the tools it can call (said on a conversation's first answer).
TOOLS_INTRO = "Tools I can call here:"
SWITCH_NOTE = "For real answers, set DEEPSEEK_API_KEY or pick a model with --model (`%dsh models` lists them)."

#: How a ``%dsh fix`` prompt (dsh_jupyter.workspace.fix) starts, and the labels of the two lines the offline
#: answer quotes from it: the exception and the failing line.
FIX_REQUEST_MARKER = "[dsh fix]"
FIX_EXCEPTION_LABEL = "Exception: "
FIX_LINE_LABEL = "Failing line: "

_MENTION = re.compile(r"@\[([^\]]*)\]\([^)]*\)")
_COMMAND = re.compile(r"^[ \t]*/(bash|python|tool)(?:[ \t]+(.*))?$")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)\n?```", re.S)


@dataclass(frozen=True)
class ToolCall:
    """A scripted tool call: ``arguments`` as a dict (sent as JSON) or a raw JSON string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


ScriptedResponse = (str | ToolCall | Mapping[str, Any] | Sequence[Any] | BaseException | type
                    | Callable[[ModelRequest], Any])


@dataclass(frozen=True)
class ReferencedSession:
    """One referenced session as the offline model read it: the framed source, its omission entry and
    the statistics the context message's source carries (``None`` when the request did not say)."""

    source: FramedSource
    omission: FramedOmission | None = None
    stats: Mapping[str, Any] | None = None

    @property
    def compacted(self) -> bool | None:
        value = (self.stats or {}).get("compacted")
        return value if isinstance(value, bool) else None

    @property
    def truncated(self) -> bool:
        return self.omission is not None or (self.stats or {}).get("truncated") is True

    @property
    def omitted_messages(self) -> int:
        return self.omission.omitted_messages if self.omission else self._stat("omittedMessages")

    @property
    def omitted_bytes(self) -> int:
        return self.omission.omitted_bytes if self.omission else self._stat("omittedBytes")

    def _stat(self, name: str) -> int:
        value = (self.stats or {}).get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class ReadMessage:
    """A user message as the offline model reads it: the user's own words and what it references."""

    direct: str
    sessions: list[ReferencedSession]
    problems: list[str]


def _tool_results(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return blocks_of_type(message, "tool-result") if message.get("role") == "user" else []


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return blocks_of_type(message, "tool-call") if message.get("role") == "assistant" else []


def _text(message: Mapping[str, Any], joiner: str = "\n") -> str:
    return blocks_text(content_blocks(message.get("content")), joiner)


def _answered(message: Mapping[str, Any]) -> bool:
    """An assistant message that said or called something."""
    return message.get("role") == "assistant" and bool(_text(message) or _tool_calls(message))


def _reference_stats(message: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Per session id, the statistics of the reference sources the message carries or baked in."""
    sources: list[Any] = [message.get("source")]
    envelope = message.get("envelope")
    if isinstance(envelope, Mapping) and isinstance(envelope.get("prefixContexts"), list):
        sources += [c.get("source") for c in envelope["prefixContexts"] if isinstance(c, Mapping)]
    stats: dict[str, Mapping[str, Any]] = {}
    for source in sources:
        if isinstance(source, Mapping) and source.get("kind") == SESSION_REFERENCE_KIND:
            for entry in source.get("references") or ():
                if isinstance(entry, Mapping) and isinstance(entry.get("sessionId"), str):
                    stats.setdefault(entry["sessionId"], entry)
    return stats


def read_user_message(message: Mapping[str, Any]) -> ReadMessage:
    """The user's own words in ``message`` and the referenced sessions framed in it."""
    parsed = parse_prompt(_text(message))
    envelope = message.get("envelope")
    if isinstance(envelope, Mapping) and isinstance(envelope.get("displayContent"), list):
        direct = blocks_text(display_content(message))
    else:
        direct = parsed.remainder
    stats = _reference_stats(message)
    sessions = [ReferencedSession(source, parsed.omission(source.session_id), stats.get(source.session_id))
                for source in parsed.sources]
    return ReadMessage(direct, sessions, parsed.problems)


def _shorten(text: str, limit: int = 160) -> str:
    return one_line(text, limit)


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
        self.info = ModelInfo("offline", "offline", OFFLINE_CONTEXT_WINDOW, accepts_images=True)
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
            if not callable(response) or (isinstance(response, type) and issubclass(response, BaseException)):
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
            elif (isinstance(item, Mapping) and item.get("type") in ("text", "reasoning")
                  and isinstance(item.get("text"), str)):
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
        yield Usage(input_tokens=_estimate_tokens(_request_chars(request)),
                    output_tokens=_estimate_tokens(output_chars))
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


def _call_ids(request: ModelRequest) -> Iterator[str]:
    digest = hashlib.sha256(json.dumps(list(request.messages), sort_keys=True, default=str).encode()).hexdigest()[:12]
    number = 0
    while True:
        yield f"call_offline_{digest}_{number}"
        number += 1


def _request_chars(request: ModelRequest) -> int:
    """The size the usage estimate counts: system prompt, messages and tool specs as JSON."""
    tools = [{"name": t.name, "description": t.description, "parameters": dict(t.parameters)} for t in request.tools]
    messages = json.dumps(list(request.messages), ensure_ascii=False, default=str)
    return len(request.system or "") + len(messages) + len(json.dumps(tools, ensure_ascii=False))


# -- turns ------------------------------------------------------------------------------------------------


def _turn_blocks(request: ModelRequest) -> list[dict[str, Any]]:
    messages = list(request.messages)
    if messages and _tool_results(messages[-1]):
        return [{"type": "text", "text": _tool_result_summary(messages)}]
    last_assistant = max((i for i, m in enumerate(messages) if _answered(m)), default=-1)
    sessions: list[ReferencedSession] = []
    problems: list[str] = []
    direct: list[str] = []
    for message in messages[last_assistant + 1:]:
        if not is_prompt(message):
            continue
        read = read_user_message(message)
        sessions.extend(read.sessions)
        problems.extend(read.problems)
        if read.direct.strip():
            direct.append(read.direct)
    request_text = direct[-1] if direct else ""
    if request_text.startswith(FIX_REQUEST_MARKER):  # its cell source may hold lines that look like commands
        return [{"type": "text", "text": _fix_answer(request_text)}]
    calls, call_notes = _requested_calls(request_text, request.tools)

    lines: list[str] = []
    if calls:
        names = ", ".join(f"`{c['name']}`" for c in calls)
        lines.append(f"{OFFLINE_BANNER} — calling {names} as you asked.")
        lines.extend(call_notes)
        return [{"type": "text", "text": "\n".join(lines)}, *calls]
    lines.append(f"{OFFLINE_BANNER} — I don't reason; I report what this request contained.")
    lines.append("")
    if request_text.strip():
        lines.append(f"You asked: {_quote(_MENTION.sub(lambda m: '@' + m.group(1), request_text))}")
    elif messages and last_assistant == len(messages) - 1:
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
    if request.tools and not _said_before(messages, TOOLS_INTRO):
        offered = ", ".join(t.name for t in request.tools)
        lines.append(f"{TOOLS_INTRO} {offered}. Put `/bash <command>`, `/python <code>` or "
                     "`/tool <name> <json>` on a line of its own to have me call one.")
    if not _said_before(messages, SWITCH_NOTE):
        lines.append(SWITCH_NOTE)
    return [{"type": "text", "text": "\n".join(lines).rstrip("\n")}]


def _said_before(messages: Sequence[Mapping[str, Any]], text: str) -> bool:
    """Whether an earlier answer of this conversation already said ``text`` (the boilerplate is said once)."""
    return any(message.get("role") == "assistant" and text in _text(message) for message in messages)


def _fix_answer(text: str) -> str:
    """The deterministic answer to a ``%dsh fix`` prompt: the exception and the failing line it names."""
    def labelled(label: str) -> str | None:
        return next((line[len(label):].strip() for line in text.splitlines() if line.startswith(label)), None)

    exception = labelled(FIX_EXCEPTION_LABEL) or "an error (the prompt does not name it)"
    line = labelled(FIX_LINE_LABEL)
    where = f" at line {line}" if line else ""
    return "\n".join([
        f"{OFFLINE_BANNER} — I don't reason, so I cannot correct the cell; this is what failed.",
        "",
        f"The cell raised {exception}{where}.",
        "A real model answers a `%dsh fix` with the corrected cell in one code block.",
        "",
        SWITCH_NOTE,
    ])


def _describe_session(session: ReferencedSession) -> list[str]:
    source = session.source
    where = [f"session {source.session_id}"]
    if source.cwd:
        where.append(f"cwd {source.cwd}")
    if source.captured_through_seq is not None:
        where.append(f"captured through seq {source.captured_through_seq}")
    counts = (f"{_plural(len(source.conversation), 'message')} ({source.count('user')} from the user, "
              f"{source.count('assistant')} from the assistant)")
    state = [] if session.compacted is None else ["compacted" if session.compacted else "not compacted"]
    if session.truncated:
        omitted = []
        if session.omitted_messages:
            omitted.append(f"{_plural(session.omitted_messages, 'message')} dropped")
        if session.omitted_bytes:
            omitted.append(f"{session.omitted_bytes:,} bytes of text omitted")
        detail = f" ({', '.join(omitted)})" if omitted else ""
        state.append(f"truncated{detail}")
        snapshot = (session.omission.full_snapshot if session.omission else None) or {}
        if snapshot.get("status") == "saved" and snapshot.get("locator"):
            state.append(f"full snapshot saved at {snapshot['locator']}")
        elif snapshot.get("status") == "unavailable":
            state.append(f"full snapshot unavailable ({snapshot.get('reason', 'no reason given')})")
    else:
        state.append("complete")
    lines = [f"- {_quote(source.label, 80)} ({', '.join(where)}): {counts}; {'; '.join(state)}."]
    first_user = next((item.text for item in source.conversation if item.role == "user"), None)
    last_answer = next((item.text for item in reversed(source.conversation) if item.role == "assistant"), None)
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
            except json.JSONDecodeError as exc:
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
                what = "a command" if verb == "bash" else "code"
                notes.append(f"`/{verb}` needs {what} after it; nothing was called.")
                continue
            arguments = {"command": body} if verb == "bash" else {"code": body}
        tool = by_name.get(name)
        if tool is None:
            offered = ", ".join(f"`{n}`" for n in by_name) or "none"
            notes.append(f"The `{name}` tool is not available in this session (tools offered: {offered}); "
                         "nothing was called for it.")
            continue
        _fill_required(arguments, tool, verb)
        calls.append({"type": "tool-call", "id": None, "name": name,
                      "arguments": json.dumps(arguments, ensure_ascii=False)})
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


#: How much of each line of a tool result the offline answer quotes (a longer line loses its middle).
RESULT_LINE_CHARS = 400


def _tool_result_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    start = len(messages)
    while start > 0 and _tool_results(messages[start - 1]):
        start -= 1
    names: dict[str, str] = {}
    if start > 0:
        names = {str(call.get("id")): str(call.get("name") or "tool") for call in _tool_calls(messages[start - 1])}
    results = [block for message in messages[start:] for block in _tool_results(message)]
    lines = [f"{OFFLINE_BANNER} — here is what the {'tool' if len(results) == 1 else 'tools'} returned."]
    for result in results:
        call_id = str(result.get("toolCallId") or "")
        all_lines = blocks_text(content_blocks(result.get("content"))).splitlines()
        shown = all_lines[:10]
        body = "\n".join(keep_end(line, RESULT_LINE_CHARS) for line in shown)
        lines.append("")
        lines.append(f"`{names.get(call_id, 'tool')}` ({call_id or 'no call id'}):")
        lines.append("```")
        lines.append(body if body.strip() else "(no output)")
        lines.append("```")
        if len(all_lines) > len(shown):
            lines.append(f"({len(all_lines) - len(shown)} more lines not shown)")
        lines.extend(_received_images(result))
    lines.append("")
    switch = "" if _said_before(messages, SWITCH_NOTE) else " " + SWITCH_NOTE
    lines.append("That's the result; I can't interpret it further." + switch)
    return "\n".join(lines)


def _received_images(result: Mapping[str, Any]) -> list[str]:
    """One line per image block of a tool result that arrived with its data: type, size, bytes received."""
    lines: list[str] = []
    for block in content_blocks(result.get("content")):
        if not is_image_block(block) or not isinstance(block.get("data"), str):
            continue
        try:
            received = len(base64.b64decode(block["data"], validate=True))
        except (binascii.Error, ValueError):
            received = 0
        lines.append(f"I received an image: {image_summary(block)} ({received:,} bytes arrived). "
                     "I can't look at it; a model that takes images would.")
    return lines


# -- titles and summaries -----------------------------------------------------------------------------------


def offline_title(messages: Sequence[Mapping[str, Any]]) -> str:
    """The title of the first user text, by the rule automatic titles share (:func:`.request_title`)."""
    for message in messages:
        if not is_prompt(message):
            continue
        title = request_title(read_user_message(message).direct)
        if title:
            return title
    return "Offline session"


def offline_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    """A deterministic summary of ``messages``: requests, answers, tools, references, earlier summaries."""
    requests: list[str] = []
    answers: list[str] = []
    tool_counts: dict[str, int] = {}
    references: list[str] = []
    earlier: list[str] = []
    for message in messages:
        if is_checkpoint_source(message.get("source")):
            earlier.append(_shorten(_text(message, " "), 600))
        elif is_prompt(message):
            read = read_user_message(message)
            references.extend(f"{_quote(s.source.label, 80)} ({s.source.session_id})" for s in read.sessions)
            if read.direct.strip():
                requests.append(_shorten(_MENTION.sub(lambda m: "@" + m.group(1), read.direct)))
        elif message.get("role") == "assistant":
            text = _text(message)
            if text.strip():
                answers.append(_shorten(text))
            for call in _tool_calls(message):
                name = str(call.get("name") or "tool")
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
