"""The demo notebooks, executed headless by nbclient on a real kernel, with assertions on their outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernel_helpers import KernelRunner

from dsh_jupyter.demo import default_notebooks_dir

pytestmark = pytest.mark.slow


def execute(name: str, tmp_path: Path, runner: KernelRunner) -> nbformat.NotebookNode:
    """The demo run by the main job's own runner, keyless."""
    return runner.run_demo(default_notebooks_dir() / f"{name}.ipynb", tmp_path / name)


def outputs(nb: nbformat.NotebookNode, marker: str) -> list[dict[str, Any]]:
    cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
    return cell.outputs


def text_of(outs: list[dict[str, Any]]) -> str:
    parts = []
    for out in outs:
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        for mime in ("text/markdown", "text/plain", "text/html"):
            if mime in out.get("data", {}):
                parts.append(out["data"][mime])
    return "\n".join(parts)


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_quickstart(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    nb = execute("quickstart", tmp_path, kernel_runner)
    assert "offline model" in text_of(outputs(nb, "Hello! What can you do")).lower()
    assert "13.175" in text_of(outputs(nb, "mean of my prices"))
    printed = text_of(outputs(nb, "loc = %dsh locate"))
    path = Path(re.search(r"^jsonl (\S+)$", printed, re.M).group(1))
    assert path.is_file() and path.is_relative_to(tmp_path / "quickstart" / ".dsh" / "sessions")
    log = read_log(path)
    assert log[0]["type"] == "session"
    assert "user/message" in text_of(outputs(nb, "pd.read_json"))
    shell = text_of(outputs(nb, "!echo"))
    assert f"id={log[0]['id']}" in shell and "the JSONL file exists" in shell
    assert log[0]["id"] in text_of(outputs(nb, "%dsh sessions"))


def test_referencing(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    nb = execute("referencing", tmp_path, kernel_runner)
    chosen = text_of(outputs(nb, "picker = %dsh pick churn"))
    assert "@[Churn after the August price change](dsh-session:" in chosen
    completed = text_of(outputs(nb, "provisionalcompleter"))
    assert "@[Regional sales Q3](dsh-session:" in completed
    compare = outputs(nb, "Compare {sales} with {churn}")
    bundle = next(o for o in compare if "application/vnd.dsh.reference-context+json" in o.get("data", {}))
    data = bundle["data"]["application/vnd.dsh.reference-context+json"]
    assert [r["label"] for r in data["references"]] == ["Regional sales Q3", "Churn after the August price change"]
    assert [r["compacted"] for r in data["references"]] == [False, True]
    assert "<details" in bundle["data"]["text/html"]
    answer = text_of(compare)
    assert "You referenced 2 sessions" in answer and "@Regional sales Q3" in answer
    assert "('Churn after the August price change', True" in text_of(outputs(nb, "contexts = [m for m"))


def test_teaching(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    nb = execute("teaching", tmp_path, kernel_runner)
    assert "steered into the running turn" in text_of(outputs(nb, "While that runs"))
    background = text_of(outputs(nb, "%%dsh --bg"))
    assert "slow job finished" in background and "how many files" in background
    sessions = sorted((tmp_path / "teaching" / ".dsh" / "sessions").glob("*/session.jsonl"))
    logs = [read_log(p) for p in sessions]
    first = next(log for log in logs if any("slow job" in json.dumps(e) for e in log))
    steps = [e["seq"] for e in first if e["type"] == "step/start"]
    steer = next(e for e in first if e["type"] == "user/message" and "While that runs" in json.dumps(e))
    assert steer["seq"] > steps[1] and sum(e["type"] == "turn/start" for e in first) == 1
    blocked = text_of(outputs(nb, "admin password"))
    assert "blocked by a hook" in blocked and "not allowed in class" in blocked
    assert not any("admin password" in json.dumps(e) for log in logs for e in log)
    assert "42" in text_of(outputs(nb, "6 times 7")) or "6 times 7" in text_of(outputs(nb, "6 times 7"))
    env = text_of(outputs(nb, "env | grep ^DSH_"))
    assert "DSH_SHELL=1" in env and "DSH_SESSION_JSONL=" in env
    refused = text_of(outputs(nb, "rm -f hooks.json"))
    assert "refused: approval is read-only" in refused
    assert text_of(outputs(nb, 'os.path.exists("hooks.json")')).strip() == "True"


def test_workspace(tmp_path: Path, kernel_runner: KernelRunner) -> None:
    nb = execute("workspace", tmp_path, kernel_runner)
    read = text_of(outputs(nb, "What is in my notebook so far?"))
    assert "the kernel's record of executed cells" in read and "sales = pd.DataFrame(" in read
    variables = text_of(outputs(nb, "Which of my variables"))
    assert "sales: DataFrame 6×3" in variables and "units: float64, 1 null" in variables
    assert "Referenced: sales · DataFrame 6×3" in text_of(outputs(nb, "have missing values?"))
    fixed = text_of(outputs(nb, "%dsh fix"))
    assert "KeyError: 'unit'" in fixed and 'per_unit = sales["revenue"] / sales["unit"]' in fixed
    ran = text_of(outputs(nb, "Load the sales data again"))
    assert "Ran cell load-sales" in ran and "north" in ran  # the file's own id (the runner sends it)
    assert "set_next_input" in text_of(outputs(nb, "totals revenue by region"))
    plot = text_of(outputs(nb, "Plot revenue by region."))
    assert "I received an image: PNG image" in plot
    [session] = (tmp_path / "workspace" / ".dsh" / "sessions").glob("*/session.jsonl")
    artifacts = list((session.parent / "artifacts").glob("*.png"))
    assert len(artifacts) == 1 and artifacts[0].read_bytes().startswith(b"\x89PNG")
    assert "base64" not in session.read_text(encoding="utf-8")
    plotted = outputs(nb, "Plot revenue by region.")
    assert any(o.get("output_type") == "display_data" and "image/png" in o.get("data", {}) for o in plotted), [
        {k: (v if k != "data" else {m: str(d)[:300] for m, d in v.items()}) for k, v in o.items()} for o in plotted]
