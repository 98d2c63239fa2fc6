"""What a streamed view counted: prompts, answers, tool calls, the texts its limits cut, and the latest title."""

from __future__ import annotations

from dataclasses import dataclass, field

from .items import Answer, Item, Prompt, Prose, ToolCall
from .limits import EXPORT, Limits


@dataclass
class Tally:
    """What an export counted while it streamed (``limits``: the ones its items were cut by)."""

    prompts: int = 0
    answers: int = 0
    tools: int = 0
    cut_texts: int = 0
    cut_outputs: int = 0
    title: str | None = None
    limits: Limits = field(default=EXPORT)

    def add(self, item: Item) -> None:
        if isinstance(item, Prompt):
            self.prompts += 1
        elif isinstance(item, Answer):
            self.answers += 1
        elif isinstance(item, ToolCall):
            self.tools += 1
            self.cut_outputs += item.result_cut > 0
        if isinstance(item, Prose) and item.cut:
            self.cut_texts += 1

    def summary(self) -> str:
        """``3 prompts, 3 answers, 5 tool calls``, then what was cut, if anything."""
        text = f"{self.prompts:,} prompts, {self.answers:,} answers, {self.tools:,} tool calls"
        cuts = []
        if self.cut_texts:
            cuts.append(f"{self.cut_texts:,} {'message' if self.cut_texts == 1 else 'messages'} cut to "
                        f"{self.limits.text or 0:,} characters")
        if self.cut_outputs:
            cuts.append(f"{self.cut_outputs:,} tool {'output' if self.cut_outputs == 1 else 'outputs'} cut to "
                        f"{self.limits.output or 0:,} characters")
        if cuts:
            text += f" ({'; '.join(cuts)}: the session log keeps them whole)"
        return text


__all__ = ["Tally"]
