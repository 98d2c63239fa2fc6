"""The JSON bodies of the REST API (``dsh/api/…``), as :class:`~typing.TypedDict` shapes.

Field names are the wire's (camelCase). A candidate row is the labextension's ``ISessionCandidate``
(``labextension/src/api.ts``) plus what a listing adds; ``tests/test_server_wire.py`` checks that the two
keep the same fields. ``docs/rest-api.md`` describes every field for people.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from ..references.candidates import RemoteCandidateJson


class MessageCounts(TypedDict):
    """The user and assistant messages the catalog counted in a listed session."""

    user: int
    assistant: int


class BodySearch(TypedDict):
    """How much of a session body search covers when its text outgrew the catalog's body cap."""

    messages: int
    moreMessages: int


class SessionRow(RemoteCandidateJson):
    """One session of ``dsh/api/candidates`` (a candidate, with ``tool`` or ``store`` when it is not in the
    folder's JSONL store) or of ``dsh/api/sessions`` (also with what the catalog knows of it)."""

    tool: NotRequired[str]
    store: NotRequired[str]
    damaged: NotRequired[bool]
    messageCounts: NotRequired[MessageCounts]
    bodyIndexTruncated: NotRequired[bool]
    bodySearch: NotRequired[BodySearch]


class UnreadableEntry(TypedDict):
    """An entry of the folder's store that cannot be read as a session."""

    entry: str
    sessionId: str | None
    problem: str


class SessionListing(TypedDict):
    """``GET dsh/api/sessions``."""

    sessions: list[SessionRow]
    unreadable: list[UnreadableEntry]
    unreadableCount: int
    indexing: int
    complete: bool
    notes: list[str]


class DamageJson(TypedDict):
    """Something of a log that could not be read (``line`` 1 is the header; ``None``: not known)."""

    line: int | None
    kind: str
    message: str


class PreviewMessage(TypedDict):
    """One projected message of a session's preview, cut to the preview's byte limit."""

    role: str
    text: str
    checkpoint: bool
    truncated: bool
    omittedBytes: int


class DetailCounts(TypedDict):
    """The counts of one session; ``None`` where they are not known (only the log's end was read)."""

    events: int
    surface: int | None
    projected: int | None
    user: int | None
    assistant: int | None


class Preview(TypedDict):
    """The newest messages of one session and what is left out before them."""

    messages: list[PreviewMessage]
    omittedMessages: int
    omittedMessagesExact: bool
    more: str
    read: Literal["end", "whole"]
    unreadBytes: int
    maxMessages: int
    maxMessageBytes: int


class SessionDetail(TypedDict):
    """``GET dsh/api/sessions/<payload>``: ``tool`` for another tool's transcript, ``store`` and ``owner`` for
    a session of the PostgreSQL store."""

    sessionId: str
    label: str
    title: str | None
    cwd: str | None
    createdAt: int | None
    formatVersion: int
    capturedThroughSeq: int | None
    compacted: bool
    messageCounts: DetailCounts
    preview: Preview
    damage: list[DamageJson]
    uri: str
    mention: str
    tool: NotRequired[str]
    store: NotRequired[str]
    owner: NotRequired[str | None]


class SessionLocation(TypedDict):
    """``GET dsh/api/locate/<payload>``: where the session's log lives (``path`` ``None``: no file, a
    PostgreSQL session; ``contentsPath`` ``None``: outside the server root)."""

    kind: str
    path: str | None
    contentsPath: str | None
    tool: NotRequired[str]


class ErrorDetail(TypedDict):
    code: str
    message: str


class ErrorBody(TypedDict):
    """Every error reply: ``{"error": {"code", "message"}, "message"}`` (``message`` twice, for clients that
    read jupyter-server's own error shape)."""

    error: ErrorDetail
    message: str


class CompletionCell(TypedDict):
    """One cell above the cursor's in a completion request: ``code``/``markdown``/``raw``, its source, its
    outputs as short text."""

    kind: str
    source: str
    outputs: str


class CompletionVariable(TypedDict):
    name: str
    type: str


class CompletionBody(TypedDict):
    """The body of ``POST dsh/api/completion`` (the labextension's ``ICompletionBody``), read by
    :func:`dsh_jupyter.completion.context.parse_request`."""

    requestId: str
    language: str
    mode: Literal["code", "prose"]
    prefix: str
    suffix: str
    cells: list[CompletionCell]
    variables: list[CompletionVariable]
