"""From prompt text to an admitted message: parse mentions, prepare snapshots, then start a turn or steer.

This is the host-side step the reference's hosts perform before the core sees anything: the core agent only
receives readable content plus frozen contexts. Preparation happens first; whether the prompt starts a turn
(idle) or is steered into the running one (busy) is decided once, here, by :func:`dispatch`, from the agent's
state after preparation. Every host (the ``%%dsh`` magic, ``--bg`` turns, the picker, the chat panel) goes
through it, so a turn that starts or ends between the check and the act never loses a prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..references import ReferenceTarget, SessionReferenceError, SessionReferenceResolver, parse_session_reference_text
from ..references.cells import HostCells
from ..references.variables import VariableSnapshots
from ..session.messages import text_block
from .config import AgentBusyError, AgentIdleError, TurnResult
from .inbox import Placement
from .loop import Agent

#: How often a prompt may bounce between "just ended" and "just started" before we give up (never in practice).
_DISPATCH_ATTEMPTS = 8
#: Seconds to wait before trying again while a turn is ending: it refuses steering once it has looked at its
#: inbox for the last time, and a new turn can start only once it has written its end (milliseconds). The waits
#: double from this one: all of them together come to about 2.5 s.
_ENDING_WAIT = 0.01


@dataclass
class Submission:
    """A prepared prompt and what happened to it: ``steered`` into a running turn, or the finished ``turn``."""

    content: list[Mapping[str, Any]]
    context: dict[str, Any] | None
    steered: bool = False
    turn: TurnResult | None = None
    spills: dict[int, Any] = field(default_factory=dict)

    @property
    def contexts(self) -> list[dict[str, Any]]:
        return [self.context] if self.context else []


@dataclass
class Dispatched:
    """What :func:`dispatch` did: ``started`` a turn (``turn`` must then be awaited or scheduled once) or
    ``steered`` the prompt into the running turn (``turn`` is ``None``)."""

    action: Literal["started", "steered"]
    turn: Coroutine[Any, Any, TurnResult] | None = None


def reference_target(agent: Agent) -> ReferenceTarget:
    """The session a prompt of ``agent`` prepares references for."""
    return ReferenceTarget.from_header(agent.header, agent.store, context_window=agent.model.info.context_window)


async def prepare_prompt(agent: Agent, text: str, resolver: SessionReferenceResolver | None,
                         cancel: asyncio.Event | None = None, *,
                         variables: VariableSnapshots | None = None,
                         cells: HostCells | None = None) -> Submission:
    """Parse mentions and prepare their snapshots (``variables``: the host's variables, for ``dsh-variable:``
    mentions; ``cells``: the host's cells, which first adapt its ``@cell`` syntax into ``dsh-cell:`` mentions).
    Raises ``SessionReferenceError`` on any problem, before anything is written."""
    if cells is not None:
        text = await asyncio.to_thread(cells.adapt, text)  # may ask the page for its selection
    parsed = parse_session_reference_text(text)
    content: list[Mapping[str, Any]] = [text_block(parsed.text)]
    if not parsed.references and not parsed.variables and not parsed.cells:
        return Submission(content, None)
    if resolver is None:
        raise SessionReferenceError("SESSION_REFERENCE_INVALID_CONFIG",
                                    "this host has no session-reference service configured; remove the mentions")
    prepared = await resolver.prepare(reference_target(agent), content, parsed.references, cancel,
                                      variables=parsed.variables, variable_source=variables,
                                      cells=parsed.cells, cell_source=cells)
    return Submission(list(prepared.content), prepared.additional_context,
                      spills=dict(getattr(prepared, "spills", {}) or {}))


def dispatch(agent: Agent, submission: Submission, *, placement: Placement | None = None) -> Dispatched:
    """Start a turn with ``submission`` when the agent is idle, else steer it into the running turn.

    Thread-safe: the agent reserves a turn atomically (``begin``) and refuses steering when idle, so a turn
    that starts or ends in between makes us try the other way, and the prompt is never lost.
    """
    contexts = submission.contexts
    start = not agent.busy
    wait = _ENDING_WAIT
    for _ in range(_DISPATCH_ATTEMPTS):
        if start:
            try:
                return Dispatched("started", agent.begin(submission.content, contexts=contexts, placement=placement))
            except AgentBusyError:
                start = False  # a turn started meanwhile: steer into it
        try:
            agent.steer(submission.content, contexts=contexts, placement=placement)
        except AgentIdleError:
            if agent.busy:  # the running turn is ending (it refuses steering): a new one can start in milliseconds
                time.sleep(wait)
                wait *= 2
            start = True  # the turn ended (or is ending): start one
            continue
        submission.steered = True
        return Dispatched("steered")
    raise AgentBusyError("the session kept starting and ending turns; send the prompt again")


async def submit(agent: Agent, text: str, resolver: SessionReferenceResolver | None = None, *,
                 placement: Placement | None = None, cancel: asyncio.Event | None = None,
                 on_start: Callable[[], None] | None = None,
                 variables: VariableSnapshots | None = None, cells: HostCells | None = None) -> Submission:
    """Prepare ``text`` and hand it to the agent (:func:`dispatch`); a started turn is awaited here.

    ``on_start`` is called once a turn was reserved, before it runs (hosts use it to track the turn);
    ``variables`` and ``cells`` are the host's sources of variable and cell snapshots (see :func:`prepare_prompt`)."""
    submission = await prepare_prompt(agent, text, resolver, cancel, variables=variables, cells=cells)
    dispatched = dispatch(agent, submission, placement=placement)
    if dispatched.turn is not None:
        if on_start is not None:
            on_start()
        submission.turn = await dispatched.turn
    return submission
