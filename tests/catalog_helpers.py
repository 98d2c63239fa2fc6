"""Shared helpers for the catalog tests: generated stores, title changes, and the scanning path to compare with."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.references.candidates import list_candidates
from dsh_jupyter.session import SessionHeader, SessionLog, SessionNotFoundError, SurfaceSnapshot
from dsh_jupyter.session.messages import assistant_message, text_block, tool_result_message, user_message
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.store.base import SessionLocation, SessionStore, SessionWriter

MODEL = {"kind": "model", "provider": "offline", "model": "tiny"}
BASE = 1_787_130_725_417
WORDS = ("pandas", "numpy", "plot", "merge", "dataframe", "kernel", "notebook", "regression", "cluster", "tensor",
         "Ünïcödé", "数据", "café", "résumé", "groupby", "parquet")


def add_turn(log: SessionLog, turn: int, *, prompt: str | None = None, answer: str | None = None,
             tool_output: str = "tool output SECRETTOOL", reasoning: str = "thinking SECRETREASON") -> None:
    """One realistic turn: prompt, assistant with reasoning and a tool call, tool result, final answer."""
    log.append("turn/start", {"turn": turn})
    log.append("step/start", {"turn": turn, "step": 1})
    log.append("user/message", user_message(prompt if prompt is not None else f"prompt {turn}"))
    call = f"call-{turn}"
    blocks = [{"type": "reasoning", "text": reasoning}, text_block("Let me look."),
              {"type": "tool-call", "id": call, "name": "bash", "arguments": '{"command":"ls"}'}]
    log.append("assistant/message", {"turn": turn, "step": 1, "message": assistant_message(blocks, MODEL)})
    seq = log.append("tool/call", {"turn": turn, "step": 1, "callId": call, "name": "bash",
                                   "arguments": '{"command":"ls"}'}).seq
    log.append("tool/result", {"turn": turn, "step": 1,
                               "message": tool_result_message(call, [text_block(tool_output)])},
               source_event_seqs=[seq])
    log.append("step/end", {"turn": turn, "step": 1})
    log.append("assistant/message", {"turn": turn, "step": 2, "message": assistant_message(
        [text_block(answer if answer is not None else f"answer {turn}")], MODEL)})
    log.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def title_event(log: SessionLog, title: Any) -> None:
    log.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": "user"}})


def make_session(store: JsonlStore, session_id: str, *, cwd: str | None = "/work/a", created_at: int = BASE,
                 turns: int = 1, title: str | None = None, prompt: str | None = None) -> SessionLog:
    """A closed session written through the real JSONL writer."""
    header = SessionHeader(session_id, created_at, cwd)
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        for turn in range(1, turns + 1):
            add_turn(log, turn, prompt=prompt if turn == 1 else None)
            if turn == 1 and title is not None:
                title_event(log, title)
            writer.flush()
    return log


def set_title(store: JsonlStore, session_id: str, title: Any) -> None:
    """Append a title to a stored session the way a host does (open, append, close)."""
    log, writer = store.open(session_id)
    with writer:
        title_event(log, title)


def append_turns(store: JsonlStore, session_id: str, turns: int, *, prompt: str | None = None) -> None:
    log, writer = store.open(session_id)
    with writer:
        first = sum(1 for e in log.events if e.type == "turn/start") + 1
        for turn in range(first, first + turns):
            add_turn(log, turn, prompt=prompt)
            writer.flush()


def chat_session(store: JsonlStore, session_id: str, *, turns: int, size: int, first: str = "alphaword",
                 last: str = "omegaword", cwd: str | None = "/work/a", title: str | None = None,
                 tool_output: str = "") -> SessionLog:
    """A chat-heavy session: ``turns`` turns whose prompt and answer are ``size`` characters each (filler text;
    ``first`` is in the first prompt, ``last`` in the last answer); written through the real writer."""
    header = SessionHeader(session_id, BASE, cwd)
    log = SessionLog(header)
    filler = " ".join(WORDS[i % 10] for i in range(size // 7 + 1))[:size]
    with store.create(header) as writer:
        writer.attach(log)
        for turn in range(1, turns + 1):
            prompt = (f"{first} " if turn == 1 else "") + filler
            answer = filler + (f" {last}" if turn == turns else "")
            add_turn(log, turn, prompt=prompt, answer=answer, tool_output=tool_output or "tool output SECRETTOOL")
            if turn == 1 and title is not None:
                title_event(log, title)
        writer.flush()
    return log


def record_full_reads(monkeypatch: Any) -> list[tuple[str, str]]:
    """From now on, every full read of a log by the catalog's indexer, as (folder, thread name)."""
    from dsh_jupyter.catalog.logs import read_full

    reads: list[tuple[str, str]] = []

    def recording(path: str, folder: str, *args: Any, **kw: Any) -> Any:
        reads.append((folder, threading.current_thread().name))
        return read_full(path, folder, *args, **kw)

    monkeypatch.setattr("dsh_jupyter.catalog.indexer.read_full", recording)
    return reads


