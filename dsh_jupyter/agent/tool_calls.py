"""One tool call inside a turn: hooks and approval first, then the tool on its execution, its images saved as
artifacts, and its result (or refusal, or "interrupted") written to the log."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..images import result_blocks
from ..session.events import TOOL_OUTCOME_UNKNOWN, TOOL_RESULT
from ..session.messages import ImageBlock, TextBlock, text_block, tool_result_message
from ..tools.base import ToolExecution, ToolOutput, parse_arguments
from . import events as ev
from .approvals import ApprovalDecision, ApprovalRequest, describe_call, quoted_reason
from .state import AgentState, Interrupted


class ToolCalls(AgentState):
    """The agent's tool calls (mixed into :class:`~.loop.Agent`)."""

    def execution(self, call_id: str, *, background: bool = False) -> ToolExecution:
        """The context one tool call runs with (also used by hosts running tools themselves)."""
        header = self.header
        store = self.store
        return ToolExecution.create(
            call_id, header.cwd or ".", header=header,
            locate=(lambda: store.locate(header)) if store is not None else None,
            session_dir=store.session_dir(header) if store is not None else None,
            cancel=self._tool_cancel, background=background,
        )

    def _describe(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
        """What an approval question shows: the tool's own description of the call, else the generic one."""
        tool = self.tools.get(name)
        try:
            described = tool.describe(arguments) if tool is not None else None
        except Exception:  # a question is still asked, with the generic description
            described = None
        return described or describe_call(name, arguments)

    async def _run_tool(self, turn: int, call: dict[str, Any]) -> ToolOutput:
        name, arguments = call["name"], call["arguments"]
        self._emit(ev.ToolStarted(turn, call["id"], name, arguments))
        gate = self._gate()
        parsed = parse_arguments(arguments)
        tool_input = parsed if isinstance(parsed, dict) else {}
        shown, language = self._describe(name, tool_input if isinstance(parsed, dict) else {"arguments": arguments})
        request = ApprovalRequest(name, call["id"], tool_input, shown, language)
        hook_verdict = None
        if gate is not None:
            answer = await gate.pre_tool(turn, name, tool_input, call["id"])
            if answer.blocked:
                denied = ApprovalDecision(False, "hook", reason=answer.reason)
                why = quoted_reason(answer.reason or "a hook refused it")
                return self._refuse(turn, call, request, denied, f"The tool call was not run: {why}")
            hook_verdict = answer.verdict
            if answer.verdict == "ask" and answer.reason:
                request = ApprovalRequest(name, call["id"], tool_input, shown, language, reason=answer.reason)
        decision = await self._until_cancelled(
            self.approvals.decide(request, self.tools.effect(name), hook_verdict))
        record = decision.to_json(request, self.approvals.mode)
        if not decision.allowed:
            return self._refuse(turn, call, request, decision, decision.refusal(request))
        self._emit(ev.ApprovalDecided(turn, call["id"], name, record))
        execution = self.execution(call["id"])
        task = asyncio.ensure_future(self.tools.execute(name, arguments, execution))
        try:
            output = await self._until_cancelled(task)
        except Interrupted:
            execution.cancel.set()
            try:
                await asyncio.wait_for(task, timeout=5)
            except (TimeoutError, asyncio.CancelledError, Exception):
                task.cancel()
            raise
        output = replace(output, meta={**output.meta, "approval": record})
        self._emit(ev.ToolFinished(turn, call["id"], name, output.text, output.is_error))
        if gate is not None:
            answer = await gate.post_tool(turn, name, tool_input, call["id"], output.text)
            for context in answer.contexts:
                self.inject(context["content"], source=context["source"])
        return output

    def _refuse(self, turn: int, call: dict[str, Any], request: ApprovalRequest, decision: ApprovalDecision,
                text: str) -> ToolOutput:
        """A call that may not run: the refusal is its result (the model reads why; the log keeps who said so)."""
        record = decision.to_json(request, self.approvals.mode)
        self._emit(ev.ApprovalDecided(turn, call["id"], call["name"], record))
        output = ToolOutput(text, is_error=True, meta={"denied": True, "approval": record})
        self._emit(ev.ToolFinished(turn, call["id"], call["name"], output.text, True))
        return output

    async def _image_blocks(self, call: dict[str, Any], output: ToolOutput) -> list[TextBlock | ImageBlock]:
        """The blocks recording the output's images (downscaled and saved as artifacts off the event loop)."""
        if not output.images:
            return []
        save = self._save_artifact if self.store is not None else None
        return await asyncio.to_thread(result_blocks, output.images, save, call.get("name"))

    def _write_tool_result(self, turn: int, step: int, call: dict[str, Any], output: ToolOutput,
                           call_seq: int, images: Sequence[TextBlock | ImageBlock] = ()) -> None:
        message = tool_result_message(call["id"], [text_block(output.text), *images], is_error=output.is_error)
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if output.meta:
            data["meta"] = output.meta
        self.session.append(TOOL_RESULT, data, source_event_seqs=[call_seq])


    def _close_open_calls(self, turn: int, step: int, open_calls: dict[str, int], why: str) -> None:
        for call_id, call_seq in list(open_calls.items()):
            note = text_block(f"Tool call interrupted: {why}; no result was recorded.")
            message = tool_result_message(call_id, [note], is_error=True)
            self.session.append(TOOL_RESULT, {"turn": turn, "step": step, "message": message,
                                              "error": {"code": TOOL_OUTCOME_UNKNOWN}},
                                source_event_seqs=[call_seq])
            open_calls.pop(call_id)

