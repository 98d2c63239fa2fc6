"""What a session shows a person, item by item: one model for exports and ``dsh-jupyter sessions show``.

Items: :class:`Prompt`, :class:`Answer`, :class:`Checkpoint` and :class:`Note` (texts, each cut by one rule,
:meth:`Prose.of`), :class:`References` (what a prompt referenced) and :class:`ToolRun` (a tool call with its
result). :func:`transcript_items` folds a log's events into items one event at a time (exports: every
message of the log); :func:`projected_item` turns one projected message (the surface a reference carries,
:mod:`dsh_jupyter.session.projection`) into its item (``sessions show``). :class:`Tally` counts what a
stream yielded and what it cut.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Self

from .clip import capped, left_out
from .images import content_text
from .session import Event, SessionHeader, SessionLog
from .session.events import ASSISTANT_MESSAGE, SESSION_TITLE, TOOL_CALL, TOOL_RESULT, TURN_END, USER_MESSAGE
from .session.messages import (
    SESSION_REFERENCE_KIND,
    blocks_text,
    display_content,
    is_checkpoint_source,
    is_direct_user_source,
)

if TYPE_CHECKING:
    from .session.projection import ProjectedMessage

#: Tool output kept per call (characters); the rest is counted, not shown.
MAX_OUTPUT = 20_000
#: Text kept of one prompt, answer, checkpoint or harness note (characters); the rest is counted, not shown.
MAX_TEXT = 200_000
#: Items held back while a tool call waits for its result; past this many the oldest are written as they are.
MAX_PENDING = 1_000
#: Tools whose calls become runnable notebook cells, with the argument holding their source.
RUNNABLE = {"python": "code", "bash": "command"}



@dataclass(frozen=True)
class Prose:
    """A message's text as shown: ``kept`` is its first characters, ``cut`` how many more it had."""

    kept: str
    cut: int = 0

    @classmethod
    def of(cls, text: str, limit: int = MAX_TEXT) -> Self:
        """``text`` cut to ``limit`` characters (the one rule for prompts and answers, in exports and in
        ``sessions show``)."""
        return cls(text) if len(text) <= limit else cls(text[:limit], len(text) - limit)

    @property
    def text(self) -> str:
        """The text, and when it was cut a line saying how much was left out."""
        return self.kept + left_out(self.cut, "characters of this message") if self.cut else self.kept


class Prompt(Prose):
    """What the user typed."""


class Answer(Prose):
    """The assistant's text."""


class Checkpoint(Prose):
    """A compaction checkpoint: the summary that replaced the conversation before it."""


class Note(Prose):
    """A message injected by the harness or a hook (not typed by the user)."""


@dataclass(frozen=True)
class References:
    """What a prompt referenced: sessions as ``(label, session id, captured through seq)``, and notebook
    variables as ``(label, brief)`` (``df``, ``DataFrame 1,000×4``)."""

    sessions: tuple[tuple[str, str, int | None], ...]
    variables: tuple[tuple[str, str], ...] = ()


@dataclass
class ToolRun:
    call_id: str
    name: str
    arguments: str
    output: str | None = None
    is_error: bool = False

    @property
    def source(self) -> str | None:
        """The code or command of a ``python`` or ``bash`` call (``None`` for other tools or odd arguments)."""
        key = RUNNABLE.get(self.name)
        if key is None:
            return None
        try:
            parsed = json.loads(self.arguments or "{}")
        except ValueError:
            return None
        value = parsed.get(key) if isinstance(parsed, dict) else None
        return value if isinstance(value, str) else None

    @property
    def output_cut(self) -> bool:
        return self.output is not None and len(self.output) > MAX_OUTPUT

    def shown_output(self) -> str:
        if self.output is None:
            return "(no result was recorded)"
        return capped(self.output, MAX_OUTPUT)


Item = Prompt | Answer | Checkpoint | Note | References | ToolRun


@dataclass
class Tally:
    """What an export counted while it streamed: prompts, answers, tool calls, the texts it cut, and the
    latest title it met."""

    prompts: int = 0
    answers: int = 0
    tools: int = 0
    cut_texts: int = 0
    cut_outputs: int = 0
    title: str | None = None

    def add(self, item: Item) -> None:
        if isinstance(item, Prompt):
            self.prompts += 1
        elif isinstance(item, Answer):
            self.answers += 1
        elif isinstance(item, ToolRun):
            self.tools += 1
            self.cut_outputs += item.output_cut
        if isinstance(item, Prose) and item.cut:
            self.cut_texts += 1

    def summary(self) -> str:
        """``3 prompts, 3 answers, 5 tool calls``, then what was cut, if anything."""
        text = f"{self.prompts:,} prompts, {self.answers:,} answers, {self.tools:,} tool calls"
        cuts = []
        if self.cut_texts:
            cuts.append(f"{self.cut_texts:,} {'message' if self.cut_texts == 1 else 'messages'} cut to "
                        f"{MAX_TEXT:,} characters")
        if self.cut_outputs:
            cuts.append(f"{self.cut_outputs:,} tool {'output' if self.cut_outputs == 1 else 'outputs'} cut to "
                        f"{MAX_OUTPUT:,} characters")
        if cuts:
            text += f" ({'; '.join(cuts)}: the session log keeps them whole)"
        return text


