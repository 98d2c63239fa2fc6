"""How much text a transcript item keeps: a parameter of the view, and every view's limits named here.

A fold (:class:`~.fold.Transcript`) cuts each text as it arrives, so a view never holds more than it shows;
what was cut is counted on the item (``cut``, ``result_cut``), so a view can say so. ``None``: kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Limits:
    """Characters kept of each kind of text (``None``: no limit)."""

    #: A prompt, answer, reasoning, compaction checkpoint or harness note.
    text: int | None
    #: A tool call's result.
    output: int | None
    #: A tool call's arguments as kept on the item (its one-line summary is made from the whole arguments).
    arguments: int | None
    #: The one-line summary of a tool call's arguments.
    summary: int = 120

    def __post_init__(self) -> None:
        for name in ("text", "output", "arguments", "summary"):
            value = getattr(self, name)
            if value is None and name != "summary":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"the {name} limit must be a positive number of characters, got {value!r}")

    def with_text(self, text: int | None) -> Limits:
        """These limits with another text limit (``sessions show --chars``)."""
        return replace(self, text=text)


#: The ``%%dsh`` cell and the chat and pick panels (and their static copies): answers whole, tool results
#: and arguments cut where a cell would turn into a log.
CELL = Limits(text=None, output=4_000, arguments=4_000)
#: Exports (Markdown, HTML, notebook): long enough to read everything a person wrote; code stays whole so the
#: notebook export re-runs it.
EXPORT = Limits(text=200_000, output=20_000, arguments=None)
#: ``sessions show`` and ``postgres show``: 2,000 characters of each message (their ``--chars`` default); they
#: show prompts, answers and checkpoints only.
SHOW = EXPORT.with_text(2_000)


__all__ = ["CELL", "EXPORT", "SHOW", "Limits"]
