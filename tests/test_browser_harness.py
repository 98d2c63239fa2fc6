"""The browser-test harness itself: when it skips or fails, and what the server it starts can see."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browser_helpers as bh
import pytest


def test_missing_chromium_skips_locally_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bh, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"apt-get install chromium"):
        bh.require_chromium()


def test_missing_chromium_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bh, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true"):
        bh.require_chromium()


def test_missing_notebook7_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "notebook", None)  # makes `import notebook` raise ImportError
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"Notebook 7 is not installed"):
        bh.require_notebook7()


def test_server_environment_is_isolated_and_keyless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-real-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-key")
    monkeypatch.setenv("DSH_SESSIONS_DIR", "/somewhere/else")
    monkeypatch.setenv("JUPYTER_DSH_SERVER_URL", "http://127.0.0.1:8888/")  # left by an in-process server
    monkeypatch.setenv("JUPYTER_DSH_SERVER_KEY", "key-of-another-server")
    env = bh.prepare_state(tmp_path)
    assert "DEEPSEEK_API_KEY" not in env and "OPENAI_API_KEY" not in env and "DSH_SESSIONS_DIR" not in env
    assert "JUPYTER_DSH_SERVER_URL" not in env and "JUPYTER_DSH_SERVER_KEY" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR",
                 "IPYTHONDIR", "DSH_HOME"):
        assert Path(env[name]).is_relative_to(tmp_path), name
    # The runtime folder is short (a kernel's Unix socket is named after its connection file there), the server's
    # own, and linked from the state folder; it goes when the server stops.
    runtime = Path(env["JUPYTER_RUNTIME_DIR"])
    assert runtime == (tmp_path / "runtime").resolve() and runtime.is_dir() and not any(runtime.iterdir())
    assert len(str(runtime / "kernel-00000000-0000-0000-0000-000000000000-ipc-99")) < 100
    bh.remove_runtime_folder(tmp_path)
    assert not runtime.exists() and not (tmp_path / "runtime").is_symlink()
    enabled = json.loads((tmp_path / "config" / "jupyter_server_config.d" / "dsh_jupyter.json").read_text())
    assert enabled["ServerApp"]["jpserver_extensions"]["dsh_jupyter"] is True
    unused = json.loads((tmp_path / "config" / "jupyter_server_config.d" / "zz-dsh-tests-unused.json").read_text())
    assert unused["ServerApp"]["jpserver_extensions"] == {name: False for name in bh.UNUSED_SERVER_EXTENSIONS}
    notification = tmp_path / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    assert json.loads(notification.read_text()) == bh.QUIET_NOTIFICATIONS
    if (bh.BUILT_LABEXTENSION / "package.json").is_file():
        linked = tmp_path / "data" / "labextensions" / bh.LABEXTENSION
        assert linked.resolve() == bh.BUILT_LABEXTENSION.resolve()


def test_unknown_app_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'lab' or 'notebook'"), bh.running_server("voila", tmp_path, tmp_path):
        pass


def test_a_server_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    missing_root = tmp_path / "no-such-root"
    with pytest.raises(RuntimeError, match=r"exited with") as caught, \
            bh.running_server("lab", missing_root, tmp_path / "state"):
        pass
    assert "no-such-root" in str(caught.value)


def test_a_workers_servers_take_its_own_port_first_then_free_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bh, "_SERVER_PORT", [])
    first, second = bh.server_ports(), bh.server_ports()
    own = next(first)
    assert next(second) == own  # each server of this process tries the same port first (one origin, one cache)
    others = [next(first) for _ in range(3)]  # when it is taken: free ports
    assert all(1024 <= port <= 65535 for port in others)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as running:  # a server of this process listens on it
        running.bind(("127.0.0.1", own))
        running.listen()
        assert next(bh.server_ports()) != own  # a second server beside it starts elsewhere


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bh.JupyterServer]:
    yield from bh.serve("lab", tmp_path_factory, "harness",
                        lambda root, _state: bh.write_notebook(root / "count.ipynb", "print('ran')"))


def test_a_press_the_page_took_is_not_pressed_again_when_its_prompt_is_late(
        browser: Any, lab: bh.JupyterServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A starved renderer can draw ``[*]`` after the helper stopped waiting for it: the run request the page sent
    the kernel tells that the press went through, and the cell runs once, not once a press."""
    from playwright.sync_api import expect

    with bh.watched_page(browser) as (page, watch):
        loads = bh.PageWatch.all_loads
        nb = bh.NotebookPage(page, lab, "count.ipynb").open()
        assert watch.runs_sent == []
        assert watch.loads == 1 and bh.PageWatch.all_loads == loads + 1  # what the timing report counts
        monkeypatch.setattr(bh, "_RAN", "el => false")  # the prompt never seems to show [*] in time
        assert nb.start(0)
        monkeypatch.undo()
        expect(nb.cell(0).locator(".jp-InputArea-prompt")).to_have_text("[1]:", timeout=bh.KERNEL_TIMEOUT_MS)
        assert len(watch.runs_sent) == 1 and watch.counts[watch.runs_sent[0]] == 1
        expect(nb.cell(0).locator(".jp-OutputArea")).to_have_text("ran")
        # A run whose [*] the prompt's watch never sees (a prompt drawn anew, or one whose [*] came and went between
        # two looks) ends when the kernel answers its request, with the count it gave.
        monkeypatch.setattr(bh, "_RAN", "el => false")
        monkeypatch.setattr(bh, "_RAN_AND_COUNTED", "el => false")
        nb.run(0)
        monkeypatch.undo()
        assert len(watch.runs_sent) == 2 and watch.counts[watch.runs_sent[1]] == 2
        expect(nb.cell(0).locator(".jp-InputArea-prompt")).to_have_text("[2]:")
        # Neither the watch's [*] nor the request in time (a page that holds the request back until its kernel
        # connection opens, a prompt drawn anew): the prompt showing something else than before the press tells
        # that it went through, and the cell runs once.
        monkeypatch.setattr(bh, "_RAN", "el => false")
        monkeypatch.setattr(bh.NotebookPage, "_request", lambda self: None)
        assert nb.start(0)
        monkeypatch.undo()
        expect(nb.cell(0).locator(".jp-InputArea-prompt")).to_have_text("[3]:", timeout=bh.KERNEL_TIMEOUT_MS)
        assert len(watch.runs_sent) == 3
        # A caret that does not blink: a focused editor's page draws no frames while it waits (STEADY_CARET).
        nb.click_editor(0)
        layer = nb.cell(0).locator(".cm-cursorLayer")
        assert layer.evaluate("el => getComputedStyle(el).animationDuration") == "0s"
        # Presses that never started the cell fail at once, saying what the page showed, instead of a wait for a
        # run that will not come.
        monkeypatch.setattr(bh.NotebookPage, "start", lambda self, index: False)
        for attempt in (lambda: nb.run(0), lambda: bh.start_cell(nb, 0)):
            with pytest.raises(AssertionError, match=r"cell 0 did not start after three presses of Shift\+Enter: "
                                                     r"its prompt shows '\[3\]:'; the keyboard focus was on <div "
                                                     r"class=\"cm-content.*\"> in a cell; no completer or dialog open"):
                attempt()


