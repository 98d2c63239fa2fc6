"""What hosts set up an agent with (:class:`AgentConfig`), what a turn gives back (:class:`TurnResult`), and the
errors a host catches when it sends or steers at the wrong moment."""

from __future__ import annotations

from dataclasses import dataclass, field

from .inbox import Placement

DEFAULT_SYSTEM_PROMPT = (
    "You are an assistant working inside a Jupyter notebook session. Be concise and concrete. "
    "Use the tools you are given when they help; explain what you found."
)


class AgentBusyError(RuntimeError):
    """send() was called while a turn is running; use steer() to add to the running turn."""


class AgentIdleError(RuntimeError):
    """steer() was called while no turn is running; use send() to start one."""


@dataclass
class AgentConfig:
    """Loop settings (hosts expose them as traitlets)."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    placement: Placement = "separate"
    max_steps: int = 25
    #: Compact automatically when the next request would pass this fraction of the context window
    #: (``None`` turns automatic compaction off).
    auto_compact_fraction: float | None = 0.8
    #: Direct prompts kept after a checkpoint (older ones are summarised).
    compact_keep_recent: int = 1
    model_titles: bool = True
    #: The notebook the session works in (its path or name): added to an automatic title that another session
    #: of the same folder already has.
    notebook: str | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.placement not in ("separate", "prompt-prefix"):
            raise ValueError(f"placement must be 'separate' or 'prompt-prefix', got {self.placement!r}")
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if self.auto_compact_fraction is not None and not 0 < self.auto_compact_fraction <= 1:
            raise ValueError("auto_compact_fraction must be in (0, 1], or None to turn it off")


@dataclass
class TurnResult:
    """How a turn ended: ``reason`` (completed, interrupted, error, blocked, max-steps) and its text."""

    turn: int
    reason: str
    text: str = ""
    error: str | None = None
    seqs: list[int] = field(default_factory=list)

