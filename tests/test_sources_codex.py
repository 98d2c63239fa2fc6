"""Codex rollouts as a read-only source (real-format fixtures in tests/fixtures/peers/codex)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sources_helpers import conversation, copied_peer

from dsh_jupyter.references.uri import decode_session_reference_uri, encode_session_reference_uri
from dsh_jupyter.sources import ForeignSessions, tool_of
from dsh_jupyter.sources.codex import CodexSource

MAIN = "019a8c1e-3f2b-7d4a-9c5e-6b7a8d9e0f12"
OLD = "019a0000-1111-7222-8333-444455556666"
MAIN_FILE = f"sessions/2026/11/30/rollout-2026-11-30T10-00-00-{MAIN}.jsonl"


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return copied_peer("codex", tmp_path)


def sessions(root: Path, tmp_path: Path) -> ForeignSessions:
    return ForeignSessions([CodexSource(root)], index_path=tmp_path / "index.json")


def test_lists_rollouts_with_thread_name_or_first_prompt(root: Path, tmp_path: Path) -> None:
    headers = sessions(root, tmp_path).headers()
    assert [h.session_id for h in headers] == [f"codex:{MAIN}", f"codex:{OLD}"]
    main, old = headers
    assert (main.tool, main.cwd, main.title, main.created_at) == ("Codex", "/home/ana/analysis", "Price outliers",
                                                                 1796032800000)
    assert old.title == "Summarise the logs folder"  # injected environment text is not a prompt


def test_compacted_replaces_history_with_its_checkpoint(root: Path, tmp_path: Path) -> None:
    messages = conversation(sessions(root, tmp_path), f"codex:{MAIN}")
    assert [(role, checkpoint) for role, checkpoint, _ in messages] == [
        ("user", False), ("user", True), ("user", False), ("assistant", False)]
    assert messages[0][2] == "Find the outliers in prices.parquet"  # kept by the compaction's replacement history
    assert "CONTEXT CHECKPOINT" in messages[1][2]
    assert messages[2:] == [("user", False, "Remove them and refit"),
                            ("assistant", False, "Refit done: R² rose from 0.71 to 0.83.")]
    assert "Three outliers" not in json.dumps(messages)  # replaced by the compaction


def test_compacted_without_replacement_history(root: Path, tmp_path: Path) -> None:
    path = root / MAIN_FILE
    lines = path.read_text().split("\n")
    for i, line in enumerate(lines):
        if '"type":"compacted"' in line:
            record = json.loads(line)
            del record["payload"]["replacement_history"]
            lines[i] = json.dumps(record)
    path.write_text("\n".join(lines))
    messages = conversation(sessions(root, tmp_path), f"codex:{MAIN}")
    assert messages[0][1] is True and messages[0][2].startswith("CONTEXT CHECKPOINT")
    assert len(messages) == 3


def test_never_tool_output_reasoning_instructions_or_torn_lines(root: Path, tmp_path: Path) -> None:
    path = root / MAIN_FILE
    # Without the compaction the whole conversation shows, and still none of what must stay behind.
    path.write_text("\n".join(line for line in path.read_text().split("\n") if '"type":"compacted"' not in line))
    messages = conversation(sessions(root, tmp_path), f"codex:{MAIN}")
    text = json.dumps(messages)
    for secret in ("TOOL-OUTPUT-SECRET", "REASONING-SECRET", "INSTRUCTIONS-SECRET", "environment_context",
                   "TORN-SECRET", "user_mess"):
        assert secret not in text
    assert messages == [("user", False, "Find the outliers in prices.parquet"),
                        ("assistant", False, "Three outliers: rows 4, 17 and 90."),
                        ("user", False, "Remove them and refit"),
                        ("assistant", False, "Refit done: R² rose from 0.71 to 0.83.")]  # no doubles


def test_rollout_with_response_items_only(root: Path, tmp_path: Path) -> None:
    assert conversation(sessions(root, tmp_path), f"codex:{OLD}") == [
        ("user", False, "Summarise the logs folder"), ("assistant", False, "The logs folder holds 12 daily files.")]


def test_codex_home_env_archived_and_ids(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(root))
    (root / "archived_sessions").mkdir()
    shutil.move(str(root / MAIN_FILE), root / "archived_sessions" / Path(MAIN_FILE).name)
    (root / "sessions" / "2026" / "11" / "30" / "notes.txt").write_text("not a rollout")
    source = CodexSource()
    assert source.root() == root
    assert source.locate(MAIN) is not None and source.locate("*") is None
    found = ForeignSessions([source], index_path=tmp_path / "i.json")
    assert {h.session_id for h in found.headers()} == {f"codex:{MAIN}", f"codex:{OLD}"}
    assert tool_of(f"codex:{MAIN}") == "Codex"
    uri = encode_session_reference_uri(f"codex:{MAIN}")
    assert decode_session_reference_uri(uri) == f"codex:{MAIN}"
    assert uri != encode_session_reference_uri(MAIN)


def test_appended_thread_name_is_read_incrementally(root: Path, tmp_path: Path) -> None:
    found = sessions(root, tmp_path)
    found.headers()
    path = root / MAIN_FILE
    text = path.read_text()
    path.write_text(text[: text.rfind("\n") + 1])  # complete the torn tail away: smaller, scanned again
    with path.open("a") as fh:
        fh.write(json.dumps({"timestamp": "2026-11-30T11:00:00Z", "type": "event_msg",
                             "payload": {"type": "thread_name_updated", "thread_name": "Outliers, final"}}) + "\n")
    assert found.header(f"codex:{MAIN}").title == "Outliers, final"  # type: ignore[union-attr]
