"""Other tools' sessions wherever sessions appear: ranking, the switch, references, and a real kernel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner
from sources_helpers import PEERS

from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.references.mentions import format_session_reference_mention
from dsh_jupyter.services import Services, ServiceSettings
from dsh_jupyter.sources import enabled_by_env

CLAUDE_ID = "claude-code:7f3c2a1e-5b4d-4c8e-9a6f-2d1e0b9c8a71"
CODEX_ID = "codex:019a8c1e-3f2b-7d4a-9c5e-6b7a8d9e0f12"
SECRETS = ("TOOL-OUTPUT-SECRET", "SECRET-THINKING", "REASONING-SECRET", "META-SECRET", "SIDECHAIN-SECRET",
           "INSTRUCTIONS-SECRET", "DEAD-BRANCH", "TORN-SECRET")


@pytest.fixture()
def peers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch home holding copies of the fixtures, found through CLAUDE_CONFIG_DIR and CODEX_HOME."""
    home = tmp_path / "home"
    shutil.copytree(PEERS, home)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / "codex"))
    return home


def services(cwd: Path, **settings: Any) -> Services:
    return Services(ServiceSettings(cwd=str(cwd), **settings), index_in_background=False)


def test_candidates_rank_other_tools_by_the_same_rule(peers: Path, tmp_path: Path) -> None:
    resolver = services(tmp_path).resolver
    found = resolver.list_candidates(ReferenceTarget(None, "/home/ana/other"))
    ids = [c.session_id for c in found]
    # Same folder first (newest first), then the rest (newest first).
    assert ids == ["claude-code:0b1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e", "codex:019a0000-1111-7222-8333-444455556666",
                   CODEX_ID, CLAUDE_ID]
    assert found[0].same_workspace and not found[-1].same_workspace
    assert [c.session_id for c in resolver.list_candidates(ReferenceTarget(None, None), "outliers")] == [CODEX_ID]
    assert [c.label for c in resolver.list_candidates(ReferenceTarget(None, None), "claude code", 1)] == [
        "Q3 regional sales"]


def test_the_setting_turns_them_off(peers: Path, tmp_path: Path) -> None:
    resolver = services(tmp_path, foreign_sessions=False).resolver
    assert resolver.list_candidates(ReferenceTarget(None, None)) == []
    assert resolver.foreign is None


def test_env_switch_for_server_and_cli() -> None:
    assert enabled_by_env({}) and enabled_by_env({"DSH_FOREIGN_SESSIONS": "1"})
    assert not any(enabled_by_env({"DSH_FOREIGN_SESSIONS": v}) for v in ("0", "off", "False", " no "))


def test_a_mention_becomes_a_bounded_framed_snapshot(peers: Path, tmp_path: Path) -> None:
    service = services(tmp_path)
    refs = [{"sessionId": CLAUDE_ID, "label": "Q3 regional sales"}, {"sessionId": CODEX_ID}]
    prepared = service.resolver.prepare_sync(service.target(), [{"type": "text", "text": "compare"}], refs)
    context = prepared.additional_context
    assert context is not None
    text = context["content"][0]["text"]
    for expected in ("Now plot it as a bar chart.", "Here is the bar chart of growth by region.",
                     "This session is being continued", "Remove them and refit", "CONTEXT CHECKPOINT"):
        assert expected in text
    assert not any(secret in text for secret in SECRETS)
    assert [r["sessionId"] for r in context["source"]["references"]] == [CLAUDE_ID, CODEX_ID]


def test_a_missing_transcript_is_a_read_failure(peers: Path, tmp_path: Path) -> None:
    from dsh_jupyter.references import SessionReferenceError

    service = services(tmp_path)
    with pytest.raises(SessionReferenceError) as caught:
        service.resolver.prepare_sync(service.target(), [], [{"sessionId": "codex:0000-gone"}])
    assert caught.value.code == "SESSION_REFERENCE_READ_FAILED"
    assert "codex:0000-gone" in str(caught.value) and "Codex" in str(caught.value)


@pytest.mark.slow
def test_a_notebook_lists_and_references_claude_code_and_codex_sessions(peers: Path, tmp_path: Path,
                                                                        kernel_runner: KernelRunner) -> None:
    work = tmp_path / "work"
    work.mkdir()
    claude = format_session_reference_mention(CLAUDE_ID, "Q3 regional sales")
    codex = format_session_reference_mention(CODEX_ID, "Price outliers")
    cells = ["%load_ext dsh_jupyter", "%dsh sessions", f"%%dsh\nCompare {claude} with {codex}."]
    nb = kernel_runner.run(cells, work)
    listing = nb.cells[1].outputs[0]["data"]["text/plain"]
    for expected in ("tool", "Claude Code", "Codex", "Q3 regional sales", "Price outliers", CLAUDE_ID, CODEX_ID):
        assert expected in listing
    logs = list((work / ".dsh" / "sessions").glob("*/session.jsonl"))
    assert len(logs) == 1
    events = [json.loads(line) for line in logs[0].read_text().splitlines()[1:]]
    contexts = [e["data"] for e in events if e["type"] == "user/message"
                and e["data"]["source"].get("kind") == "session-reference"]
    assert len(contexts) == 1
    text = contexts[0]["content"][0]["text"]
    for expected in ("Now plot it as a bar chart.", "Here is the bar chart of growth by region.",
                     "Remove them and refit", "Refit done: R² rose from 0.71 to 0.83.", "CONTEXT CHECKPOINT"):
        assert expected in text
    assert not any(secret in text for secret in SECRETS)
    # The model request holds the snapshot too (what the offline model was sent is logged as its context).
    sent = json.dumps([e for e in events if e["type"] in ("request/context", "request/header")])
    assert not any(secret in sent for secret in SECRETS)