@dataclass
class Transcript:
    """What an export shows of one session: its facts, and (for :func:`transcript`) its items in memory."""

    session_id: str
    title: str | None
    created_at: int
    cwd: str | None
    items: list[Item] = field(default_factory=list)

    @classmethod
    def of(cls, header: SessionHeader, title: str | None) -> Transcript:
        return cls(header.id, title, int(header.created_at), header.cwd)

    @property
    def heading(self) -> str:
        return self.title or f"Session {self.session_id}"

    @property
    def created(self) -> str:
        return datetime.fromtimestamp(self.created_at / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")

    def counts(self) -> tuple[int, int, int]:
        """Prompts, answers and tool calls."""
        tally = self.tally()
        return tally.prompts, tally.answers, tally.tools

    def tally(self) -> Tally:
        tally = Tally(title=self.title)
        for item in self.items:
            tally.add(item)
        return tally


def _message(event: Event) -> Mapping[str, Any]:
    data = event.data if isinstance(event.data, Mapping) else {}
    message = data.get("message", data) if event.type != USER_MESSAGE else data
    return message if isinstance(message, Mapping) else {}


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return list(content) if isinstance(content, list) else []


def _references(source: Mapping[str, Any]) -> References:
    found: list[tuple[str, str, int | None]] = []
    for entry in source.get("references") or ():
        if not isinstance(entry, Mapping):
            continue
        session_id = str(entry.get("sessionId", "?"))
        label = entry.get("label")
        through = entry.get("capturedThroughSeq")
        found.append((label if isinstance(label, str) else session_id, session_id,
                      through if isinstance(through, int) and not isinstance(through, bool) else None))
    variables: list[tuple[str, str]] = []
    for entry in source.get("variables") or ():
        if isinstance(entry, Mapping):
            name = entry.get("label") or entry.get("variable")
            brief = entry.get("brief") or entry.get("type")
            variables.append((str(name or "?"), str(brief or "")))
    return References(tuple(found), tuple(variables))


def transcript_items(events: Iterable[Event], tally: Tally | None = None) -> Iterator[Item]:
    """The prompts, answers, tool calls, checkpoints and reference notes of ``events``, in log order, one at
    a time: an item is yielded as soon as it is complete (a tool call once its result is read, or its turn
    ends), so only the items after a call still waiting for its result are held (at most
    :data:`MAX_PENDING`). ``tally`` counts what was yielded and records the latest title met."""
    tally = tally if tally is not None else Tally()
    pending: deque[Item] = deque()
    waiting: dict[str, ToolRun] = {}  # calls whose result has not been read yet, by call id

    def ready(force: bool) -> Iterator[Item]:
        while pending and (force or len(pending) > MAX_PENDING or not isinstance(pending[0], ToolRun)
                           or pending[0].call_id not in waiting):
            item = pending.popleft()
            if isinstance(item, ToolRun):
                waiting.pop(item.call_id, None)
            tally.add(item)
            yield item

    for event in events:
        if event.type == SESSION_TITLE:
            title = event.data.get("title") if isinstance(event.data, Mapping) else None
            tally.title = title if isinstance(title, str) and title.strip() else tally.title
        elif event.type == USER_MESSAGE:
            _user(_message(event), pending)
        elif event.type == ASSISTANT_MESSAGE:
            text = blocks_text(_blocks(_message(event)))
            if text.strip():
                pending.append(Answer.of(text))
        elif event.type == TOOL_CALL and isinstance(event.data, Mapping):
            call_id = str(event.data.get("callId", ""))
            arguments = event.data.get("arguments")
            run = ToolRun(call_id, str(event.data.get("name", "tool")),
                          arguments if isinstance(arguments, str) else json.dumps(arguments))
            waiting[call_id] = run
            pending.append(run)
        elif event.type == TOOL_RESULT:
            for block in _blocks(_message(event)):
                if isinstance(block, Mapping) and block.get("type") == "tool-result":
                    done = waiting.pop(str(block.get("toolCallId", "")), None)
                    if done is not None:
                        inner = block.get("content")
                        done.output = content_text(inner if isinstance(inner, list) else [])  # images noted
                        done.is_error = block.get("isError") is True
        yield from ready(event.type == TURN_END)  # no result comes after its turn ended
    yield from ready(True)


def transcript(log: SessionLog) -> Transcript:
    """Every item of ``log`` in memory (for small logs and tests; exports stream :func:`transcript_items`)."""
    tally = Tally()
    items = list(transcript_items(log.events, tally))
    result = Transcript.of(log.header, tally.title)
    result.items = items
    return result


def _user(message: Mapping[str, Any], items: deque[Item]) -> None:
    source = message.get("source")
    if isinstance(source, Mapping) and source.get("kind") == SESSION_REFERENCE_KIND:
        items.append(_references(source))
        envelope = message.get("envelope")
        if isinstance(envelope, Mapping) and isinstance(envelope.get("displayContent"), list):
            items.append(Prompt.of(blocks_text(display_content(message))))  # the prompt the snapshots were baked in
        return
    text = blocks_text(display_content(message))
    if not text.strip():
        return
    if is_checkpoint_source(source):
        items.append(Checkpoint.of(text))
    elif is_direct_user_source(source):
        items.append(Prompt.of(text))
    else:
        items.append(Note.of(text))


def projected_item(message: ProjectedMessage, limit: int = MAX_TEXT) -> Prompt | Answer | Checkpoint:
    """One projected message (prompt, answer or compaction checkpoint) as its item, cut to ``limit``."""
    if message.checkpoint:
        return Checkpoint.of(message.text, limit)
    return Prompt.of(message.text, limit) if message.role == "user" else Answer.of(message.text, limit)


def role_of(item: Prose) -> str:
    """``user`` (prompts, checkpoints, harness notes) or ``assistant``: the role a message had."""
    return "assistant" if isinstance(item, Answer) else "user"
