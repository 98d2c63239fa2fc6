"""Message-body search: what is indexed (projected user/assistant text only) and how a query is read.

The body index holds exactly the text a reference would carry (:mod:`dsh_jupyter.references.projection`):
direct user prompts and steers, compaction checkpoints and assistant text. Tool output, reasoning, system
messages and injected context (plugin messages, earlier reference snapshots) never reach it.

A query is split into words (:mod:`dsh_jupyter.session.words`, which holds the word rules shared with the
stores). Every word must occur in the session; the last word also matches as a prefix while it is still
being typed. Case and diacritics are ignored. Text in scripts written without spaces (Chinese, Japanese)
is one word per run of characters, so only whole runs match.

What is indexed is capped per session (:data:`BODY_CAP` bytes of message text, in conversation order): a
session whose conversation is longer is indexed up to the cap and marked ``body_truncated``, so a huge log
never needs an unbounded buffer or a value SQLite refuses ("string or blob too big").
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from ..session.words import WORD, query_words, texts_match, without_lone_surrogates

#: Bytes of message text indexed per session (UTF-8, counting the blank line between messages).
BODY_CAP = 8 * 1024 * 1024
_SEPARATOR = "\n\n"


def body_cost(text: str) -> int:
    """Bytes ``text`` takes in the body index (with its separator)."""
    return len(text.encode("utf-8", "surrogatepass")) + len(_SEPARATOR)


def clip_text(text: str, room: int) -> str:
    """The longest start of ``text`` whose :func:`body_cost` fits in ``room`` bytes (never splitting a character)."""
    budget = room - len(_SEPARATOR)
    if budget <= 0:
        return ""
    data = text.encode("utf-8", "surrogatepass")[:budget]
    return data.decode("utf-8", "ignore")


def fts_query(text: str) -> str | None:
    """An FTS5 query for ``text`` (every word, the last one as a prefix), or ``None`` when it has no word."""
    words = WORD.findall(text)
    if not words:
        return None
    prefix_last = not text[-1:].isspace()
    parts = ['"' + w.replace('"', '""') + '"' for w in words]
    if prefix_last:
        parts[-1] += "*"
    return " ".join(parts)


def pack(text: str) -> bytes:
    """Indexed text as stored beside the index (SQLite FTS5 needs it to take a row out again)."""
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 1)


def unpack(data: bytes) -> str:
    return zlib.decompress(data).decode("utf-8", "surrogatepass")


def index_text(texts: Iterable[str]) -> str:
    """The text of one body row (messages joined by blank lines), with lone surrogates made harmless."""
    return without_lone_surrogates(_SEPARATOR.join(texts))


__all__ = ["BODY_CAP", "body_cost", "clip_text", "fts_query", "index_text", "pack", "query_words", "texts_match",
           "unpack", "without_lone_surrogates"]
