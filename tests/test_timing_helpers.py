"""The timing report (tests/timing_helpers.py): what a DSH_TEST_TIMES run's worker files sum up to."""

from __future__ import annotations

import json
from pathlib import Path

from timing_helpers import kind_of, module_seconds, summary


def _worker(folder: Path, name: str, modules: dict[str, float], loads: dict[str, int] | None = None) -> None:
    data = {"started": {"kernel": 2}, "fixtures": {"server": [3.0, 1]}, "modules": modules,
            "units": {module: [seconds, 0.0, seconds] for module, seconds in modules.items()}, "wall": 10.0}
    if loads is not None:
        data["page_loads"] = loads
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def test_the_summary_adds_up_the_workers_seconds_processes_and_page_loads(tmp_path: Path) -> None:
    _worker(tmp_path, "gw0", {"tests/test_browser_a.py": 30.0, "tests/test_b.py": 5.0}, {"tests/test_browser_a.py": 4})
    _worker(tmp_path, "gw1", {"tests/test_browser_c.py": 12.5}, {"tests/test_browser_c.py": 2})
    _worker(tmp_path, "gw2", {"tests/test_d.py": 1.0})  # a file written before page loads were counted
    text = summary(tmp_path)
    assert "started: kernel 6" in text and "page loads: 6" in text
    assert "gw0: 35 s of tests, last test ended at 30 s" in text
    assert "      30.0  tests/test_browser_a.py  (4 pages)" in text
    assert "       5.0  tests/test_b.py\n" in text + "\n"  # no pages: nothing said
    assert module_seconds(tmp_path)["tests/test_browser_c.py"] == 12.5


def test_started_processes_are_told_apart_by_their_command() -> None:
    assert kind_of(["python", "-m", "ipykernel_launcher", "-f", "k.json"]) == "kernel"
    assert kind_of("python -m jupyterlab --no-browser") == "jupyter server"
    assert kind_of(["/usr/bin/chromium", "--headless"]) == "chromium"
    assert kind_of(["ls"]) is None
