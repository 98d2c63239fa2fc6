"""The one transcript fold, fed both ways (dsh_jupyter.conversation).

Run from the repository root::

    .venv/bin/python benchmarks/bench_transcript.py

The cell and the chat panel fold every streamed agent event (a token at a time, on the agent thread) and
exports fold every event of a log. This measures, per event: the live fold of a turn's stream (token deltas,
tool start and finish, finished messages) beside a bare loop that only dispatches the same events on their
type (the baseline: what reading them costs at all; goal: a few microseconds, far below any model's token
rate), and the log fold that exports stream (each item taken as soon as it is complete) beside decoding the
same events from their JSON lines (the baseline: what reading the log costs every export anyway; goal: the
fold costs at most twice that).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._summary import goal  # noqa: E402
from benchmarks._timing import best  # noqa: E402
from dsh_jupyter.agent import events as ev  # noqa: E402
from dsh_jupyter.agent.transcript_feed import apply_event  # noqa: E402
from dsh_jupyter.conversation.fold import Transcript  # noqa: E402
from dsh_jupyter.conversation.log_feed import transcript_items  # noqa: E402
from dsh_jupyter.session import Event  # noqa: E402
from dsh_jupyter.session.messages import assistant_message, text_block, tool_result_message, user_message  # noqa: E402

#: The live fold's goal in microseconds per event.
GOAL_US = 10.0
TURNS = 200
TOKENS = 200  # streamed deltas per answer
SOURCE = {"kind": "model", "provider": "bench", "model": "b"}


def live_events() -> list[ev.AgentEvent]:
    events: list[ev.AgentEvent] = []
    for turn in range(1, TURNS + 1):
        events.append(ev.TurnStarted(turn))
        events += [ev.TextDelta(turn, f"w{n} ") for n in range(TOKENS)]
        events.append(ev.AssistantMessage(turn, "".join(f"w{n} " for n in range(TOKENS)), turn * 10))
        arguments = json.dumps({"command": f"ls /tmp/{turn}"})
        events += [ev.ToolStarted(turn, f"c{turn}", "bash", arguments),
                   ev.ApprovalDecided(turn, f"c{turn}", "bash", {"allowed": True, "answeredBy": "auto"}),
                   ev.ToolFinished(turn, f"c{turn}", "bash", "a\nb\n" * 50, False)]
        events += [ev.TextDelta(turn, f"d{n} ") for n in range(TOKENS // 4)]
        events += [ev.AssistantMessage(turn, "done", turn * 10 + 5), ev.TurnEnded(turn, "completed")]
    return events


def log_events() -> list[Event]:
    events: list[Event] = []

    def add(kind: str, data: object) -> None:
        events.append(Event(kind, len(events), 0, data))

    for turn in range(1, TURNS * 25 + 1):
        add("turn/start", {"turn": turn})
        add("user/message", user_message(f"question {turn}"))
        add("assistant/message", {"turn": turn, "message": assistant_message(
            [{"type": "reasoning", "text": "thinking"}, text_block("Let me look. " * 40)], SOURCE)})
        add("tool/call", {"turn": turn, "callId": f"c{turn}", "name": "bash",
                          "arguments": json.dumps({"command": f"ls /tmp/{turn}"})})
        add("tool/result", {"turn": turn, "message": tool_result_message(f"c{turn}", [text_block("a\nb\n" * 50)])})
        add("assistant/message", {"turn": turn, "message": assistant_message([text_block("done")], SOURCE)})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return events


def main() -> int:
    live = live_events()
    stored = log_events()

    def fold_live() -> None:
        transcript = Transcript(max_items=None)
        for event in live:
            apply_event(transcript, event)

    def dispatch_live() -> None:
        kinds = {ev.TextDelta: 0, ev.AssistantMessage: 1}
        for event in live:
            kinds.get(type(event))

    def fold_log() -> None:
        for _ in transcript_items(stored):
            pass

    lines = [json.dumps(event.to_json()) for event in stored]

    def read_log() -> None:
        for line in lines:
            json.loads(line)

    print(f"Transcript fold: {len(live):,} live agent events ({TURNS} turns), {len(stored):,} stored events")
    per_event = best(fold_live, 1, 3) / len(live) * 1e6
    baseline = best(dispatch_live, 1, 3) / len(live) * 1e6
    live_met = goal("bench_transcript", "live fold (cell, chat panel), per event", f"{per_event:.2f} µs",
                    f"<= {GOAL_US:.0f} µs", f"dispatch on type {baseline:.2f} µs", per_event <= GOAL_US)
    per_event = best(fold_log, 1, 3) / len(stored) * 1e6
    baseline = best(read_log, 1, 3) / len(stored) * 1e6
    log_met = goal("bench_transcript", "log fold (exports, streamed), per event", f"{per_event:.2f} µs",
                   "<= 2x baseline", f"JSON decode {baseline:.2f} µs", per_event <= 2 * baseline)
    return 0 if live_met and log_met else 1


if __name__ == "__main__":
    sys.exit(main())