def cli(*argv: str) -> tuple[int, str]:
    import io

    from dsh_jupyter.cli import main

    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_cli_lists_searches_and_shows_them(peers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # no store of ours here: their sessions are still listed
    code, text = cli("sessions", "list")
    assert code == 0
    assert "(Codex)" in text and "(Claude Code)" in text and "Q3 regional sales" in text
    code, text = cli("sessions", "search", "sales", "--json")
    rows = json.loads(text)
    assert code == 0 and [(r["sessionId"], r["tool"], r["readOnly"]) for r in rows] == [
        (CLAUDE_ID, "Claude Code", True)]
    code, text = cli("sessions", "show", CLAUDE_ID[:20])
    assert code == 0 and "Claude Code (read-only)" in text and "[checkpoint] This session is being continued" in text
    assert not any(secret in text for secret in SECRETS)
    code, _ = cli("sessions", "show", "codex:0000")
    assert code == 1 and "not on this machine" in capsys.readouterr().err
    code, text = cli("sessions", "list", "--no-foreign")
    assert code != 0 or "Codex" not in text
    monkeypatch.setenv("DSH_FOREIGN_SESSIONS", "0")
    code, text = cli("sessions", "list")
    assert "Codex" not in text


def test_rest_serves_the_users_own_transcripts_read_only(peers: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.server import sessions as rest
    from dsh_jupyter.server.boundary import Boundary

    root = tmp_path / "root"
    root.mkdir()
    boundary = Boundary.of(root)
    monkeypatch.setenv("HOME", str(peers))  # the server user's home holds both tools' folders
    rows = rest.list_candidates(root, "", 10, boundary=boundary)
    assert {(r["sessionId"], r["tool"]) for r in rows} >= {(CLAUDE_ID, "Claude Code"), (CODEX_ID, "Codex")}
    assert all(r["mention"].startswith("@[") for r in rows)
    detail = rest.session_detail(root, CODEX_ID, boundary)
    assert detail["tool"] == "Codex" and detail["label"] == "Price outliers" and detail["compacted"] is True
    assert not any(secret in json.dumps(detail) for secret in SECRETS)
    with pytest.raises(rest.ApiError) as missing:
        rest.session_detail(root, "codex:0000", boundary)
    assert missing.value.status == 404
    # A tool folder outside the user's home and outside the root is not served; nor is anything when off.
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    assert not any("tool" in r for r in rest.list_candidates(root, "", 10, boundary=boundary))
    monkeypatch.setenv("HOME", str(peers))
    monkeypatch.setenv("DSH_FOREIGN_SESSIONS", "0")
    assert rest.list_candidates(root, "", 10, boundary=boundary) == []


def test_a_damaged_or_foreign_index_file_costs_a_scan_never_a_listing(peers: Path, tmp_path: Path) -> None:
    from dsh_jupyter.sources import ForeignSessions
    from dsh_jupyter.sources.claude import ClaudeCodeSource
    from dsh_jupyter.sources.codex import CodexSource

    index = tmp_path / "index.json"
    sources = [ClaudeCodeSource(peers / "claude"), CodexSource(peers / "codex")]
    for damage in (b"{not json", b'{"version":2,"files":{"x":[1,2]}}', b"[]", b'{"version":2,"files":[]}'):
        index.write_bytes(damage)
        found = ForeignSessions(sources, index_path=index).headers()
        assert {h.session_id for h in found} >= {CLAUDE_ID, CODEX_ID}
    # Entries of the right shape but wrong types are dropped one by one.
    saved = json.loads(index.read_bytes())
    name = next(iter(saved["files"]))
    saved["files"][name][3] = "zero"
    index.write_text(json.dumps(saved))
    assert len(ForeignSessions(sources, index_path=index).headers()) == 4


def test_one_listing_answers_the_keystrokes_of_one_query(peers: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.sources import ForeignSessions, registry
    from dsh_jupyter.sources.codex import CodexSource

    monkeypatch.setattr(registry, "LISTING_MAX_AGE", 3600.0)  # no clock in the test

    found = ForeignSessions([CodexSource(peers / "codex")], index_path=tmp_path / "i.json")
    assert len(found.matching("", None)) == 2
    day = peers / "codex" / "sessions" / "2026" / "11" / "30"
    shutil.copy(next(day.iterdir()), day / "rollout-2026-11-30T12-00-00-019a8c1e-3f2b-7d4a-9c5e-000000000000.jsonl")
    assert len(found.matching("", None)) == 2  # within LISTING_MAX_AGE: the same listing
    assert len(found.headers()) == 3  # a listing that asks for fresh facts sees the new rollout


def test_session_table_marks_the_tool_only_when_there_is_one() -> None:
    from dsh_jupyter.ui.display import SessionTable

    ours = {"sessionId": "6a9e04f1-0000-4000-8000-000000000000", "label": "Ours", "createdAt": 0}
    plain = SessionTable([ours])._plain()
    assert "tool" not in plain.splitlines()[0]
    table = SessionTable([ours, {"sessionId": CODEX_ID, "label": "Price outliers", "createdAt": 0},
                          {"sessionId": "x", "label": "odd", "tool": "<b>T</b>", "createdAt": 0}])
    lines = table._plain().splitlines()
    assert lines[0].split()[:2] == ["label", "tool"]
    assert "Codex" in lines[2] and "Codex" not in lines[1]
    bundle = table._repr_mimebundle_()
    assert [r.get("tool") for r in bundle["application/vnd.dsh.sessions+json"]["sessions"]] == [
        None, "Codex", "<b>T</b>"]
    html = bundle["text/html"]
    assert "<th" in html and ">tool</th>" in html and "&lt;b&gt;T&lt;/b&gt;" in html and "<b>T</b>" not in html
