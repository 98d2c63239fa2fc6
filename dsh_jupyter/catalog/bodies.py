"""Message-body search: what is indexed (projected user/assistant text only) and how a query is read.

The body index holds exactly the text a reference would carry (:mod:`dsh_jupyter.references.projection`):
direct user prompts and steers, compaction checkpoints and assistant text. Tool output, reasoning, system
messages and injected context (plugin messages, earlier reference snapshots) never reach it.

A query is split into words (letters and digits; everything else separates words, as SQLite's
``unicode61`` tokenizer does). Every word must occur in the session; the last word also matches as a
prefix while it is still being typed. Case and diacritics are ignored. Text in scripts written without
spaces (Chinese, Japanese) is one word per run of characters, so only whole runs match.

What is indexed is capped per session (:data:`BODY_CAP` bytes of message text, in conversation order): a
session whose conversation is longer is indexed up to the cap and marked ``body_truncated``, so a huge log
never needs an unbounded buffer or a value SQLite refuses ("string or blob too big").
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable

_WORD = re.compile(r"[^\W_]+")

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


def query_words(text: str) -> list[str]:
    """The words of a body query, lowercased."""
    return [w.lower() for w in _WORD.findall(text)]


def fts_query(text: str) -> str | None:
    """An FTS5 query for ``text`` (every word, the last one as a prefix), or ``None`` when it has no word."""
    words = _WORD.findall(text)
    if not words:
        return None
    prefix_last = not text[-1:].isspace()
    parts = ['"' + w.replace('"', '""') + '"' for w in words]
    if prefix_last:
        parts[-1] += "*"
    return " ".join(parts)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def texts_match(texts: Iterable[str], text: str) -> bool:
    """The same test in Python, for sessions that are not indexed (live, unsaved messages)."""
    words = [_fold(w) for w in query_words(text)]
    if not words:
        return False
    present: set[str] = set()
    for chunk in texts:
        present.update(_fold(w) for w in _WORD.findall(chunk))
    *whole, last = words
    if any(w not in present for w in whole):
        return False
    if text[-1:].isspace():
        return last in present
    return any(p.startswith(last) for p in present)


def pack(text: str) -> bytes:
    """Indexed text as stored beside the index (SQLite FTS5 needs it to take a row out again)."""
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 1)


def unpack(data: bytes) -> str:
    return zlib.decompress(data).decode("utf-8", "surrogatepass")


def index_text(texts: Iterable[str]) -> str:
    """The text of one body row (messages joined by blank lines), with lone surrogates made harmless."""
    return without_lone_surrogates(_SEPARATOR.join(texts))


def without_lone_surrogates(text: str) -> str:
    """``text`` as UTF-8 can hold it: each lone surrogate becomes ``?`` (``text`` itself when it has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
