"""What an approval question offers: its answers, the one focused first and how much of the command is shown.

One rule for the widget (:mod:`.approval_widget`) and the IPython host's terminal prompt; light, so choosing an
approver never imports anywidget.
"""

from __future__ import annotations

from ..agent.approvals import ApprovalRequest

#: Most characters of a command or code shown in a question.
MAX_SHOWN = 20_000


def choices_for(request: ApprovalRequest) -> list[tuple[str, str]]:
    """The answers offered, as ``(choice, label)``: once, for the session, the command word, deny."""
    offered = [("once", "Allow once"), ("session", f"Allow {request.tool} for this session")]
    if request.prefix is not None:
        offered.append(("prefix", f"Allow commands starting with {request.prefix}"))
    offered.append(("deny", "Deny"))
    return offered


def default_choice(request: ApprovalRequest) -> str:
    """The answer focused first (Enter on stdin): Deny when the command holds hidden characters."""
    return "deny" if request.warning else "once"
