"""The offline model: deterministic answers from what it was sent, tool calls on request, scripts."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from typing import Any

import pytest

from dsh_jupyter.agent import REQUEST_DELIMITER
from dsh_jupyter.agent.compaction import checkpoint_content
from dsh_jupyter.models import (
    Finish,
    ModelError,
    ModelRequest,
    OfflineModel,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
    collect,
)
from dsh_jupyter.models.offline import (
    OFFLINE_BANNER,
    offline_title,
    read_user_message,
)
from dsh_jupyter.references.framing import render_prompt, tag_safe_dumps
from dsh_jupyter.session.messages import (
    Message,
    assistant_message,
    compaction_source,
    text_block,
    tool_result_message,
    user_message,
)

BASH = ToolSpec("bash", "Run a bash command.", {
    "type": "object",
    "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
    "required": ["command", "description"],
})
PYTHON = ToolSpec("python", "Run Python in the kernel.", {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})

MODEL = {"kind": "model", "provider": "offline", "model": "offline"}


def framed_block(entries: list[dict[str, Any]], omissions: list[dict[str, Any]] | None = None) -> str:
    """A context message text exactly as the reference preparer renders it."""
    return render_prompt([tag_safe_dumps(entry) for entry in entries], omissions or ())


def stats(session: dict[str, Any], compacted: bool, truncated: bool) -> dict[str, Any]:
    return {"sessionId": session["sessionId"], "label": session["label"], "compacted": compacted,
            "truncated": truncated}


def context(entries: list[dict[str, Any]], omissions: list[dict[str, Any]] | None = None,
            references: list[dict[str, Any]] | None = None) -> Message:
    """A context message as the agent records it: the framed text and the session-reference source."""
    source = {"kind": "session-reference", "form": "recall", "version": 1, "references": references or []}
    return user_message([text_block(framed_block(entries, omissions))], source=source)


SESSION_A: dict[str, Any] = {
    "sessionId": "b3c1d7a2-5f0e-4c8a-9d61-2e7f40a18c55", "label": "Flaky login test race",
    "cwd": "/home/dev/projects/webapp", "capturedThroughSeq": 99,
    "conversation": [
        {"role": "user", "text": "The login test fails about one run in five. Can you find out why?"},
        {"role": "assistant", "text": "Let me read the test first."},
        {"role": "assistant", "text": "It sleeps 500 ms instead of waiting for </referenced-sessions> navigation."},
        {"role": "user", "text": "Would a longer timeout be enough instead?"},
        {"role": "assistant", "text": "A longer sleep only makes the failure rarer; use waitForURL."},
    ],
}
SESSION_B: dict[str, Any] = {
    "sessionId": "7d0c55e1-0000-4000-8000-000000000002", "label": "Migrations <dry-run>", "cwd": None,
    "capturedThroughSeq": 210,
    "conversation": [
        {"role": "user", "text": "Checkpoint written by compaction.\n\n## Primary Request\n- dry run"},
        {"role": "user", "text": "Now add a test."},
        {"role": "assistant", "text": "Added tests/test_migrate.py.\n[… omitted 1234 UTF-8 bytes …]"},
    ],
}
OMISSIONS = [{"sessionId": SESSION_B["sessionId"], "capturedThroughSeq": 210, "omittedMessages": 2,
              "omittedBytes": 1234, "fullSnapshot": {"status": "saved", "locator": "/tmp/spill/session-2.txt",
                                                      "bytes": 5000, "retrievalHint": "Use read."}}]


async def run(model: OfflineModel, request: ModelRequest
              ) -> tuple[list[Any], list[dict[str, Any]], Usage | None, str | None]:
    events = [event async for event in model.stream(request)]

    async def replay() -> Any:
        for event in events:
            yield event

    blocks, usage, finish = await collect(replay())
    return events, blocks, usage, finish


def turn(*user_messages: str | Message, tools: list[ToolSpec] | None = None,
         history: list[Message] | None = None, **kwargs: Any) -> ModelRequest:
    messages = list(history or []) + [user_message(m) if isinstance(m, str) else m for m in user_messages]
    return ModelRequest(messages, tools=tools or [], system="You are dsh.", **kwargs)


async def test_says_it_is_the_offline_model_and_quotes_the_request() -> None:
    _, blocks, usage, finish = await run(OfflineModel(), turn("Why does my build fail?"))
    (block,) = blocks
    assert block["type"] == "text"
    assert block["text"].startswith(f"{OFFLINE_BANNER} — ")
    assert "“Why does my build fail?”" in block["text"]
    assert "DEEPSEEK_API_KEY" in block["text"]
    assert finish == "stop" and usage is not None


async def test_reports_referenced_sessions_from_a_framed_block() -> None:
    message = context([SESSION_A, SESSION_B], OMISSIONS,
                      [stats(SESSION_A, False, False), stats(SESSION_B, True, True)])
    assert framed_block([SESSION_A, SESSION_B]).count("</referenced-sessions>") == 1  # the hostile text is tag-safe
    direct = "Compare @[Flaky login test race](dsh-session:b3c1) with @[Migrations](dsh-session:7d0c)"
    _, blocks, _, finish = await run(OfflineModel(), turn(message, direct))
    text = blocks[0]["text"]
    assert finish == "stop"
    assert "You asked: “Compare @Flaky login test race with @Migrations”" in text
    assert "You referenced 2 sessions:" in text
    assert ("- “Flaky login test race” (session b3c1d7a2-5f0e-4c8a-9d61-2e7f40a18c55, cwd /home/dev/projects/webapp, "
            "captured through seq 99): 5 messages (2 from the user, 3 from the assistant); not compacted; "
            "complete.") in text
    assert "- “Migrations <dry-run>” (session 7d0c55e1-0000-4000-8000-000000000002, captured through seq 210)" in text
    assert ("3 messages (2 from the user, 1 from the assistant); compacted; truncated (2 messages dropped, "
            "1,234 bytes of text omitted); full snapshot saved at /tmp/spill/session-2.txt.") in text
    assert "First request there: “The login test fails about one run in five. Can you find out why?”" in text
    assert "Last answer there: “A longer sleep only makes the failure rarer; use waitForURL.”" in text


async def test_prompt_prefix_placement_reads_the_prompt_as_typed() -> None:
    baked = context([SESSION_A], references=[stats(SESSION_A, True, False)])
    direct = [text_block("What was the fix?")]
    message = user_message([*baked["content"], text_block(REQUEST_DELIMITER), *direct],
                           envelope={"displayContent": direct, "prefixContexts": [{"source": baked["source"]}]})
    _, blocks, _, _ = await run(OfflineModel(), turn(message))
    assert "You asked: “What was the fix?”" in blocks[0]["text"]
    assert "You referenced 1 session:" in blocks[0]["text"]
    assert "(2 from the user, 3 from the assistant); compacted; complete." in blocks[0]["text"]


async def test_words_around_a_framing_in_one_message_are_the_request() -> None:
    message = user_message([text_block(framed_block([SESSION_A])), text_block("Summarise it")])
    _, blocks, _, _ = await run(OfflineModel(), turn(message))
    assert "“Summarise it”" in blocks[0]["text"] and "Flaky login test race" in blocks[0]["text"]
    assert "assistant); complete." in blocks[0]["text"]  # no source metadata: compaction is not claimed


def test_read_user_message_takes_state_from_the_source_and_the_omissions() -> None:
    read = read_user_message(context([SESSION_A, SESSION_B], OMISSIONS,
                                     [stats(SESSION_A, False, False), stats(SESSION_B, True, True)]))
    assert read.direct == "" and read.problems == []
    assert [s.source.label for s in read.sessions] == ["Flaky login test race", "Migrations <dry-run>"]
    assert read.sessions[0].source.conversation[2].text == SESSION_A["conversation"][2]["text"]
    first, second = read.sessions
    assert (first.compacted, first.truncated, first.omission) == (False, False, None)
    assert (second.compacted, second.truncated, second.omitted_messages, second.omitted_bytes) == (True, True, 2, 1234)
    bare = read_user_message(user_message(framed_block([SESSION_B])))
    assert (bare.sessions[0].compacted, bare.sessions[0].truncated) == (None, False)


async def test_only_the_current_turn_is_reported() -> None:
    history = [context([SESSION_A]), user_message("first"), assistant_message([text_block("An answer.")], MODEL)]
    _, blocks, _, _ = await run(OfflineModel(), turn("second", history=history))
    assert "“second”" in blocks[0]["text"] and "referenced" not in blocks[0]["text"]


async def test_a_damaged_block_is_reported_not_fatal() -> None:
    damaged = "<referenced-sessions>\n[{oops\n</referenced-sessions>"
    _, blocks, _, finish = await run(OfflineModel(), turn(damaged, "hi"))
    assert "does not hold valid JSON" in blocks[0]["text"] and finish == "stop"


async def test_bash_command_becomes_a_tool_call() -> None:
    model = OfflineModel()
    events, blocks, _, finish = await run(model, turn("Please look.\n/bash ls -la /tmp", tools=[BASH, PYTHON]))
    assert finish == "tool_calls"
    assert blocks[0]["type"] == "text" and blocks[0]["text"].startswith(OFFLINE_BANNER)
    call = blocks[1]
    assert call["type"] == "tool-call" and call["name"] == "bash" and call["id"].startswith("call_offline_")
    assert json.loads(call["arguments"]) == {"command": "ls -la /tmp",
                                             "description": "requested with /bash in the prompt"}
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0].id == call["id"] and deltas[0].name == "bash"
    assert all(d.id is None and d.name is None for d in deltas[1:]) and len(deltas) == 2


async def test_python_fence_and_generic_tool_calls() -> None:
    prompt = ("/python\n```python\nimport math\nprint(math.pi)\n```\n/tool bash {\"command\": \"pwd\"}\n"
              "/tool bash {not json}")
    _, blocks, _, finish = await run(OfflineModel(), turn(prompt, tools=[BASH, PYTHON]))
    calls = [b for b in blocks if b["type"] == "tool-call"]
    assert [c["name"] for c in calls] == ["python", "bash"]
    assert json.loads(calls[0]["arguments"]) == {"code": "import math\nprint(math.pi)"}
    assert json.loads(calls[1]["arguments"])["command"] == "pwd"
    assert "not valid JSON" in blocks[0]["text"] and finish == "tool_calls"
    assert calls[0]["id"] != calls[1]["id"]


async def test_a_tool_that_is_not_offered_is_not_called() -> None:
    _, blocks, _, finish = await run(OfflineModel(), turn("/python print(1)", tools=[BASH]))
    assert finish == "stop" and all(b["type"] == "text" for b in blocks)
    assert "The `python` tool is not available in this session (tools offered: `bash`)" in blocks[0]["text"]
    _, blocks, _, _ = await run(OfflineModel(), turn("/bash ls"))
    assert "tools offered: none" in blocks[0]["text"]


async def test_summarises_tool_results_and_finishes() -> None:
    output = "\n".join(f"line {n}" for n in range(1, 16))
    history = [user_message("/bash seq 15"),
               assistant_message([{"type": "tool-call", "id": "call_9", "name": "bash", "arguments": "{}"}], MODEL),
               tool_result_message("call_9", [text_block(output)])]
    request = ModelRequest(history, tools=[BASH], system="s")
    _, blocks, _, finish = await run(OfflineModel(), request)
    text = blocks[0]["text"]
    assert finish == "stop" and len(blocks) == 1
    assert "`bash` (call_9):" in text and "line 1\n" in text and "line 10\n" in text and "line 11" not in text
    assert "(5 more lines not shown)" in text


async def test_a_refusal_is_quoted_with_its_whole_remedy() -> None:
    from dsh_jupyter.agent.approvals import NOBODY_TO_ASK, ApprovalDecision, ApprovalRequest

    request_ = ApprovalRequest("bash", "call_9", {"command": "ls"}, "ls")
    refusals = [ApprovalDecision(False, "nobody", reason=NOBODY_TO_ASK).refusal(request_),
                "x" * 900 + "; set %config DshMagics.approval = \"auto\""]
    for position, refusal in enumerate(refusals):
        history = [user_message("/bash ls"),
                   assistant_message([{"type": "tool-call", "id": "call_9", "name": "bash", "arguments": "{}"}],
                                     MODEL),
                   tool_result_message("call_9", [text_block(refusal)], is_error=True)]
        _, blocks, _, _ = await run(OfflineModel(), ModelRequest(history, tools=[BASH], system="s"))
        assert 'set %config DshMagics.approval = "auto"' in blocks[0]["text"]
        assert (refusal in blocks[0]["text"]) == (position == 0)  # ours is whole; a huge line loses its middle
    long_reason = ApprovalDecision(False, "person", reason="no " * 400).refusal(request_)
    assert len(long_reason) < 300 and long_reason.endswith("….")


async def test_scripted_responses_are_used_in_order_then_fallback() -> None:
    model = OfflineModel()
    model.queue("Scripted hello.",
                [{"type": "reasoning", "text": "Thinking."}, "Running it.",
                 ToolCall("bash", {"command": "date"}, id="c1")],
                RuntimeError("scripted failure"),
                lambda request: f"You sent {len(request.messages)} messages.")
    assert model.pending() == 4
    _, blocks, _, finish = await run(model, turn("a"))
    assert blocks == [{"type": "text", "text": "Scripted hello."}] and finish == "stop"
    _, blocks, _, finish = await run(model, turn("b", tools=[BASH]))
    assert blocks == [{"type": "reasoning", "text": "Thinking."}, {"type": "text", "text": "Running it."},
                      {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command": "date"}'}]
    assert finish == "tool_calls"
    with pytest.raises(RuntimeError, match="scripted failure"):
        await run(model, turn("c"))
    _, blocks, _, _ = await run(model, turn("d"))
    assert blocks == [{"type": "text", "text": "You sent 1 messages."}]
    _, blocks, _, _ = await run(model, turn("e"))
    assert blocks[0]["text"].startswith(OFFLINE_BANNER) and model.pending() == 0


async def test_scripts_are_kept_per_purpose() -> None:
    model = OfflineModel()
    model.queue("Scripted title", purpose="title")
    model.queue(ModelError("rate_limit", "scripted limit", status=429, retryable=True))
    _, blocks, _, _ = await run(model, turn("Fix the flaky login test please", purpose="title"))
    assert blocks == [{"type": "text", "text": "Scripted title"}]
    with pytest.raises(ModelError) as info:
        await run(model, turn("x"))
    assert info.value.kind == "rate_limit"


def test_bad_scripts_are_refused_when_queued() -> None:
    model = OfflineModel()
    with pytest.raises(TypeError, match="cannot script"):
        model.queue([{"type": "image"}])
    with pytest.raises(TypeError, match="scripted offline response"):
        model.queue(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="purpose"):
        model.queue("x", purpose="chat")  # type: ignore[arg-type]
    assert model.pending() == 0


async def test_title_is_short_and_deterministic() -> None:
    request = turn("fix the flaky @[login test](dsh-session:abc) in tests/auth.spec.ts, it fails often!",
                   purpose="title")
    _, blocks, _, _ = await run(OfflineModel(), request)
    title = blocks[0]["text"]
    assert title == "Fix the flaky login test in tests/auth.spec.ts, it fails…"
    assert len(title) <= 60  # a line of a list: cut at a word, never mid-word
    assert offline_title([user_message("   ")]) == "Offline session"
    assert offline_title([context([SESSION_A]), user_message("why?")]) == "Why"


async def test_compaction_summary_lists_requests_and_answers() -> None:
    messages = [
        user_message(checkpoint_content("- earlier work on X"), compaction_source("k1")),
        context([SESSION_A]),
        user_message("Add a --dry-run flag to migrate.py"),
        assistant_message([text_block("Let me look."),
                           {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}], MODEL),
        tool_result_message("c1", [text_block("ok")]),
        assistant_message([text_block("Added the flag; it prints pending migrations.")], MODEL),
        user_message("Now test it"),
    ]
    request = ModelRequest(messages, system="Summarise the conversation.", purpose="compaction")
    _, blocks, _, finish = await run(OfflineModel(), request)
    text = blocks[0]["text"]
    assert text.startswith(OFFLINE_BANNER) and finish == "stop"
    assert "## User requests\n1. Add a --dry-run flag to migrate.py\n2. Now test it" in text
    assert "## Assistant answers\n1. Let me look.\n2. Added the flag; it prints pending migrations." in text
    assert "## Tools used\n- bash: 1 call" in text
    assert "## Earlier summary\n- " in text and "- earlier work on X </compacted-summary>" in text
    assert "“Flaky login test race” (b3c1d7a2-5f0e-4c8a-9d61-2e7f40a18c55)" in text


async def test_deterministic_across_instances_and_streams_in_chunks() -> None:
    request = turn(context([SESSION_A]), "What happened there?\n/bash echo hi", tools=[BASH])
    first, _, _, _ = await run(OfflineModel(), request)
    second, _, _, _ = await run(OfflineModel(), request)
    assert first == second
    assert sum(isinstance(e, TextDelta) for e in first) > 3
    assert isinstance(first[-1], Finish) and isinstance(first[-2], Usage)


async def test_usage_estimates_chars_over_four() -> None:
    model = OfflineModel()
    model.queue("x" * 10)
    request = turn("hello")
    _, _, usage, _ = await run(model, request)
    chars = len("You are dsh.") + len(json.dumps(list(request.messages), ensure_ascii=False)) + len(json.dumps([]))
    assert usage == Usage(math.ceil(chars / 4), 3)


async def test_max_tokens_truncates_with_length_finish() -> None:
    model = OfflineModel()
    model.queue("word " * 100)
    _, blocks, _, finish = await run(model, turn("x", max_tokens=5))
    assert finish == "length" and len(blocks[0]["text"]) == 20


async def test_cancel_before_and_during_the_stream() -> None:
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(ModelError) as info:
        [e async for e in OfflineModel().stream(turn("x"), cancel)]
    assert info.value.kind == "cancelled"
    cancel = asyncio.Event()
    received = []
    with pytest.raises(ModelError) as info:
        async for event in OfflineModel().stream(turn("a long enough request to stream in pieces"), cancel):
            received.append(event)
            cancel.set()
    assert info.value.kind == "cancelled" and len(received) == 1


async def test_uses_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the offline model opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    await run(OfflineModel(), turn(context([SESSION_A]), "hi /bash ls", tools=[BASH], purpose="turn"))


def test_info() -> None:
    model = OfflineModel()
    assert (model.info.provider, model.info.model, model.info.context_window) == ("offline", "offline", 32_768)
    assert "OfflineModel" in repr(model)


def test_the_offline_model_takes_images_and_says_their_size() -> None:
    import base64

    model = OfflineModel()
    assert model.info.accepts_images
    image = {"type": "image", "artifact": "artifacts/a.png", "mediaType": "image/png", "width": 556, "height": 434,
             "bytes": 5, "tool": "python", "data": base64.b64encode(b"12345").decode()}
    call = {"type": "tool-call", "id": "c1", "name": "python", "arguments": "{}"}
    request = ModelRequest([
        {"role": "user", "content": [{"type": "text", "text": "plot"}]},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "isError": False,
                                      "content": [{"type": "text", "text": "<Figure>"}, image]}]},
    ])
    text = model.answer(request)[0]["text"]
    assert ("I received an image: PNG image, 556×434 pixels, 5 bytes (5 bytes arrived). I can't look at it; "
            "a model that takes images would.") in text
    assert model.answer(request) == model.answer(request)


async def test_the_boilerplate_is_said_on_the_first_answer_only() -> None:
    from dsh_jupyter.models.offline import SWITCH_NOTE, TOOLS_INTRO

    first_request = ModelRequest([user_message("hello")], tools=[BASH], system="s")
    _, blocks, _, _ = await run(OfflineModel(), first_request)
    first = blocks[0]["text"]
    assert TOOLS_INTRO in first and SWITCH_NOTE in first
    history = [user_message("hello"), assistant_message([text_block(first)], MODEL), user_message("and now?")]
    _, blocks, _, _ = await run(OfflineModel(), ModelRequest(history, tools=[BASH], system="s"))
    second = blocks[0]["text"]
    assert "and now?" in second and TOOLS_INTRO not in second and SWITCH_NOTE not in second