def test_a_test_server_loads_dsh_but_not_the_unused_server_extensions(lab: bh.JupyterServer) -> None:
    """The test servers leave out the server halves of the front ends the test pages leave out; dsh's is loaded."""
    assert lab.request("GET", "api/terminals")[0] == 404  # jupyter_server_terminals
    assert lab.request("GET", "lsp/status")[0] == 404  # jupyter_lsp
    assert lab.request("GET", "dsh/api/candidates?limit=1")[0] == 200


def test_a_test_page_leaves_its_origin_nothing_but_the_http_cache(browser: Any, lab: bh.JupyterServer) -> None:
    """Pages of a worker share one context for its HTTP cache; what a page stored on the server's origin is gone
    once it closes (the blank tab that clears it stays for the next page)."""
    url = f"{lab.base_url}api/status?token={lab.token}"
    with bh.watched_page(browser) as (page, _watch):
        page.goto(url)
        page.evaluate("() => { localStorage.setItem('dsh-harness', 'kept?'); document.cookie = 'dsh-harness=1'; }")
        assert page.evaluate("() => localStorage.getItem('dsh-harness')") == "kept?"
    blanks = [p for p in browser.contexts[0].pages if p.url == "about:blank"]
    with bh.watched_page(browser) as (page, _watch):
        page.goto(url)
        assert page.evaluate("() => localStorage.getItem('dsh-harness')") is None
        assert "dsh-harness" not in page.evaluate("() => document.cookie")
    assert [p for p in browser.contexts[0].pages if p.url == "about:blank"] == blanks


@pytest.mark.parametrize("redraw", ["text", "node"])
def test_the_prompt_watch_sees_a_star_that_came_and_went_in_one_task(browser: Any, redraw: str) -> None:
    """A fast run's prompt can go from ``[*]`` to its count before the watch's observer is called: it still
    counts as this run's ``[*]`` (as a text change, or as a text node drawn anew)."""
    with bh.watched_page(browser) as (page, _watch):
        page.set_content("<div class='jp-InputArea-prompt'>[1]:</div>")
        prompt = page.locator(".jp-InputArea-prompt")
        prompt.evaluate(bh._WATCH_PROMPT)
        assert not prompt.evaluate(bh._RAN)
        change = ("el => { el.firstChild.data = '[*]:'; el.firstChild.data = '[2]:'; }" if redraw == "text" else
                  "el => { el.textContent = '[*]:'; el.textContent = '[2]:'; }")
        prompt.evaluate(change)
        page.wait_for_function(bh._RAN_AND_COUNTED, arg=prompt.element_handle(), timeout=5_000)
