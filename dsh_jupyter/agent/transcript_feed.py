"""Live agent events into the transcript fold (:class:`dsh_jupyter.conversation.fold.Transcript`): what the
``%%dsh`` cell and the chat panels read while a turn runs.

The live input differs from the log only in its grain: answer and reasoning text arrive as deltas before the
finished message, and a tool call as start, approval decision and finish. A recorded prompt confirms the one a
widget already showed (:meth:`~dsh_jupyter.conversation.fold.Transcript.add_user`).
"""

from __future__ import annotations

from ..conversation.fold import Transcript
from . import events as ev


def apply_event(transcript: Transcript, event: ev.AgentEvent) -> bool:
    """Fold one agent event into ``transcript``; ``True`` when a turn starts or ends (a view then updates at once)."""
    if isinstance(event, ev.TextDelta):
        transcript.text_delta(event.text)
    elif isinstance(event, ev.ReasoningDelta):
        transcript.reasoning_delta(event.text)
    elif isinstance(event, ev.AssistantMessage):
        transcript.assistant_message(event.text, event.usage)
    elif isinstance(event, ev.ToolStarted):
        transcript.tool_started(event.call_id, event.name, event.arguments)
    elif isinstance(event, ev.ToolFinished):
        transcript.tool_finished(event.call_id, event.name, event.text, is_error=event.is_error)
    elif isinstance(event, ev.ApprovalDecided):
        transcript.approval(event.call_id, event.record)
    elif isinstance(event, ev.MessageRecorded):
        transcript.message(event.message)
    elif isinstance(event, ev.Notice):
        transcript.add_notice(event.text, event.level)
    elif isinstance(event, ev.TitleChanged):
        transcript.set_title(event.title)
    elif isinstance(event, ev.TurnStarted):
        transcript.turn_started()
        return True
    elif isinstance(event, ev.TurnEnded):
        transcript.turn_ended(event.reason, event.error)
        return True
    return False


__all__ = ["apply_event"]