def generate_stores(base: Path, *, stores: int = 3, sessions: int = 12, seed: int = 0) -> list[JsonlStore]:
    """Stores with sessions of varied cwds (same, other, none), creation times (with ties) and titles."""
    rng = random.Random(seed)
    out = []
    for s in range(stores):
        store = JsonlStore(base / f"folder{s}" / ".dsh" / "sessions")
        for i in range(sessions):
            cwd = rng.choice(["/work/a", "/work/b", None, f"/work/{s}", "/Work/A"])
            title = rng.choice([None, f"Title {rng.choice(WORDS)} {i}", "", "Same title"])
            created = BASE + rng.randrange(0, 6) * 1000  # many ties: order falls back to the id
            sid = f"s{s}-{i:02d}-{rng.choice(WORDS)}"
            make_session(store, sid, cwd=cwd, created_at=created, title=title,
                         prompt=f"question about {rng.choice(WORDS)} and {rng.choice(WORDS)}")
        out.append(store)
    return out


class UnionStore(SessionStore):
    """Several JSONL stores seen as one, for the scanning path: a session id stored in more than one of
    them is taken from the copy whose log changed last (then the first store), as the catalog does."""

    def __init__(self, stores: list[JsonlStore]) -> None:
        self.stores = stores

    def _holder(self, session_id: str) -> JsonlStore:
        best: tuple[int, int] | None = None
        holder = None
        for index, store in enumerate(self.stores):
            try:
                mtime = os.stat(store.log_path(session_id)).st_mtime_ns
            except (OSError, ValueError):
                continue
            key = (-mtime, index)
            if best is None or key < best:
                best, holder = key, store
        if holder is None:
            raise SessionNotFoundError(session_id)
        return holder

    def list_headers(self) -> list[SessionHeader]:
        seen: dict[str, SessionHeader] = {}
        for store in self.stores:
            for header in store.list_headers():
                seen.setdefault(header.id, header)
        return list(seen.values())

    def read_title(self, session_id: str) -> dict[str, Any] | None:
        return self._holder(session_id).read_title(session_id)

    def read_surface(self, session_id: str, *, skip_data: Any = ()) -> SurfaceSnapshot:
        return self._holder(session_id).read_surface(session_id)

    def load(self, session_id: str) -> SessionLog:
        return self._holder(session_id).load(session_id)

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        return None

    def session_dir(self, header: SessionHeader) -> Path | None:
        return None

    def create(self, header: SessionHeader) -> SessionWriter:  # pragma: no cover - read-only view
        raise NotImplementedError("the union view is read-only")

    def open(self, session_id: str) -> tuple[SessionLog, SessionWriter]:  # pragma: no cover - read-only view
        raise NotImplementedError("the union view is read-only")

    def delete(self, session_id: str) -> None:  # pragma: no cover - read-only view
        raise NotImplementedError("the union view is read-only")


def scanned(stores: list[JsonlStore], target: ReferenceTarget, text: str = "", limit: int = 50,
            live: Sequence[SessionLog] = ()) -> list[dict[str, Any]]:
    """The log-scanning path (``list_candidates`` over a plain ``SessionQuery``) as JSON."""
    query = SessionQuery(UnionStore(stores))
    for log in live:
        query.register_live(log)
    return [c.to_json() for c in list_candidates(query, target, text, limit)]


def cataloged(catalog: Any, stores: list[JsonlStore], target: ReferenceTarget, text: str = "", limit: int = 50,
              live: Sequence[SessionLog] = (), body: bool = False) -> list[dict[str, Any]]:
    """The catalog path (``list_candidates`` with the catalog as source) as JSON, without the notebook a host
    registered (only the catalog knows it: scanning the logs cannot)."""
    query = SessionQuery(stores[0])
    for log in live:
        query.register_live(log)
    found = [c.to_json() for c in list_candidates(query, target, text, limit, source=catalog, body=body)]
    return [{k: v for k, v in c.items() if k != "notebook"} for c in found]


QUERIES = ("", "s1", "WORK/A", "title", "same title", "pandas", "数据", "é", "-0", "zzz-no-match", "/")
