"""Retained previews and spilled transcripts stay byte-identical to the ones recorded before the streamed
spill (``tests/fixtures/reference/spill-golden.json``, captured from main at e3421a4).

Every case prepares one reference (the reference harness's fixture logs, and generated sources with huge
messages, escapes, astral and lone-surrogate text) at several budgets and spill caps, and compares the
context message and the transcript (SHA-256, size, capped or not) with the recording. The transcript is
also rendered directly at small caps, so the "as many fragment lines as fit" path is covered.

Regenerate (only when a change of output is intended, and say so in the commit):
``PYTHONPATH=. python tests/test_references_golden.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from references_helpers import MemoryStore, append_assistant, append_checkpoint, append_user  # noqa: E402

from dsh_jupyter.query import SessionQuery  # noqa: E402
from dsh_jupyter.references import ReferenceTarget, SessionReferenceError, SessionReferenceResolver  # noqa: E402
from dsh_jupyter.references.bounded import BoundedProjection, bound_messages  # noqa: E402
from dsh_jupyter.references.spill import render_capped_transcript  # noqa: E402
from dsh_jupyter.session.messages import text_block  # noqa: E402
from dsh_jupyter.store import JsonlStore, encode_segment  # noqa: E402

FIXTURES = HERE / "fixtures" / "reference"
GOLDEN = FIXTURES / "spill-golden.json"
LOGS = ["plain", "compacted", "referencing", "torn", "corrupt"]
#: (per-source budget, spill cap) of each prepare() case.
SETTINGS = [(600, 16_384), (2_000, 16_384), (8_000, 16_384), (65_536, 1 << 20), (3_000, 8 << 20)]
#: Caps of the transcripts rendered directly (below the resolver's floor, to cut inside a message).
DIRECT_CAPS = [1_200, 2_500, 6_000, 40_000, 300_000, 5_000_000]
SPILL_PLACEHOLDER = "<spill-folder>"


def _text(rng: random.Random, size: int) -> str:
    """``size`` code points of prose mixed with escapes, tags, CJK, emoji and a URL password."""
    pieces = ["word ", "line\n", "tab\t", 'quote" ', "back\\slash ", "<tag> ", "\x00\x07\x1f", "界", "😀",
              "é", "https://user:hunter2@example.com/x ", "\u2028", "  "]
    out: list[str] = []
    length = 0
    while length < size:
        piece = rng.choice(pieces)
        out.append(piece)
        length += len(piece)
    return "".join(out)[:size]


def _generated(store: MemoryStore) -> list[str]:
    """Generated sources in ``store``; their ids."""
    rng = random.Random(23)
    ids = []
    log = store.new_log("gen-huge", cwd="/gen")
    append_user(log, "a first prompt " + _text(rng, 3_000))
    append_assistant(log, text_block("an answer " + _text(rng, 120_000)))
    append_user(log, "the huge prompt " + _text(rng, 2_400_000))  # beyond one measuring slice
    append_assistant(log, text_block("the last answer " + _text(rng, 90_000)))
    ids.append(log.header.id)
    log = store.new_log("gen-compacted", cwd="/gen")
    first = append_user(log, "old " + _text(rng, 50_000))
    last = append_assistant(log, text_block("old answer " + _text(rng, 50_000)))
    append_checkpoint(log, "<compacted-summary>" + _text(rng, 20_000) + "</compacted-summary>", first.seq, last.seq)
    for turn in range(12):
        append_user(log, f"prompt {turn} " + _text(rng, 2_000 + 900 * turn))
        append_assistant(log, text_block(f"answer {turn} " + _text(rng, 80_000 + 3_000 * turn)))
    ids.append(log.header.id)
    log = store.new_log("gen-surrogates", cwd="/gen")
    append_user(log, "lone \ud800 high and \udc00 low " + "x\udbff" * 40_000)
    append_assistant(log, text_block("pair \ud83d\ude00 joined " + _text(rng, 30_000) + "\ud800"))
    ids.append(log.header.id)
    return ids


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _prepare_case(resolver: SessionReferenceResolver, folder: Path, session_id: str) -> dict[str, Any]:
    shutil.rmtree(folder, ignore_errors=True)
    target = ReferenceTarget("golden-target", "/gen", folder)
    try:
        prepared = resolver.prepare_sync(target, [], [{"sessionId": session_id}])
    except SessionReferenceError as exc:
        return {"error": exc.code}
    assert prepared.additional_context is not None
    context = prepared.additional_context["content"][0]["text"].replace(str(folder.resolve()), SPILL_PLACEHOLDER)
    entry: dict[str, Any] = {"context": _digest(context), "contextBytes": len(context.encode("utf-8"))}
    for index, spill in sorted(prepared.spills.items()):
        entry[f"spill{index}"] = spill.to_json() | {"locator": None}
        if spill.path is not None:
            entry[f"spill{index}Sha256"] = hashlib.sha256(spill.path.read_bytes()).hexdigest()
    return entry


def _fixture_store(root: Path) -> tuple[JsonlStore, dict[str, str]]:
    ids = {}
    for name in LOGS:
        header = json.loads((FIXTURES / f"{name}.jsonl").read_text(encoding="utf-8").split("\n", 1)[0])
        session_id = header["id"]
        path = root / encode_segment(session_id) / "session.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / f"{name}.jsonl", path)
        ids[name] = session_id
    return JsonlStore(root), ids


def compute(work: Path) -> dict[str, Any]:
    """Every case's outcome (what the golden file records)."""
    results: dict[str, Any] = {}
    store, ids = _fixture_store(work / "store")
    memory = MemoryStore(work / "memory")
    generated = _generated(memory)
    sources: list[tuple[str, Any, str]] = [(name, store, session_id) for name, session_id in ids.items()]
    sources += [(session_id, memory, session_id) for session_id in generated]
    for name, source_store, session_id in sources:
        for budget, cap in SETTINGS:
            resolver = SessionReferenceResolver(SessionQuery(source_store), max_reference_bytes=budget,
                                                max_spill_bytes=cap)
            results[f"prepare {name} budget={budget} cap={cap}"] = _prepare_case(resolver, work / "spill", session_id)
    for session_id in generated:
        for cap in DIRECT_CAPS:
            projection = BoundedProjection(session_id, "/gen", 1, 1, budget=65_536, spill_bytes=cap)
            bound_messages(_messages(memory, session_id), projection)
            content, capped = render_capped_transcript(projection, "label " + session_id, cap)
            results[f"render {session_id} cap={cap}"] = {"sha256": _digest(content), "capped": capped,
                                                          "bytes": len(content.encode("utf-8", "surrogatepass"))}
    return results


