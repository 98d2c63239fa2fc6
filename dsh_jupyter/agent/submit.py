"""From prompt text to an admitted message: parse mentions, prepare snapshots, then send or steer.

This is the host-side step the reference's hosts perform before the core sees anything: the core agent
only receives readable content plus frozen contexts. Preparation happens first; the choice between
``send`` (idle) and ``steer`` (busy) is made from the agent's state after preparation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..references import ReferenceTarget, SessionReferenceResolver, parse_session_reference_text
from ..session.messages import text_block
from .inbox import Placement
from .loop import Agent, TurnResult


@dataclass
class Submission:
    """What happened to a submitted prompt: ``steered`` into a running turn, or the finished ``turn``."""

    content: list[dict[str, Any]]
    context: dict[str, Any] | None
    steered: bool = False
    turn: TurnResult | None = None
    spills: dict[int, Any] = field(default_factory=dict)


def reference_target(agent: Agent) -> ReferenceTarget:
    store = agent.store
    return ReferenceTarget(
        session_id=agent.id,
        cwd=agent.cwd,
        session_dir=store.session_dir(agent.header) if store is not None else None,
        context_window=agent.model.info.context_window,
    )


async def prepare_prompt(agent: Agent, text: str, resolver: SessionReferenceResolver | None,
                         cancel: asyncio.Event | None = None) -> Submission:
    """Parse mentions and prepare their snapshots. Raises ``SessionReferenceError`` on any problem,
    before anything is written."""
    parsed = parse_session_reference_text(text)
    content = [text_block(parsed.text)]
    if not parsed.references:
        return Submission(content, None)
    if resolver is None:
        from ..references import SessionReferenceError

        raise SessionReferenceError("SESSION_REFERENCE_INVALID_CONFIG",
                                    "this host has no session-reference service configured; remove the mentions")
    prepared = await resolver.prepare(reference_target(agent), content, parsed.references, cancel)
    return Submission(list(prepared.content), prepared.additional_context,
                      spills=dict(getattr(prepared, "spills", {}) or {}))


async def submit(agent: Agent, text: str, resolver: SessionReferenceResolver | None = None, *,
                 placement: Placement | None = None, cancel: asyncio.Event | None = None) -> Submission:
    """Prepare ``text`` and hand it to the agent: steer when a turn is running, else run a new turn."""
    submission = await prepare_prompt(agent, text, resolver, cancel)
    contexts = [submission.context] if submission.context else []
    if agent.busy:
        agent.steer(submission.content, contexts=contexts, placement=placement)
        submission.steered = True
        return submission
    submission.turn = await agent.send(submission.content, contexts=contexts, placement=placement)
    return submission
