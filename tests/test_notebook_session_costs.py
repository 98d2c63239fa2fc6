"""``%dsh sessions`` in a real IPython shell (no kernel): a cost column for the sessions whose model calls
had a known cost, blank for the others (the current, unpriced offline session among them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from notebook_helpers import loaded_shell
from spend_helpers import priced_session

from dsh_jupyter.store import JsonlStore


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_HOME", os.environ.get("DSH_HOME", ""))
    for name in ("DSH_SESSION_ID", "DSH_SESSION_JSONL"):
        monkeypatch.delenv(name, raising=False)
    with loaded_shell() as shell:
        yield shell


def test_dsh_sessions_shows_what_each_session_cost(ip: InteractiveShell, tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / ".dsh" / "sessions")
    priced_session(store, "paid-one", [[0.001], [0.0025]], cwd=str(tmp_path), title="Paid before", created_at=3)
    priced_session(store, "mixed-one", [[0.002, None]], cwd=str(tmp_path), title="Mixed before", created_at=2)
    priced_session(store, "unpriced-one", [[None]], cwd=str(tmp_path), title="Unpriced before", created_at=1)
    ip.run_cell_magic("dsh", "", "hello")  # the offline model has no price: its session shows no cost
    bundle = ip.run_line_magic("dsh", "sessions")._repr_mimebundle_()

    plain = bundle["text/plain"].splitlines()
    assert plain[0].split() == ["label", "notebook", "id", "cwd", "created", "cost", "same", "workspace"]
    rows = {line.split()[0]: line for line in plain[1:]}
    assert "$0.0035" in rows["Paid"] and "≥ $0.0020" in rows["Mixed"]
    assert "$" not in rows["Unpriced"] and "free" not in rows["Unpriced"]  # unknown shows nothing
    current = [line for line in plain[1:] if "(current)" in line]
    assert len(current) == 1 and "$" not in current[0] and "free" not in current[0]
    cost_at = plain[0].index("cost")
    assert rows["Paid"][cost_at:].startswith("$0.0035") and rows["Mixed"][cost_at:].startswith("≥ $0.0020")
    sessions = {r["sessionId"]: r for r in bundle["application/vnd.dsh.sessions+json"]["sessions"]}
    assert sessions["paid-one"]["cost"]["text"] == "$0.0035" and "cost" not in sessions["unpriced-one"]
    assert "<th" in bundle["text/html"] and ">cost</th>" in bundle["text/html"]
    assert "≥ &#36;0.0020</td>" in bundle["text/html"]  # "$" escaped so MathJax leaves it alone


def test_the_cost_column_sits_beside_the_tool_column_and_only_when_a_cost_is_known() -> None:
    from dsh_jupyter.ui.display import SessionTable

    ours = {"sessionId": "s-1", "label": "Ours", "createdAt": 0, "sameWorkspace": False,
            "cost": {"usd": 1.5, "pricedCalls": 2, "unpricedCalls": 0, "text": "$1.50"}}
    theirs = {"sessionId": "t-1", "label": "Theirs", "createdAt": 0, "sameWorkspace": True, "tool": "Codex"}
    plain = SessionTable([ours, theirs])._repr_mimebundle_()["text/plain"].splitlines()
    assert plain[0].split() == ["label", "tool", "notebook", "id", "cwd", "created", "cost", "same", "workspace"]
    assert plain[1].rstrip().endswith("$1.50") and "Codex" in plain[2] and "$" not in plain[2]
    bad = {**theirs, "cost": {"usd": "lots", "pricedCalls": 1, "unpricedCalls": 0, "text": "$9"}}
    assert "cost" not in SessionTable([bad])._repr_mimebundle_()["text/plain"].splitlines()[0].split()