def _messages(store: MemoryStore, session_id: str) -> Iterator[Any]:
    from dsh_jupyter.session.projection import project_event

    for event in store.read_surface(session_id).events:
        message = project_event(event)
        if message is not None:
            yield message


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return compute(tmp_path_factory.mktemp("golden"))


def _golden() -> dict[str, Any]:
    if not GOLDEN.exists():  # being written
        return {}
    recorded: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return recorded


@pytest.mark.parametrize("case", sorted(_golden()))
def test_output_matches_the_recording(outcomes: dict[str, Any], case: str) -> None:
    assert outcomes[case] == _golden()[case]


def test_the_recording_covers_every_path() -> None:
    recorded = _golden()
    assert len(recorded) == len(LOGS) * len(SETTINGS) + 3 * (len(SETTINGS) + len(DIRECT_CAPS))
    spills = [v for k, v in recorded.items() if k.startswith("prepare") and "spill0" in v]
    assert any(s["spill0"].get("capped") for s in spills) and any(not s["spill0"].get("capped") for s in spills)
    renders = [v for k, v in recorded.items() if k.startswith("render")]
    assert any(r["capped"] for r in renders) and any(not r["capped"] for r in renders)


if __name__ == "__main__":
    import tempfile

    if "--write" not in sys.argv:
        raise SystemExit("usage: PYTHONPATH=. python tests/test_references_golden.py --write")
    with tempfile.TemporaryDirectory() as scratch:
        GOLDEN.write_text(json.dumps(compute(Path(scratch)), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
