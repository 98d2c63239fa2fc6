"""Synthetic but realistic session logs for benchmarks, in our exact on-disk format.

A turn looks like what the agent writes: prompt, request context, a streamed preamble (packed chunk rows),
an assistant message with a tool call, the tool's (large) output, a streamed answer; a title now and
then; and, near the end, one compaction whose checkpoint shadows most earlier messages.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

from dsh_jupyter._json import dumpb
from dsh_jupyter.session import Event, ReplaceOp, SessionHeader, SurfaceFold
from dsh_jupyter.session.messages import compaction_source, text_block, tool_result_message, user_message

_WORDS = ["def", "class", "return", "import", "self", "value", "result", "error", "test", "file", "path",
          "line", "data", "json", "async", "await", "the", "a", "of", "to", "in", "is", "for", "on", "with",
          "that", "this", "it", "as", "be", "by", "from", "or", "not", "are", "was", "were", "have", "has",
          "数据", "测试", "文件", "δοκιμή", "ошибка", "naïve", "café", "😀", "🚀"]
_SYMBOLS = ['"', "\\", "\t", "{", "}", "(", ")", ":", ",", "=", "<", ">", "/", "'"]
_MODEL = {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}


def _corpus(rng: random.Random, size: int) -> str:
    """About ``size`` characters of code/log-like text with the characters JSON must escape."""
    parts: list[str] = []
    length = 0
    while length < size:
        line = " ".join(rng.choices(_WORDS, k=rng.randint(3, 14)))
        if rng.random() < 0.3:
            line += "".join(rng.choices(_SYMBOLS, k=rng.randint(1, 6)))
        parts.append(line)
        length += len(line) + 1
    return "\n".join(parts)


class _Writer:
    def __init__(self, fh: Any, start_time: int) -> None:
        self.fh = fh
        self.seq = 0
        self.time = start_time
        self.bytes = 0
        self.lines = 0
        self.fold = SurfaceFold()
        self.title: dict[str, Any] | None = None
        self.last_title_seq: int | None = None

    def _line(self, data: bytes) -> None:
        self.fh.write(data)
        self.fh.write(b"\n")
        self.bytes += len(data) + 1
        self.lines += 1

    def event(self, kind: str, data: Any, *, op: Any = None, cited: list[int] | None = None) -> int:
        self.time += 3
        event = Event(kind, self.seq, self.time, data, op, tuple(cited) if cited is not None else None)
        if op is not None:
            self.fold.apply(event.seq, op, event.source_event_seqs)
        self._line(dumpb(event.to_json()))
        self.seq += 1
        return event.seq

    def packed(self, kind: str, data: dict[str, Any], count: int) -> list[int]:
        """One packed chunk row of ``count`` members (``dt`` has ``count - 1`` entries)."""
        self.time += 3
        record = {"type": kind, "seq0": self.seq, "time0": self.time, "data": data}
        self._line(dumpb(record))
        seqs = list(range(self.seq, self.seq + count))
        self.seq += count
        self.time += sum(data["dt"])
        return seqs


def write_big_log(path: Path, *, size_mb: int, session_id: str, cwd: str, compact_near_end: bool = True,
                  seed: int = 0) -> dict:
    """Write a log of about ``size_mb`` MiB to ``path`` (parents created); returns facts about it.

    The returned dict has ``path``, ``bytes``, ``lines``, ``events``, ``turns``, ``last_seq``,
    ``surface_seqs`` (the current surface after folding), ``title`` (latest title data),
    ``compaction_seq`` (the checkpoint's seq or ``None``) and ``shadowed`` (how many nodes it replaced).
    """
    rng = random.Random(seed)
    corpus = _corpus(rng, 2_000_000)
    target = size_mb * 1024 * 1024
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = SessionHeader(id=session_id, created_at=1_787_130_725_417 + seed, cwd=cwd)
    compaction_seq: int | None = None
    shadowed = 0
    turn = 0
    with open(path, "wb", buffering=4 * 1024 * 1024) as fh:
        header_line = dumpb(header.to_json()) + b"\n"
        fh.write(header_line)
        out = _Writer(fh, header.created_at)
        out.bytes = len(header_line)
        while out.bytes < target:
            turn += 1
            out.event("turn/start", {"turn": turn})
            if compact_near_end and compaction_seq is None and out.bytes >= target * 0.93 and len(out.fold) > 8:
                nodes = out.fold.seqs[: len(out.fold) - 6]  # keep the last few messages
                cid = str(uuid.UUID(int=rng.getrandbits(128)))
                start = out.event("compaction/start", {"compactionId": cid, "turn": turn})
                summary = "## Primary Request and Intent\n" + corpus[:1500]
                summ = out.event("compaction/summary", {
                    "compactionId": cid, "summary": summary, "shadowedRange": {"start": nodes[0], "end": nodes[-1]},
                    "shadowedSeqs": nodes, "provider": "deepseek-official", "model": "deepseek-v4-flash"})
                content = [text_block("Checkpoint written by compaction.\n\n<compacted-summary>"),
                           text_block(summary), text_block("</compacted-summary>")]
                compaction_seq = out.event("user/message", user_message(content, compaction_source(cid)),
                                           op=ReplaceOp(nodes[0], nodes[-1]), cited=[start, summ, *nodes])
                shadowed = len(nodes)
                out.event("compaction/end", {"compactionId": cid, "turn": turn})
            out.event("step/start", {"turn": turn, "step": 1})
            at = rng.randrange(len(corpus) - 2000)
            prompt = out.event("user/message", user_message(f"Turn {turn}: " + corpus[at : at + rng.randint(80, 600)]),
                               op="append")
            if turn == 1 or turn % 40 == 0:
                out.title = {"title": f"Investigating issue {turn}", "messageSeqs": [prompt],
                             "source": {"kind": "fallback"} if turn == 1 else {"kind": "user"}}
                out.last_title_seq = out.event("session/title", out.title)
            out.event("request/context", {"provider": "deepseek-official", "model": "deepseek-v4-flash",
                                          "contextWindow": 1_000_000})
            preamble = corpus[at : at + rng.randint(40, 300)]
            pieces = [preamble[i : i + 12] for i in range(0, len(preamble), 12)] or [""]
            chunk_seqs = out.packed("text-chunks", {"turn": turn, "step": 1, "index": 0,
                                                    "dt": [rng.randint(5, 40) for _ in pieces[1:]],
                                                    "texts": pieces}, len(pieces))
            call_id = f"call_{turn:05d}_{rng.getrandbits(32):08x}"
            arguments = f'{{"command":"cat src/module_{turn}.py","description":"Read the module"}}'
            args = [arguments[i : i + 10] for i in range(0, len(arguments), 10)]
            chunk_seqs += out.packed("tool-call-chunks", {"turn": turn, "step": 1, "index": 1,
                                                          "dt": [rng.randint(5, 40) for _ in args[1:]],
                                                          "id": call_id, "name": "bash", "args": args}, len(args))
            blocks = [text_block(preamble),
                      {"type": "tool-call", "id": call_id, "name": "bash", "arguments": arguments}]
            out.event("assistant/message", {"turn": turn, "step": 1, "message": {
                "role": "assistant", "content": blocks, "source": _MODEL,
                "id": str(uuid.UUID(int=rng.getrandbits(128)))},
                "usage": {"inputTokens": 1000 + turn, "outputTokens": 50}}, op="append", cited=chunk_seqs)
            call = out.event("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "bash",
                                           "arguments": arguments})
            size = int(min(400_000, rng.lognormvariate(10.6, 0.8)))  # median ~40 kB, mean ~55 kB
            at = rng.randrange(len(corpus) - size) if size < len(corpus) else 0
            output = corpus[at : at + size]
            out.event("tool/result", {"turn": turn, "step": 1, "message": tool_result_message(
                call_id, [text_block(output + "\n[exit code: 0]")])}, op="append", cited=[call])
            out.event("step/end", {"turn": turn, "step": 1})
            out.event("step/start", {"turn": turn, "step": 2})
            at = rng.randrange(len(corpus) - 2000)
            answer = corpus[at : at + rng.randint(200, 1500)]
            pieces = [answer[i : i + 14] for i in range(0, len(answer), 14)]
            chunk_seqs = out.packed("text-chunks", {"turn": turn, "step": 2, "index": 0,
                                                    "dt": [rng.randint(5, 40) for _ in pieces[1:]],
                                                    "texts": pieces}, len(pieces))
            out.event("assistant/message", {"turn": turn, "step": 2, "message": {
                "role": "assistant", "content": [text_block(answer)], "source": _MODEL,
                "id": str(uuid.UUID(int=rng.getrandbits(128)))}}, op="append", cited=chunk_seqs)
            out.event("step/end", {"turn": turn, "step": 2})
            out.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return {
        "path": str(path),
        "session_id": session_id,
        "bytes": out.bytes,
        "lines": out.lines + 1,
        "events": out.seq,
        "turns": turn,
        "last_seq": out.seq - 1,
        "surface_seqs": out.fold.seqs,
        "title": out.title,
        "title_seq": out.last_title_seq,
        "compaction_seq": compaction_seq,
        "shadowed": shadowed,
    }


def write_chat_log(path: Path, *, size_mb: int, session_id: str, cwd: str, seed: int = 0) -> dict:
    """A chat-heavy log of about ``size_mb`` MiB: long prompts and long streamed answers, no tools.

    Nearly every byte is conversation a reference projects (the answers also stream as packed chunk
    rows, as the agent writes them). Returns ``path``, ``bytes``, ``lines``, ``events``, ``turns``,
    ``last_seq``, ``messages`` (surface messages) and ``text_bytes`` (their UTF-8 text).
    """
    rng = random.Random(seed)
    corpus = _corpus(rng, 2_000_000)
    target = size_mb * 1024 * 1024
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = SessionHeader(id=session_id, created_at=1_787_130_725_417 + seed, cwd=cwd)
    turn = 0
    text_bytes = 0
    with open(path, "wb", buffering=4 * 1024 * 1024) as fh:
        header_line = dumpb(header.to_json()) + b"\n"
        fh.write(header_line)
        out = _Writer(fh, header.created_at)
        out.bytes = len(header_line)
        while out.bytes < target:
            turn += 1
            out.event("turn/start", {"turn": turn})
            out.event("step/start", {"turn": turn, "step": 1})
            at = rng.randrange(len(corpus) - 20_000)
            length = int(min(16_000, rng.lognormvariate(7.3, 0.9)))
            prompt = f"Turn {turn}: " + corpus[at : at + length]
            out.event("user/message", user_message(prompt), op="append")
            if turn == 1:
                out.title = {"title": "A long conversation", "messageSeqs": [out.seq - 1],
                             "source": {"kind": "user"}}
                out.event("session/title", out.title)
            at = rng.randrange(len(corpus) - 40_000)
            answer = corpus[at : at + int(min(32_000, rng.lognormvariate(8.4, 0.7)))]
            pieces = [answer[i : i + 64] for i in range(0, len(answer), 64)] or [""]
            chunk_seqs = out.packed("text-chunks", {"turn": turn, "step": 1, "index": 0,
                                                    "dt": [rng.randint(5, 40) for _ in pieces[1:]],
                                                    "texts": pieces}, len(pieces))
            out.event("assistant/message", {"turn": turn, "step": 1, "message": {
                "role": "assistant", "content": [text_block(answer)], "source": _MODEL,
                "id": str(uuid.UUID(int=rng.getrandbits(128)))}}, op="append", cited=chunk_seqs)
            text_bytes += len(prompt.encode()) + len(answer.encode())
            out.event("step/end", {"turn": turn, "step": 1})
            out.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return {"path": str(path), "session_id": session_id, "bytes": out.bytes, "lines": out.lines + 1,
            "events": out.seq, "turns": turn, "last_seq": out.seq - 1, "messages": len(out.fold),
            "text_bytes": text_bytes}


def write_single_message_log(path: Path, *, size_mb: int, session_id: str, cwd: str, seed: int = 0) -> dict:
    """A log whose one prompt is a single ``size_mb`` MiB message (one line), answered briefly."""
    rng = random.Random(seed)
    corpus = _corpus(rng, 2_000_000)
    parts: list[str] = []
    size = 0
    while size < size_mb * 1024 * 1024:
        at = rng.randrange(len(corpus) - 100_000)
        piece = corpus[at : at + 100_000]
        parts.append(piece)
        size += len(piece.encode())
    prompt = "".join(parts)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = SessionHeader(id=session_id, created_at=1_787_130_725_417 + seed, cwd=cwd)
    with open(path, "wb", buffering=4 * 1024 * 1024) as fh:
        header_line = dumpb(header.to_json()) + b"\n"
        fh.write(header_line)
        out = _Writer(fh, header.created_at)
        out.bytes = len(header_line)
        out.event("turn/start", {"turn": 1})
        out.event("step/start", {"turn": 1, "step": 1})
        out.event("user/message", user_message(prompt), op="append")
        out.event("assistant/message", {"turn": 1, "step": 1, "message": {
            "role": "assistant", "content": [text_block("Read it.")], "source": _MODEL,
            "id": str(uuid.UUID(int=rng.getrandbits(128)))}}, op="append")
        out.event("step/end", {"turn": 1, "step": 1})
        out.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return {"path": str(path), "session_id": session_id, "bytes": out.bytes, "lines": out.lines + 1,
            "events": out.seq, "last_seq": out.seq - 1, "messages": 2, "text_bytes": size + len("Read it.")}


def write_session_log(path: Path, *, size_mb: float, session_id: str, cwd: str, seed: int = 0,
                      compact_every: int = 100) -> dict:
    """A log shaped like a real agent session of about ``size_mb`` MiB.

    Each turn has one to three tool steps and a final answer. Every step streams its reasoning and text as
    packed chunk rows; tool calls stream their arguments; tool output is log-normal (median ~16 kB); one
    answer in six is long (80-120 kB, streamed too). Every ``compact_every`` turns a compaction replaces
    all but the last few surface messages, so most surface lines of the log are shadowed and only the
    latest checkpoint's lineage and what followed it survive. Returns ``path``, ``bytes``, ``lines``,
    ``events``, ``turns``, ``last_seq``, ``surface_seqs``, ``title``, ``compactions`` and ``surface_lines``
    (lines holding a surface event, shadowed or not).
    """
    rng = random.Random(seed)
    corpus = _corpus(rng, 2_000_000)
    target = int(size_mb * 1024 * 1024)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = SessionHeader(id=session_id, created_at=1_787_130_725_417 + seed, cwd=cwd)
    turn = compactions = surface_lines = 0

    def text(low: int, high: int) -> str:
        size = rng.randint(low, high)
        at = rng.randrange(len(corpus) - size)
        return corpus[at : at + size]

    with open(path, "wb", buffering=4 * 1024 * 1024) as fh:
        header_line = dumpb(header.to_json()) + b"\n"
        fh.write(header_line)
        out = _Writer(fh, header.created_at)
        out.bytes = len(header_line)

        def streamed(kind: str, turn: int, step: int, index: int, body: str, piece: int) -> list[int]:
            pieces = [body[i : i + piece] for i in range(0, len(body), piece)] or [""]
            return out.packed(kind, {"turn": turn, "step": step, "index": index,
                                     "dt": [rng.randint(5, 40) for _ in pieces[1:]], "texts": pieces}, len(pieces))

        while out.bytes < target:
            turn += 1
            out.event("turn/start", {"turn": turn})
            if turn % compact_every == 0 and len(out.fold) > 8:
                nodes = out.fold.seqs[: len(out.fold) - 4]
                cid = str(uuid.UUID(int=rng.getrandbits(128)))
                start = out.event("compaction/start", {"compactionId": cid, "turn": turn})
                summary = "## Primary Request and Intent\n" + text(2000, 6000)
                summ = out.event("compaction/summary", {
                    "compactionId": cid, "summary": summary, "shadowedRange": {"start": nodes[0], "end": nodes[-1]},
                    "shadowedSeqs": nodes, "provider": "deepseek-official", "model": "deepseek-v4-flash"})
                content = [text_block("Checkpoint written by compaction.\n\n<compacted-summary>"),
                           text_block(summary), text_block("</compacted-summary>")]
                out.event("user/message", user_message(content, compaction_source(cid)),
                          op=ReplaceOp(nodes[0], nodes[-1]), cited=[start, summ, *nodes])
                surface_lines += 1
                compactions += 1
                out.event("compaction/end", {"compactionId": cid, "turn": turn})
            out.event("step/start", {"turn": turn, "step": 1})
            prompt = out.event("user/message", user_message(f"Turn {turn}: " + text(60, 1200)), op="append")
            surface_lines += 1
            if turn == 1 or turn % 25 == 0:
                out.title = {"title": f"Investigating issue {turn}", "messageSeqs": [prompt],
                             "source": {"kind": "fallback"} if turn == 1 else {"kind": "user"}}
                out.last_title_seq = out.event("session/title", out.title)
            tools = rng.randint(1, 3)
            for step in range(1, tools + 2):
                if step > 1:
                    out.event("step/start", {"turn": turn, "step": step})
                out.event("request/context", {"provider": "deepseek-official", "model": "deepseek-v4-flash",
                                              "contextWindow": 1_000_000, "inputTokens": 20_000 + 300 * turn})
                thinking = text(300, 4000)
                cited = streamed("reasoning-chunks", turn, step, 0, thinking, 24)
                final = step == tools + 1
                reply = text(80_000, 120_000) if final and rng.random() < 1 / 6 else text(100, 2500 if final else 400)
                cited += streamed("text-chunks", turn, step, 1, reply, 16)
                blocks: list[dict[str, Any]] = [{"type": "reasoning", "text": thinking}, text_block(reply)]
                call_id = f"call_{turn:05d}_{step}_{rng.getrandbits(32):08x}"
                arguments = f'{{"command":"sed -n 1,{rng.randint(50, 400)}p src/module_{rng.randrange(900)}.py"}}'
                if not final:
                    args = [arguments[i : i + 10] for i in range(0, len(arguments), 10)]
                    cited += out.packed("tool-call-chunks", {"turn": turn, "step": step, "index": 2,
                                                             "dt": [rng.randint(5, 40) for _ in args[1:]],
                                                             "id": call_id, "name": "bash", "args": args}, len(args))
                    blocks.append({"type": "tool-call", "id": call_id, "name": "bash", "arguments": arguments})
                out.event("assistant/message", {"turn": turn, "step": step, "message": {
                    "role": "assistant", "content": blocks, "source": _MODEL,
                    "id": str(uuid.UUID(int=rng.getrandbits(128)))},
                    "usage": {"inputTokens": 20_000 + 300 * turn, "outputTokens": 400}}, op="append", cited=cited)
                surface_lines += 1
                if not final:
                    call = out.event("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "bash",
                                                   "arguments": arguments})
                    size = int(min(200_000, rng.lognormvariate(9.7, 0.9)))
                    output = text(size, size) if size < len(corpus) - 1 else corpus[:size]
                    out.event("tool/result", {"turn": turn, "step": step, "message": tool_result_message(
                        call_id, [text_block(output + "\n[exit code: 0]")])}, op="append", cited=[call])
                    surface_lines += 1
                out.event("step/end", {"turn": turn, "step": step})
            out.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return {"path": str(path), "session_id": session_id, "bytes": out.bytes, "lines": out.lines + 1,
            "events": out.seq, "turns": turn, "last_seq": out.seq - 1, "surface_seqs": out.fold.seqs,
            "title": out.title, "title_seq": out.last_title_seq, "compactions": compactions,
            "surface_lines": surface_lines}
