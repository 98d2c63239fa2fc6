"""Turn the current surface into chat-completions messages (what the model sees).

Only surface events count, so compaction shadows what it replaced and replay never needs anything but
the target's own log. The same surface always yields the same messages.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..session.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, Event


def _text_of(blocks: Iterable[Any]) -> str:
    return "\n".join(
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _tool_result_text(message: dict[str, Any]) -> str:
    parts: list[str] = []
    for block in message.get("content", []):
        if isinstance(block, dict) and block.get("type") == "tool-result":
            parts.append(_text_of(block.get("content", [])))
    return "\n".join(parts)


def _reasoning_of(blocks: Iterable[Any]) -> str:
    return "".join(
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "reasoning" and isinstance(b.get("text"), str)
    )


def surface_to_messages(surface: Iterable[Event], system_prompt: str | None = None, *,
                        reasoning_in_tool_steps: bool = False) -> list[dict[str, Any]]:
    """Chat messages for a model request, in surface order.

    ``reasoning_in_tool_steps`` sends back the reasoning of assistant messages that called tools since the
    last user prompt as ``reasoning_content`` (DeepSeek's thinking mode needs it within a tool-using turn;
    other endpoints never see the field).
    """
    messages: list[dict[str, Any]] = []
    surface = list(surface)
    last_prompt = max((i for i, e in enumerate(surface) if e.type == USER_MESSAGE), default=-1)
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    for position, event in enumerate(surface):
        message = event.message
        if message is None:
            continue
        if event.type == USER_MESSAGE:
            text = _text_of(message.get("content", []))
            if text:
                messages.append({"role": "user", "content": text})
        elif event.type == ASSISTANT_MESSAGE:
            content = message.get("content", [])
            text = _text_of(content)
            calls = [
                {"id": b.get("id"), "type": "function",
                 "function": {"name": b.get("name"), "arguments": b.get("arguments") or "{}"}}
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool-call"
            ]
            if not text and not calls:
                continue  # an empty assistant message derives no model message
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
                if reasoning_in_tool_steps and position > last_prompt:
                    reasoning = _reasoning_of(content)
                    if reasoning:
                        entry["reasoning_content"] = reasoning
            messages.append(entry)
        elif event.type == TOOL_RESULT:
            source = message.get("source") or {}
            messages.append({"role": "tool", "tool_call_id": source.get("callId"),
                             "content": _tool_result_text(message)})
    return messages


def estimate_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """A cheap, deterministic size estimate (about four characters a token)."""
    total = 0
    for message in messages:
        content = message.get("content") or ""
        total += len(content) // 4 + 4
        for call in message.get("tool_calls", ()):
            total += len(call["function"].get("arguments") or "") // 4 + 4
    return total
