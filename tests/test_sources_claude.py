"""Claude Code transcripts as a read-only source (real-format fixtures in tests/fixtures/peers/claude)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sources_helpers import conversation, copied_peer

from dsh_jupyter.references.uri import decode_session_reference_uri, encode_session_reference_uri
from dsh_jupyter.session import SessionNotFoundError
from dsh_jupyter.sources import ForeignSessions, split_id, tool_of
from dsh_jupyter.sources.claude import ClaudeCodeSource

MAIN = "7f3c2a1e-5b4d-4c8e-9a6f-2d1e0b9c8a71"
OTHER = "0b1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e"


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return copied_peer("claude", tmp_path)


def sessions(root: Path, tmp_path: Path) -> ForeignSessions:
    return ForeignSessions([ClaudeCodeSource(root)], index_path=tmp_path / "index.json")


def test_lists_transcripts_with_their_own_titles_or_first_prompt(root: Path, tmp_path: Path) -> None:
    headers = sessions(root, tmp_path).headers()
    assert [h.session_id for h in headers] == [f"claude-code:{MAIN}", f"claude-code:{OTHER}"]  # newest first
    main, other = headers
    assert (main.tool, main.cwd, main.title) == ("Claude Code", "/home/ana/analysis", "Q3 regional sales")
    assert main.created_at == 1796029200000  # 2026-11-30T09:00:00Z
    assert other.title == "Explain the churn model"  # no title line: the first prompt
    assert not any("subagents" in h.path for h in headers)  # side files are not transcripts


def test_title_ranks_custom_over_ai_over_summary(root: Path, tmp_path: Path) -> None:
    path = root / "projects" / "-home-ana-other" / f"{OTHER}.jsonl"
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "summary", "summary": "From a summary", "leafUuid": "x2"}) + "\n")
    found = sessions(root, tmp_path)
    assert found.header(f"claude-code:{OTHER}").title == "From a summary"  # type: ignore[union-attr]
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "ai-title", "aiTitle": "From the model"}) + "\n")
        fh.write(json.dumps({"type": "summary", "summary": "A later summary"}) + "\n")
    assert found.header(f"claude-code:{OTHER}").title == "From the model"  # type: ignore[union-attr]


def test_live_branch_after_compaction_only(root: Path, tmp_path: Path) -> None:
    messages = conversation(sessions(root, tmp_path), f"claude-code:{MAIN}")
    assert messages == [
        ("user", True, "This session is being continued from a previous conversation that ran out of context. "
                       "Summary: the user asked which region grew fastest in sales.csv; North grew from 1 to 2."),
        ("user", False, "Now plot it as a bar chart."),
        ("assistant", False, "Here is the bar chart of growth by region."),
    ]


def test_never_tool_output_thinking_meta_sidechains_dead_branches_or_torn_lines(root: Path, tmp_path: Path) -> None:
    path = root / "projects" / "-home-ana-analysis" / f"{MAIN}.jsonl"
    # Without the compaction, the whole live chain shows: still none of what must stay behind.
    lines = [line for line in path.read_text().split("\n")
             if '"compact_boundary"' not in line and '"isCompactSummary"' not in line]
    path.write_text("\n".join(line.replace('"parentUuid":"c1"', '"parentUuid":"u4"') for line in lines))
    found = sessions(root, tmp_path)
    text = json.dumps(conversation(found, f"claude-code:{MAIN}"))
    for secret in ("TOOL-OUTPUT-SECRET", "SECRET-THINKING", "META-SECRET", "SIDECHAIN-SECRET", "DEAD-BRANCH",
                   "TORN-SECRET", "DAMAGED", "/compact"):
        assert secret not in text
    messages = conversation(found, f"claude-code:{MAIN}")
    assert messages[0] == ("user", False, "Load sales.csv and tell me which region grew fastest.")
    # One API message written as several lines (thinking, text, tool use) is one answer.
    assert messages[1] == ("assistant", False, "I'll read the file first.")
    assert messages[2] == ("assistant", False, "North grew fastest: from 1 to 2.")
    assert messages[-1] == ("assistant", False, "Here is the bar chart of growth by region.")


def test_torn_tail_is_read_once_completed(root: Path, tmp_path: Path) -> None:
    path = root / "projects" / "-home-ana-other" / f"{OTHER}.jsonl"
    record = {"type": "user", "uuid": "x3", "parentUuid": "x2", "isSidechain": False, "sessionId": OTHER,
              "timestamp": "2026-11-29T08:01:00.000Z", "message": {"role": "user", "content": "And its AUC?"}}
    raw = json.dumps(record)
    with path.open("a") as fh:
        fh.write(raw[:30])
    found = sessions(root, tmp_path)
    assert [m[2] for m in conversation(found, f"claude-code:{OTHER}")][-1] == "It is a logistic regression."
    with path.open("a") as fh:
        fh.write(raw[30:] + "\n")
    assert [m[2] for m in conversation(found, f"claude-code:{OTHER}")][-1] == "And its AUC?"


def test_config_dir_env_and_ids(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(root))
    source = ClaudeCodeSource()
    assert source.root() == root
    assert source.locate(MAIN) is not None
    assert source.locate("../../etc/passwd") is None and source.locate("*") is None
    session_id = f"claude-code:{MAIN}"
    assert tool_of(session_id) == "Claude Code" and tool_of(MAIN) is None
    found = split_id(session_id)
    assert found is not None and found[1] == MAIN
    assert decode_session_reference_uri(encode_session_reference_uri(session_id)) == session_id


def test_unknown_id_and_unsafe_files(root: Path, tmp_path: Path) -> None:
    found = sessions(root, tmp_path)
    with pytest.raises(SessionNotFoundError):
        found.read_surface("claude-code:00000000-0000-0000-0000-000000000000")
    folder = root / "projects" / "-home-ana-other"
    os.symlink(folder / f"{OTHER}.jsonl", folder / "11111111-2222-3333-4444-555555555555.jsonl")
    os.mkfifo(folder / "22222222-2222-3333-4444-555555555555.jsonl")
    ids = [h.session_id for h in found.headers()]  # a link and a FIFO are never opened (and never hang)
    assert ids == [f"claude-code:{MAIN}", f"claude-code:{OTHER}"]


def test_index_skips_unchanged_and_resumes_appended(root: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    found = sessions(root, tmp_path)
    found.headers()
    assert (tmp_path / "index.json").exists()
    offsets: list[int] = []
    original = ClaudeCodeSource.scan_header

    def spy(self: ClaudeCodeSource, fh, state):  # type: ignore[no-untyped-def]
        offsets.append(state.offset)
        return original(self, fh, state)

    monkeypatch.setattr(ClaudeCodeSource, "scan_header", spy)
    fresh = sessions(root, tmp_path)  # a new process: the saved index answers
    assert [h.title for h in fresh.headers()] == ["Q3 regional sales", "Explain the churn model"]
    assert offsets == []
    path = root / "projects" / "-home-ana-other" / f"{OTHER}.jsonl"
    size = path.stat().st_size
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "custom-title", "customTitle": "Churn, renamed"}) + "\n")
    assert fresh.header(f"claude-code:{OTHER}").title == "Churn, renamed"  # type: ignore[union-attr]
    assert offsets == [size]  # only the appended part was read
    path.write_text(path.read_text().split("\n", 1)[0] + "\n")  # shorter: scanned again from the start
    assert fresh.header(f"claude-code:{OTHER}").title == "Explain the churn model"  # type: ignore[union-attr]
    assert offsets[-1] == 0


def test_a_damaged_line_inside_the_live_chain_does_not_cut_it(root: Path, tmp_path: Path) -> None:
    path = root / "projects" / "-home-ana-other" / f"{OTHER}.jsonl"
    first, second = path.read_text().splitlines()
    record = {"type": "user", "uuid": "x3", "parentUuid": "x2", "isSidechain": False, "sessionId": OTHER,
              "timestamp": "2026-11-29T08:01:00.000Z", "message": {"role": "user", "content": "And its AUC?"}}
    path.write_text("\n".join([first, second[:40] + "#damaged", json.dumps(record)]) + "\n")
    assert [m[2] for m in conversation(sessions(root, tmp_path), f"claude-code:{OTHER}")] == [
        "Explain the churn model", "And its AUC?"]
