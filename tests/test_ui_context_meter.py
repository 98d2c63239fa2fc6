"""The chat panel's header carries the context meter (measured when the log grew, never while a turn runs)."""

from __future__ import annotations

from types import SimpleNamespace

from dsh_jupyter.conversation.fold import Transcript
from dsh_jupyter.conversation.usage import ContextMeter
from dsh_jupyter.models.base import ModelInfo
from dsh_jupyter.ui.widgets.static_copy import session_facts


class MeteredAgent:
    def __init__(self) -> None:
        self.id = "ab12cd34-0000-4000-8000-000000000001"
        self.model = SimpleNamespace(info=ModelInfo("litellm", "anthropic/claude-sonnet-4-5", 200_000))
        self.session = SimpleNamespace(last_seq=4)
        self.measured = 0

    def title(self) -> str:
        return "Regional sales"

    def context_meter(self) -> ContextMeter:
        self.measured += 1
        return ContextMeter(50_000, 200_000, 160_000)


def test_the_panel_header_shows_the_context_meter_measured_once_per_log_change() -> None:
    agent = MeteredAgent()
    host = SimpleNamespace(agent=agent)
    facts = session_facts(host, Transcript(), "idle")
    assert facts.labels == ["ab12cd34", "litellm · anthropic/claude-sonnet-4-5",
                            "context 25% of 200K (compacts at 80%)"]
    session_facts(host, Transcript(), "idle")
    assert agent.measured == 1, "the same log is not measured twice"
    assert session_facts(host, Transcript(), "running").context == "", "not measured while a turn runs"
    agent.session.last_seq = 9
    session_facts(host, Transcript(), "idle")
    assert agent.measured == 2


def test_a_meter_that_fails_leaves_the_header_as_it_was() -> None:
    agent = MeteredAgent()

    def broken() -> ContextMeter:
        raise RuntimeError("no")

    agent.context_meter = broken  # type: ignore[method-assign]
    facts = session_facts(SimpleNamespace(agent=agent), Transcript(), "idle")
    assert facts.labels == ["ab12cd34", "litellm · anthropic/claude-sonnet-4-5"]
