"""Session logs shaped like real long agent sessions, for the reference benchmarks.

Where ``_logs.write_big_log`` is mostly tool output with one compaction near the end, these look like the
sessions people reference: every turn has a prompt, a first step whose assistant message holds a reasoning
block, a short preamble and a tool call, the tool's result, and a final answer of 80-120 kB (with its own
reasoning) streamed as packed chunk rows; a title now and then; and a compaction every ``compact_every_mb``
MiB whose checkpoint shadows everything before the last few messages. A reference to such a session projects
the latest checkpoint and the long answers after it, so its preview is cut and its full snapshot spilled.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

from _logs import _MODEL, _corpus, _Writer

from dsh_jupyter._json import dumpb
from dsh_jupyter.session import ReplaceOp, SessionHeader
from dsh_jupyter.session.messages import compaction_source, text_block, tool_result_message, user_message


def _streamed(out: _Writer, rng: random.Random, turn: int, step: int, text: str, piece: int) -> list[int]:
    pieces = [text[i : i + piece] for i in range(0, len(text), piece)] or [""]
    return out.packed("text-chunks", {"turn": turn, "step": step, "index": 1, "dt": [rng.randint(2, 30) for _ in
                                                                                       pieces[1:]],
                                      "texts": pieces}, len(pieces))


def _compact(out: _Writer, rng: random.Random, corpus: str, turn: int) -> int:
    nodes = out.fold.seqs[: len(out.fold) - 4]  # the last few messages stay
    cid = str(uuid.UUID(int=rng.getrandbits(128)))
    start = out.event("compaction/start", {"compactionId": cid, "turn": turn})
    at = rng.randrange(len(corpus) - 20_000)
    summary = "## Primary Request and Intent\n" + corpus[at : at + rng.randint(6_000, 16_000)]
    summ = out.event("compaction/summary", {
        "compactionId": cid, "summary": summary, "shadowedRange": {"start": nodes[0], "end": nodes[-1]},
        "shadowedSeqs": nodes, "provider": "deepseek-official", "model": "deepseek-v4-flash"})
    content = [text_block("Checkpoint written by compaction.\n\n<compacted-summary>"), text_block(summary),
               text_block("</compacted-summary>")]
    seq = out.event("user/message", user_message(content, compaction_source(cid)), op=ReplaceOp(nodes[0], nodes[-1]),
                    cited=[start, summ, *nodes])
    out.event("compaction/end", {"compactionId": cid, "turn": turn})
    return seq


def write_session_log(path: Path, *, size_mb: int, session_id: str, cwd: str, seed: int = 0,
                      compact_every_mb: int = 12) -> dict[str, Any]:
    """Write a log of about ``size_mb`` MiB shaped like a real session (see the module notes); facts about it."""
    rng = random.Random(seed)
    corpus = _corpus(rng, 3_000_000)
    target = size_mb * 1024 * 1024
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = SessionHeader(id=session_id, created_at=1_787_230_725_417 + seed, cwd=cwd)
    turn = 0
    compactions = 0
    answers = 0
    with open(path, "wb", buffering=4 * 1024 * 1024) as fh:
        header_line = dumpb(header.to_json()) + b"\n"
        fh.write(header_line)
        out = _Writer(fh, header.created_at)
        out.bytes = len(header_line)
        next_compaction = compact_every_mb * 1024 * 1024
        while out.bytes < target:
            turn += 1
            out.event("turn/start", {"turn": turn})
            if out.bytes >= next_compaction and len(out.fold) > 8:
                _compact(out, rng, corpus, turn)
                compactions += 1
                next_compaction += compact_every_mb * 1024 * 1024
            out.event("step/start", {"turn": turn, "step": 1})
            at = rng.randrange(len(corpus) - 4_000)
            text = f"Turn {turn}: " + corpus[at : at + rng.randint(200, 2_000)]
            prompt = out.event("user/message", user_message(text), op="append")
            if turn == 1 or turn % 25 == 0:
                out.title = {"title": f"Working on part {turn}", "messageSeqs": [prompt], "source": {"kind": "user"}}
                out.last_title_seq = out.event("session/title", out.title)
            out.event("request/context", {"provider": "deepseek-official", "model": "deepseek-v4-flash",
                                          "contextWindow": 1_000_000})
            at = rng.randrange(len(corpus) - 10_000)
            reasoning = corpus[at : at + rng.randint(2_000, 8_000)]
            preamble = corpus[at : at + rng.randint(60, 400)]
            call_id = f"call_{turn:05d}_{rng.getrandbits(32):08x}"
            arguments = f'{{"command":"pytest tests/test_part_{turn}.py -x","description":"Run the tests"}}'
            chunks = _streamed(out, rng, turn, 1, reasoning + preamble, 24)
            blocks = [{"type": "reasoning", "text": reasoning}, text_block(preamble),
                      {"type": "tool-call", "id": call_id, "name": "bash", "arguments": arguments}]
            out.event("assistant/message", {"turn": turn, "step": 1, "message": {
                "role": "assistant", "content": blocks, "source": _MODEL,
                "id": str(uuid.UUID(int=rng.getrandbits(128)))},
                "usage": {"inputTokens": 20_000 + turn, "outputTokens": 900}}, op="append", cited=chunks)
            call = out.event("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "bash",
                                           "arguments": arguments})
            size = int(min(200_000, rng.lognormvariate(9.9, 0.9)))  # median ~20 kB
            at = rng.randrange(len(corpus) - size)
            out.event("tool/result", {"turn": turn, "step": 1, "message": tool_result_message(
                call_id, [text_block(corpus[at : at + size] + "\n[exit code: 1]")])}, op="append", cited=[call])
            out.event("step/end", {"turn": turn, "step": 1})
            out.event("step/start", {"turn": turn, "step": 2})
            at = rng.randrange(len(corpus) - 130_000)
            thought = corpus[at : at + rng.randint(1_000, 4_000)]
            answer = corpus[at + 4_000 : at + 4_000 + rng.randint(80_000, 120_000)]
            answers += 1
            chunks = _streamed(out, rng, turn, 2, thought + answer, 32)
            out.event("assistant/message", {"turn": turn, "step": 2, "message": {
                "role": "assistant", "content": [{"type": "reasoning", "text": thought}, text_block(answer)],
                "source": _MODEL, "id": str(uuid.UUID(int=rng.getrandbits(128)))},
                "usage": {"inputTokens": 30_000 + turn, "outputTokens": 25_000}}, op="append", cited=chunks)
            out.event("step/end", {"turn": turn, "step": 2})
            out.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return {"path": str(path), "session_id": session_id, "bytes": out.bytes, "lines": out.lines + 1,
            "turns": turn, "compactions": compactions, "answers": answers, "surface": len(out.fold)}
