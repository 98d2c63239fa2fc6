"""Sessions whose model calls carry known, free or unknown costs, for the per-session cost tests."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store.base import SessionStore

MODEL = {"kind": "model", "provider": "openai", "model": "gpt-4o-mini"}

#: One list per turn, one entry per model call: its cost (``None``: the call reported no cost).
Costs = Sequence[Sequence[float | None]]


def add_priced_turn(log: SessionLog, turn: int, calls: Sequence[float | None]) -> None:
    """A turn whose model calls cost ``calls`` (each call one assistant message with its usage)."""
    log.append("turn/start", {"turn": turn})
    log.append("user/message", user_message(f"prompt {turn} mentions \"assistant/message\" in its text"))
    for step, cost in enumerate(calls, start=1):
        usage: dict[str, float | int] = {"inputTokens": 100 * turn, "outputTokens": 10}
        if cost is not None:
            usage["cost"] = cost
        # Odd steps as the agent loop writes them (the usage after the message), even ones the other way round.
        log.append("assistant/message", {"turn": turn, "step": step, "usage": usage,
                                         "message": assistant_message([text_block(f"answer {turn}.{step}")], MODEL)}
                   if step % 2 == 0 else
                   {"turn": turn, "step": step,
                    "message": assistant_message([text_block(f"answer {turn}.{step}")], MODEL), "usage": usage})
    log.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def priced_session(store: SessionStore, session_id: str, costs: Costs, *, cwd: str = "/work/a",
                   created_at: int = 1_787_130_725_417, title: str | None = None) -> SessionLog:
    """A closed session, one flush per turn, whose turns' model calls cost ``costs``."""
    header = SessionHeader(session_id, created_at, cwd)
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        for turn, calls in enumerate(costs, start=1):
            add_priced_turn(log, turn, calls)
            if turn == 1 and title is not None:
                log.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": "user"}})
            writer.flush()
    return log


def more_turns(store: SessionStore, session_id: str, costs: Costs) -> None:
    """Resume a stored session and add turns costing ``costs``."""
    log, writer = store.open(session_id)
    with writer:
        first = sum(1 for e in log.events if e.type == "turn/start") + 1
        for turn, calls in enumerate(costs, start=first):
            add_priced_turn(log, turn, calls)
            writer.flush()
