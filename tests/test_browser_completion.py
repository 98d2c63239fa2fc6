"""Ghost-text completions in JupyterLab and Notebook 7, in a real browser, from the offline model.

One server per app, with ``c.DshCompletion.enabled = True`` (so the page's default is on, as the settings
editor then shows) and an offline model that thinks for a moment before it answers, so a request is still in
flight when the user types on. In each app, in one page: typing in a code cell shows the ghost text, typing on
cancels the request in flight (the server reports the cancel), Tab accepts the suggestion, and a ``%%dsh``
cell gets prose. Screenshot: ``test-artifacts/…-ghost-text.png``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    APPS,
    JupyterServer,
    NotebookPage,
    run_from_palette,
    serve,
    watched_page,
    write_notebook,
)

NOTEBOOK = "work/ghost.ipynb"
CELLS = ("radius = 2.5\narea = 3.14159 * radius ** 2", "", "%%dsh\n")
#: Seconds the offline model waits before it answers (the window in which the test types on).
THINKING = 0.6


def _prepare(root: Path, state: Path) -> None:
    write_notebook(root / NOTEBOOK, *CELLS)
    (state / "config").mkdir(parents=True, exist_ok=True)
    (state / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"DshCompletion": {"enabled": True, "offline_delay": THINKING}}), encoding="utf-8")


@pytest.fixture(scope="module", params=APPS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from serve(request.param, tmp_path_factory, "completion", _prepare)


def _report(server: JupyterServer) -> dict[str, Any]:
    status, body = server.request("GET", "dsh/api/completion")
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def _wait_report(server: JupyterServer, what: str, check: Any, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        report = _report(server)
        if check(report):
            return report
        if time.monotonic() > deadline:
            raise AssertionError(f"the server never reported {what}: {report}")
        time.sleep(0.05)


def test_ghost_text_streams_cancels_accepts_and_prose(browser: Any, server: JupyterServer,
                                                      request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, _watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        ghost = page.locator(".jp-GhostText")

        # The server's counts are its own since it started (a re-run of this test finds the earlier ones).
        cancelled = len(_report(server)["cancelled"])
        nb.focus_end(1)
        page.keyboard.type("ra")
        _wait_report(server, "a completion in flight", lambda r: r["inFlight"])
        page.keyboard.type("d")  # typing on: the page closes the request, the server cancels the model's
        report = _wait_report(server, "the cancel", lambda r: len(r["cancelled"]) > cancelled)
        assert len(report["cancelled"]) == cancelled + 1
        expect(ghost).to_have_text("ius", timeout=20_000)
        assert nb.source(1) == "rad", "ghost text must not be in the cell before it is accepted"
        assert ghost.evaluate("node => node.children.length === 0 || !node.querySelector('img,script,a')")
        nb.screenshot(request, "ghost-text")
        page.keyboard.press("Tab")
        expect(ghost).to_have_count(0)
        assert nb.source(1) == "radius"

        nb.focus_end(2)
        page.keyboard.type("Summarise")
        expect(ghost).to_contain_text("plain words", timeout=20_000)
        shown = ghost.inner_text()
        assert "`area`" in shown and "(" not in shown and "=" not in shown  # prose about the data, not code
        nb.screenshot(request, "ghost-prose")
        page.keyboard.press("Tab")
        assert nb.source(2) == "%%dsh\nSummarise" + shown
        expect(ghost).to_have_text(" Then suggest one next step.", timeout=20_000)  # the accepted text goes on
        page.keyboard.press("Escape")
        expect(ghost).to_have_count(0)
        report = _report(server)
        assert report["usage"]["served"] >= 3 and report["inFlight"] == []

        if server.app != "lab":
            return  # the off switch is the page's own code, the same in both apps: checked once
        # The owner turns completions off for this notebook: nothing is sent until they are on again.
        run_from_palette(page, "Ghost-Text Completions in This Notebook")
        sent = _report(server)["usage"]["requests"]
        nb.focus_end(1)
        page.keyboard.type("\nrad")
        page.wait_for_timeout(1_500)  # five times the debounce delay: a request would have gone by now
        assert _report(server)["usage"]["requests"] == sent, "sent while off"
        expect(ghost).to_have_count(0)
        run_from_palette(page, "Ghost-Text Completions in This Notebook")
        nb.focus_end(1)
        page.keyboard.type("i")
        expect(ghost).to_have_text("us", timeout=20_000)
        assert _report(server)["usage"]["requests"] > sent


