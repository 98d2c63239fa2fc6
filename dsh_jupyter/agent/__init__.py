"""The agent loop: inbox (send/steer/inject), turns, compaction, titles and prompt-submit hooks."""

from __future__ import annotations

from .config import AgentBusyError, AgentConfig, AgentIdleError, TurnResult
from .inbox import PLACEMENTS, REQUEST_DELIMITER, InboxRecord, Placement
from .loop import Agent
from .prompt_submit import Allow, Block, PromptSubmission, PromptSubmitHooks

__all__ = [
    "PLACEMENTS",
    "REQUEST_DELIMITER",
    "Agent",
    "AgentBusyError",
    "AgentConfig",
    "AgentIdleError",
    "Allow",
    "Block",
    "InboxRecord",
    "Placement",
    "PromptSubmission",
    "PromptSubmitHooks",
    "TurnResult",
]
