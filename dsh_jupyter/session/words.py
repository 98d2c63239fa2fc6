"""What a session contributes to search: the words of its projected messages, and its match fields.

Pure functions of session events, shared by the stores (the PostgreSQL writer keeps them on the session row
in each flush's transaction) and the catalog (which answers queries with them).

A text is split into words (letters and digits; everything else separates words, as SQLite's
``unicode61`` tokenizer does). Matching ignores case and diacritics (:func:`fold`). Only projected text is
indexed (:mod:`.projection`): direct user prompts and steers, compaction checkpoints and assistant text;
tool output, reasoning, system messages and injected context never reach it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .events import Event
from .header import SessionHeader
from .projection import project_event

WORD = re.compile(r"[^\W_]+")


def query_words(text: str) -> list[str]:
    """The words of a body query, lowercased."""
    return [w.lower() for w in WORD.findall(text)]


def fold(text: str) -> str:
    """``text`` lowercased, without its diacritics (compatibility-decomposed, combining marks dropped)."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def texts_match(texts: Iterable[str], text: str) -> bool:
    """Whether every word of the query ``text`` occurs among the words of ``texts`` (the last word also as a
    prefix, unless ``text`` ends with a space): the test body search applies, run in Python."""
    words = [fold(w) for w in query_words(text)]
    if not words:
        return False
    present: set[str] = set()
    for chunk in texts:
        present.update(fold(w) for w in WORD.findall(chunk))
    *whole, last = words
    if any(w not in present for w in whole):
        return False
    if text[-1:].isspace():
        return last in present
    return any(p.startswith(last) for p in present)


def body_words(texts: Iterable[str]) -> list[str]:
    """The distinct folded words of some projected message texts (what body search matches)."""
    words: set[str] = set()
    for text in texts:
        words.update(fold(w) for w in query_words(text))
    return sorted(w for w in words if w)


def event_texts(events: Iterable[Event]) -> list[str]:
    """The projected texts of surface events (user prompts, checkpoints, assistant text)."""
    texts = []
    for event in events:
        projected = project_event(event)
        if projected is not None:
            texts.append(projected.text)
    return texts


def without_lone_surrogates(text: str) -> str:
    """``text`` as UTF-8 can hold it: each lone surrogate becomes ``?`` (``text`` itself when it has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def storable(text: str) -> str:
    """``text`` as PostgreSQL text can hold it, for matching only: a NUL becomes U+FFFD, a lone surrogate ``?``."""
    return without_lone_surrogates(text.replace("\x00", "\ufffd"))


def match_fields(header: SessionHeader, title: str | None) -> tuple[str, str, str]:
    """The lowercased id, cwd and label (title, else id) a candidate needle is matched against."""
    label = title if title is not None else header.id
    return (storable(header.id.lower()), storable((header.cwd or "").lower()), storable(label.lower()))


__all__ = ["WORD", "body_words", "event_texts", "fold", "match_fields", "query_words", "storable", "texts_match",
           "without_lone_surrogates"]
