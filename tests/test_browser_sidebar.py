"""In a real browser, in JupyterLab and Notebook 7: the chat sidebar (labextension/src/sidebar.ts).

- the Chat button of the notebook's toolbar opens the sidebar; a prompt sent with Ctrl+Enter and one sent
  with the button stream their answers there while no cell runs (no cell gets a number);
- the agent's question is answered in the sidebar, a proposal's status shows as its tool line, Stop ends a
  running turn;
- a variable picked from the `@` popup is a chip showing `@x`, and the prompt sent holds its mention;
- switching notebooks switches the panel's session (JupyterLab), and reloading the page shows the conversation
  the kernel kept; a session begun in a cell shows its conversation so far, and a turn run from a `%%dsh`
  cell after the sidebar bound the session streams into the sidebar as it runs;
- bad paths: a kernel without `%load_ext dsh_jupyter` says what to run (and "Load dsh" does it), a kernel
  restart mid-turn says the turn ended with it, a notebook with no kernel says to choose one;
- the model picker: drawn as JupyterLab's selects, models without their key greyed, a choice kept by the kernel
  (a reload shows it), a refused one said and undone;
- screenshots of the sidebar in the light and the dark theme (test-artifacts/).
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TIMEOUT_MS,
    WAIT_FOR_GO,
    JupyterServer,
    NotebookPage,
    copied_text,
    finished_cell,
    hold,
    let_go,
    serve,
    start_cell,
    watched_page,
    write_notebook,
    write_notebook_cells,
)

FIRST = "work/first.ipynb"
PLAIN = "work/plain.ipynb"
#: The notebook of the heading's layout test (a conversation of its own, long enough to scroll).
HEADING = "work/heading.ipynb"
#: The notebook of the two-prompts-in-a-row test.
QUICK = "work/quick.ipynb"
SIDEBAR = "#dsh-jupyter-chat"
INPUT = f"{SIDEBAR} .dsh-sidebar-chat:not(.lm-mod-hidden) .dsh-sidebar-input"
#: A prompt of the second notebook's third cell, run after the sidebar bound the session (it asks first).
CELL_AFTER = "/bash echo from-a-cell-$((6*7))"
#: The second notebook's prompts: one from a cell, one from the sidebar, one from a cell again.
SECOND_PROMPTS = ["Hello from a cell", "Hello from the second notebook", CELL_AFTER]
PROPOSE = '/tool notebook_edit {"action": "insert", "cell_id": "cell-x", "source": "y = x + 1"}'


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, _state: Path) -> None:
        write_notebook_cells(root / FIRST, [(None, "%load_ext dsh_jupyter"), ("cell-x", "x = 41")])
        write_notebook(root / PLAIN, "1 + 1")
        write_notebook(root / HEADING, "%load_ext dsh_jupyter")
        write_notebook(root / QUICK, "%load_ext dsh_jupyter", WAIT_FOR_GO, "")

    yield from serve(request.param, tmp_path_factory, "sidebar", prepare)


class Sidebar:
    """The chat sidebar of the page, for the notebook shown."""

    def __init__(self, nb: NotebookPage) -> None:
        self.nb = nb
        self.page = nb.page
        self.root = nb.page.locator(SIDEBAR)
        self.chat = self.root.locator(".dsh-sidebar-chat:not(.lm-mod-hidden)")
        self._answers = 0  # answers shown when the last prompt was sent (see answered)

    def open(self) -> Sidebar:
        from playwright.sync_api import expect

        button = self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .dsh-sidebar-toolbar-button")
        expect(button).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        if not self.root.is_visible():
            button.click()
        expect(self.root).to_be_visible()
        return self

    @property
    def input(self) -> Any:
        return self.chat.locator(".dsh-sidebar-input")

    @property
    def notice(self) -> Any:
        return self.chat.locator(".dsh-sidebar-notice")

    def ready(self) -> None:
        from playwright.sync_api import expect

        expect(self.chat.locator(".dsh-chat")).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        expect(self.notice).to_be_hidden()

    def type(self, text: str) -> None:
        self.input.click()
        self.page.keyboard.type(text)

    def send(self, text: str) -> None:
        """Type ``text`` into the prompt box and send it with Ctrl+Enter (:meth:`answered` then waits for an answer
        after the ones shown now)."""
        self._answers = self.chat.locator(".dsh-chat-assistant").count()
        self.type(text)
        self.page.keyboard.press("Control+Enter")

    def question(self) -> Any:
        """The agent's question, once it shows in the sidebar."""
        from playwright.sync_api import expect

        card = self.chat.locator(".dsh-approval-card:not([hidden])")
        expect(card).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        return card

    def answered(self) -> Any:
        """The last answer, once the prompt :meth:`send` sent has one, after its turn ended. (The previous answer and
        "idle" still show while the prompt travels to the kernel: waiting on those alone let a test go on before
        its turn had even started.)"""
        from playwright.sync_api import expect

        answers = self.chat.locator(".dsh-chat-assistant")
        expect(answers.nth(self._answers)).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        self.idle()
        return answers.last

    def idle(self) -> None:
        from playwright.sync_api import expect

        expect(self.chat.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)

    def screenshot(self, request: pytest.FixtureRequest, step: str) -> None:
        self.nb.screenshot(request, step)


def _assert_heading_in_view(side: Sidebar) -> None:
    """However long the conversation, only the transcript scrolls: the heading (the notebook's name) and the
    chat's header are whole and in view, the header under the heading."""
    placed = side.chat.evaluate("""chat => {
        const box = el => el.getBoundingClientRect();
        const scrolled = [];
        for (let el = chat; el; el = el.parentElement) { if (el.scrollTop) { scrolled.push(el.className); } }
        const heading = box(chat.querySelector('.dsh-sidebar-heading'));
        const header = box(chat.querySelector('.dsh-chat-header'));
        const name = chat.querySelector('.dsh-sidebar-heading');
        return { scrolled, headingTop: heading.top, chatTop: box(chat).top, headingBottom: heading.bottom,
                 headerTop: header.top, squeezed: name.scrollHeight > name.clientHeight + 1 };
    }""")
    assert placed["scrolled"] == [], placed  # no panel around the transcript scrolled
    assert placed["headingTop"] >= placed["chatTop"] - 0.5 and not placed["squeezed"], placed
    assert placed["headerTop"] >= placed["headingBottom"] - 0.5, placed


def _set_theme(server: JupyterServer, theme: str) -> None:
    """Choose the app's theme through the settings API (both apps read it on load)."""
    body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
    req = urllib.request.Request(server.base_url + "lab/api/settings/@jupyterlab/apputils-extension:themes",
                                 data=body, method="PUT",
                                 headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as response:
        assert response.status == 204


def _kernel_id(server: JupyterServer, path: str) -> str:
    status, sessions = server.request("GET", "api/sessions")
    assert status == 200
    for session in sessions:
        if session.get("path") == path and session.get("kernel"):
            return str(session["kernel"]["id"])
    raise AssertionError(f"no kernel for {path}: {sessions}")


def _session_id(server: JupyterServer, path: str) -> str:
    status, sessions = server.request("GET", "api/sessions")
    assert status == 200
    for session in sessions:
        if session.get("path") == path:
            return str(session["id"])
    raise AssertionError(f"no session for {path}: {sessions}")


def test_the_sidebar_chats_with_the_notebooks_agent(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, FIRST).open()
        nb.run(0)
        nb.run(1)
        numbers = nb.prompt_numbers()
        side = Sidebar(nb).open()
        side.ready()
        expect(side.chat.locator(".dsh-sidebar-heading")).to_have_text("first.ipynb")
        expect(side.chat.locator(".dsh-chat-empty")).to_be_visible()
        side.screenshot(request, "1-open")

        # Ctrl+Enter sends; the answer streams into the sidebar while no cell runs.
        side.type("Please summarise what is here")
        page.keyboard.press("Enter")  # a new line, not a send
        page.keyboard.type("in one line")
        page.keyboard.press("Control+Enter")
        expect(side.input).to_have_text("")
        expect(side.chat.locator(".dsh-chat-user")).to_contain_text("Please summarise what is here\nin one line")
        expect(side.chat.locator(".dsh-chat-assistant").last).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        side.idle()
        expect(side.chat.locator(".dsh-chat-details")).to_contain_text("offline")

        # The button sends; the agent's question is answered in the sidebar.
        side.type("/bash echo sidebar-$((6*7))")
        side.chat.locator("button.dsh-sidebar-send").click()
        question = side.question()
        expect(question).to_contain_text("echo sidebar-$((6*7))")
        side.screenshot(request, "2-question")
        question.locator("button.dsh-approval-once").click()
        expect(side.chat.locator(".dsh-chat-assistant").last).to_contain_text("sidebar-42", timeout=KERNEL_TIMEOUT_MS)
        side.idle()

        # A variable from the @ popup is a chip; what is sent keeps its mention.
        side.type("Describe @")
        popup = side.chat.locator(".dsh-sidebar-popup")
        expect(popup.locator(".dsh-sidebar-option-variable").filter(has_text="x")).to_be_visible()
        # `@cell` is in the popup (after the variables and sessions): the cell selected in the page, named by
        # its first line.
        expect(popup.locator(".dsh-sidebar-option-cell").first).to_contain_text("selected · ")
        side.screenshot(request, "3-cell-in-popup")
        page.keyboard.type("x")
        expect(popup.locator(".dsh-sidebar-option").first).to_contain_text("x")
        page.keyboard.press("Enter")
        chip = side.input.locator(".jp-DshChip")
        expect(chip).to_have_text("@x")
        expect(popup).to_be_hidden()
        page.keyboard.type("briefly")
        side.screenshot(request, "3-chip")
        # The chip keeps its markup: the box's text and a copy of it give the mention, and the caret steps
        # over the chip whole (9 steps pass "Describe ", the 10th the chip).
        markup = chip.get_attribute("data-markup")
        assert markup is not None and markup.startswith("@[x](dsh-variable:"), markup
        expect(side.input).to_have_js_property("value", f"Describe {markup} briefly")
        page.keyboard.press("Control+a")
        copied = copied_text(side.input)
        assert copied == f"Describe {markup} briefly", copied
        page.keyboard.press("Control+Home")
        for _ in range(10):
            page.keyboard.press("ArrowRight")
        page.keyboard.type("!")
        expect(side.input).to_have_js_property("value", f"Describe {markup}! briefly")
        page.keyboard.press("Backspace")
        page.keyboard.press("Control+End")
        page.keyboard.press("Control+Enter")
        user = side.chat.locator(".dsh-chat-user").last
        expect(user).to_contain_text("Describe @x briefly")
        expect(side.chat.locator(".dsh-chat-context").last).to_contain_text("x", timeout=KERNEL_TIMEOUT_MS)
        side.idle()

        # A proposal's status is its tool line; the card is in the notebook.
        side.type(PROPOSE)
        page.keyboard.press("Control+Enter")
        card = page.locator(f"{nb.scope} .dsh-proposal")
        expect(card).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        tool = side.chat.locator(".dsh-chat-tool").last
        expect(tool.locator(".dsh-chat-tool-state")).to_have_text(re.compile("running"))
        side.screenshot(request, "4-proposal")
        card.locator("button.dsh-proposal-accept").click()
        expect(tool.locator(".dsh-chat-tool-state")).not_to_have_text(re.compile("running"), timeout=KERNEL_TIMEOUT_MS)
        side.idle()

        # Stop ends a running turn.
        side.send("/bash sleep 60")
        side.question().locator("button.dsh-approval-once").click()
        stop = side.chat.locator("button.dsh-chat-stop")
        expect(stop).to_be_visible()
        expect(side.chat.locator("button.dsh-sidebar-send")).to_have_text("Steer")
        stop.click()
        side.idle()
        expect(side.chat.locator(".dsh-chat-item").last).to_contain_text("Turn interrupted")
        side.screenshot(request, "4b-stopped")  # a long conversation, scrolled to its end
        _assert_heading_in_view(side)
        assert nb.prompt_numbers()[:2] == numbers[:2]  # no cell ran for any of it
        assert not watch.errors and not watch.dialogs, (watch.errors, watch.dialogs)


def test_switching_notebooks_switches_the_panel_and_a_reload_restores_it(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    # A notebook (and so a kernel and a session) of its own for each attempt: a re-run after a failure
    # starts from an empty conversation rather than the one the failed attempt left.
    path = f"work/second-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(server.root / path, "%load_ext dsh_jupyter", "%%dsh\nHello from a cell", f"%%dsh\n{CELL_AFTER}")
    name = path.rsplit("/", 1)[1]
    with watched_page(browser) as (page, watch):
        second = NotebookPage(page, server, path).open()
        second.run(0)
        second.run(1)  # the session begins in a cell: the sidebar shows its conversation so far
        side = Sidebar(second).open()
        side.ready()
        expect(side.chat.locator(".dsh-chat-user .dsh-chat-text")).to_have_text(["Hello from a cell"])
        expect(side.chat.locator(".dsh-chat-assistant")).to_have_count(1)
        side.send("Hello from the second notebook")
        side.answered()
        # The session's short id (the details go on with the model and how full the context is).
        second_session = side.chat.locator(".dsh-chat-details").inner_text().split(" · ")[0]

        # A turn run from a cell now streams into the sidebar while it runs (its question waits in the cell).
        output = start_cell(second, 2)
        expect(side.chat.locator(".dsh-chat-user .dsh-chat-text").last).to_have_text(CELL_AFTER,
                                                                                  timeout=KERNEL_TIMEOUT_MS)
        expect(side.chat.locator(".dsh-chat-tool").last).to_contain_text("echo from-a-cell")
        expect(side.chat.locator(".dsh-chat-state")).to_have_text(re.compile("running"))
        expect(side.chat.locator("button.dsh-sidebar-send")).to_have_text("Steer")  # the box knows a turn runs
        side.screenshot(request, "5a-cell-turn-live")
        output.locator(".dsh-approval-card:not([hidden]) button.dsh-approval-once").click()
        finished_cell(second, 2)
        expect(side.chat.locator(".dsh-chat-assistant").last).to_contain_text("from-a-cell-42",
                                                                               timeout=KERNEL_TIMEOUT_MS)
        side.idle()
        expect(side.chat.locator("button.dsh-sidebar-send")).to_have_text("Send")
        expect(side.chat.locator(".dsh-chat-details")).to_contain_text(second_session)  # the same session

        if server.app == "lab":  # one page holds both notebooks: the panel follows the active one
            page.locator(".jp-DirListing-item", has_text="first.ipynb").dblclick()  # from the file browser
            first = NotebookPage(page, server, FIRST)
            page.wait_for_selector(f"{first.scope} .jp-Cell", timeout=KERNEL_TIMEOUT_MS)
            first.wait_idle()
            side = Sidebar(first).open()
            expect(side.chat.locator(".dsh-sidebar-heading")).to_have_text("first.ipynb")
            # The first notebook's kernel kept its conversation (the previous test), and its own session.
            expect(side.chat.locator(".dsh-chat-user").first).to_contain_text("Please summarise what is here",
                                                                             timeout=KERNEL_TIMEOUT_MS)
            assert "Hello from the second notebook" not in side.chat.inner_text()
            assert side.chat.locator(".dsh-chat-details").inner_text().split(" · ")[0] != second_session
            side.screenshot(request, "5-first-notebook")
            page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name).click()
            expect(side.chat.locator(".dsh-sidebar-heading")).to_have_text(name)
            expect(side.chat.locator(".dsh-chat-user .dsh-chat-text")).to_have_text(SECOND_PROMPTS)
            expect(side.chat.locator(".dsh-chat-details")).to_contain_text(second_session)

        # A reloaded page shows the conversation the kernel kept.
        watch.dialogs.clear()
        reloaded = NotebookPage(page, server, path).open()
        side = Sidebar(reloaded).open()
        expect(side.chat.locator(".dsh-chat-user .dsh-chat-text")).to_have_text(SECOND_PROMPTS,
                                                                 timeout=KERNEL_TIMEOUT_MS)
        expect(side.chat.locator(".dsh-chat-assistant")).to_have_count(4)  # the cell turn answered twice
        side.screenshot(request, "6-reloaded")
        assert not watch.errors and not watch.dialogs, (watch.errors, watch.dialogs)  # unsaved notebooks: leaving


def test_a_kernel_without_dsh_a_restart_mid_turn_and_no_kernel_say_what_to_do(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, PLAIN).open()
        side = Sidebar(nb).open()
        expect(side.notice).to_contain_text("run %load_ext dsh_jupyter in a cell", timeout=KERNEL_TIMEOUT_MS)
        expect(side.chat.locator("button.dsh-sidebar-send")).to_be_disabled()
        side.screenshot(request, "7-not-loaded")
        side.notice.locator("button", has_text="Load dsh").click()
        side.ready()

        # A restart while a turn runs: the sidebar says the turn ended with the kernel.
        side.send("First turn, saved")
        side.answered()
        side.send("/bash sleep 60")
        side.question().locator("button.dsh-approval-once").click()
        expect(side.chat.locator("button.dsh-chat-stop")).to_be_visible()
        short_id = side.chat.locator(".dsh-chat-details").inner_text().split(" · ")[0]
        status, _ = server.request("POST", f"api/kernels/{_kernel_id(server, PLAIN)}/restart", timeout=60)
        assert status == 200
        expect(side.notice).to_contain_text("The kernel restarted during a turn", timeout=KERNEL_TIMEOUT_MS)
        expect(side.notice).to_contain_text("run %load_ext dsh_jupyter", timeout=KERNEL_TIMEOUT_MS)
        expect(side.chat.locator(".dsh-chat")).to_have_count(0)
        side.screenshot(request, "8-restarted")
        side.notice.locator("button", has_text="Load dsh").click()  # loads dsh and resumes the session
        expect(side.chat.locator(".dsh-chat")).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        side.screenshot(request, "8b-resumed")
        expect(side.chat.locator(".dsh-chat-details")).to_contain_text(short_id)  # the session was resumed
        expect(side.chat.locator(".dsh-chat-user .dsh-chat-text").first).to_have_text("First turn, saved")
        side.send("Still there?")
        side.answered()

        # No kernel: the sidebar says to choose one.
        status, _ = server.request("DELETE", f"api/sessions/{_session_id(server, PLAIN)}", timeout=60)
        assert status == 204
        expect(side.notice).to_contain_text(re.compile("no kernel|kernel died"), timeout=KERNEL_TIMEOUT_MS)
        expect(side.chat.locator("button.dsh-sidebar-send")).to_be_disabled()
        side.screenshot(request, "9-no-kernel")
        assert not watch.errors and not watch.dialogs, (watch.errors, watch.dialogs)


def test_the_sidebar_in_the_dark_theme(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    _set_theme(server, "JupyterLab Dark")
    try:
        with watched_page(browser) as (page, _watch):
            nb = NotebookPage(page, server, FIRST).open()
            page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=30_000)
            nb.run(0)
            nb.run(1)  # x, for the chip
            side = Sidebar(nb).open()
            side.ready()
            side.send("/bash echo dark")
            question = side.question()
            side.screenshot(request, "10-dark-question")
            question.locator("button.dsh-approval-once").click()
            side.idle()
            # Leaving the box and coming straight back (a click elsewhere and back) keeps the popup that the
            # next `@` opens: the late close of the first leaving must not shut it.
            side.input.evaluate("box => { box.blur(); box.focus(); }")
            side.type("Look at @")
            expect(side.chat.locator(".dsh-sidebar-popup .dsh-sidebar-option").first).to_be_visible()
            page.keyboard.type("x")
            page.keyboard.press("Enter")
            expect(side.input.locator(".jp-DshChip")).to_have_text("@x")
            side.screenshot(request, "11-dark-chip")
            # One Backspace after the chip (and its space) removes the whole mention.
            page.keyboard.press("Backspace")
            page.keyboard.press("Backspace")
            expect(side.input.locator(".jp-DshChip")).to_have_count(0)
            expect(side.input).to_have_js_property("value", "Look at ")
    finally:
        _set_theme(server, "JupyterLab Light")


def test_without_the_server_extension_the_sidebar_says_so_and_still_chats(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        # What a server without the dsh extension answers for its endpoints: 404.
        page.route("**/dsh/api/**", lambda route: route.fulfill(status=404, body="Not Found"))
        nb = NotebookPage(page, server, FIRST).open()
        nb.run(0)
        nb.run(1)
        side = Sidebar(nb).open()
        side.ready()
        warning = side.root.locator(".dsh-sidebar-warning")
        expect(warning).to_contain_text("The dsh server extension is not running")
        expect(warning).to_contain_text("jupyter server extension enable dsh_jupyter")
        side.type("Look at @")
        popup = side.chat.locator(".dsh-sidebar-popup")
        expect(popup.locator(".dsh-sidebar-option-variable").filter(has_text="x")).to_be_visible()
        expect(popup.locator(".dsh-sidebar-option-note")).to_contain_text("The dsh server extension is not running")
        side.screenshot(request, "12-no-server-extension")
        page.keyboard.press("Escape")
        expect(popup).to_be_hidden()
        page.keyboard.type(" the notebook")
        page.keyboard.press("Control+Enter")
        expect(side.chat.locator(".dsh-chat-user").last).to_contain_text("Look at @ the notebook")
        side.idle()
        assert not watch.errors and not watch.dialogs, (watch.errors, watch.dialogs)


#: The elements of the sidebar's heading that must be in plain view: no other element drawn over any part.
HEADING_PARTS = (".dsh-sidebar-heading", ".dsh-chat-header .dsh-chat-title", ".dsh-chat-header .dsh-chat-state")

#: For each part, the elements found at its corners and centre that are neither it nor inside it.
_COVERED_JS = """parts => parts.map(selector => {
    const el = document.querySelector(selector);
    if (!el) { return [selector + ' is missing']; }
    const box = el.getBoundingClientRect();
    if (box.width < 4 || box.height < 4) { return [selector + ' has no room']; }
    const [dx, dy] = [Math.min(6, box.width / 4), Math.min(4, box.height / 4)];  // inside rounded corners
    const points = [[box.left + dx, box.top + dy], [box.right - dx, box.top + dy], [box.left + dx, box.bottom - dy],
                    [box.right - dx, box.bottom - dy], [box.left + box.width / 2, box.top + box.height / 2]];
    const clipped = el.scrollHeight > el.clientHeight + 1;
    const over = clipped ? [`${selector} is clipped: ${el.scrollHeight}px of text in ${el.clientHeight}px`] : [];
    for (const [x, y] of points) {
        const hit = document.elementFromPoint(x, y);
        if (hit && hit !== el && !el.contains(hit) && !hit.classList.contains('lm-SplitPanel-handle')) {
            over.push(`${selector} covered at ${Math.round(x)},${Math.round(y)} by ${hit.outerHTML.slice(0, 120)}`);
        }
    }
    return over;
}).flat()"""


def test_the_sidebar_heading_stays_in_plain_view(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    """Narrow and wide, light and dark, with the conversation scrolled: nothing covers the notebook's name, the
    chat's title or its state, and no answer shows through them as it scrolls under the heading."""
    from playwright.sync_api import expect

    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        shade = "dark" if "Dark" in theme else "light"
        _set_theme(server, theme)
        try:
            with watched_page(browser) as (page, _watch):
                nb = NotebookPage(page, server, HEADING).open()
                page.wait_for_selector(f"body[data-jp-theme-light='{str(shade == 'light').lower()}']",
                                       state="attached", timeout=30_000)
                side = Sidebar(nb).open()
                if shade == "light":
                    nb.run(0)
                    side.ready()
                    for n in range(3):  # enough conversation to scroll under the heading
                        side.send(f"Line {n} of a conversation long enough to scroll " + "and wrap " * 12)
                        expect(side.chat.locator(".dsh-chat-assistant")).to_have_count(n + 1, timeout=KERNEL_TIMEOUT_MS)
                        side.idle()
                side.ready()
                expect(side.chat.locator(".dsh-chat-user")).to_have_count(3)
                transcript = side.chat.locator(".dsh-sidebar-transcript")
                for width in (900, 1600):
                    page.set_viewport_size({"width": width, "height": 800})
                    page.wait_for_timeout(300)  # the panel's layout follows the window
                    transcript.evaluate("el => { el.scrollTop = el.scrollHeight / 3; }")
                    page.wait_for_timeout(100)
                    covered = page.evaluate(_COVERED_JS, list(HEADING_PARTS))
                    nb.screenshot(request, f"heading-{shade}-{width}")
                    assert covered == [], "\n".join(covered)
                    # What scrolls is drawn below the heading, never over or through it.
                    heading = side.chat.locator(".dsh-sidebar-heading").bounding_box()
                    scroller = transcript.bounding_box()
                    header = side.chat.locator(".dsh-chat-header").bounding_box()
                    assert heading and scroller and header
                    assert scroller["y"] >= heading["y"] + heading["height"] - 1, (heading, scroller)
                    assert header["y"] <= scroller["y"] + 1, (header, scroller)  # stuck to the very top
        finally:
            _set_theme(server, "JupyterLab Light")


def test_a_prompt_typed_while_the_last_one_travels_is_the_next_prompt(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    """The box empties the moment a prompt is sent: what is typed at once after it is the next prompt, never
    glued to the one just sent (issue 22, item 1, in the sidebar)."""
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, QUICK).open()
        nb.run(0)
        side = Sidebar(nb).open()
        side.ready()
        side.send("first quick prompt")
        page.keyboard.type("second quick prompt")
        page.keyboard.press("Control+Enter")  # sent now, or kept in the box while the first still travels
        user = side.chat.locator(".dsh-chat-user .dsh-chat-text")
        expect(user.first).to_have_text("first quick prompt", timeout=KERNEL_TIMEOUT_MS)
        # The second prompt either went at once (it steers the running turn or runs next) or waits in the box
        # while the first travelled: whichever, it is whole and alone.
        for _attempt in range(KERNEL_TIMEOUT_MS // 200):
            if user.count() >= 2 or side.input.inner_text().strip():
                break
            page.wait_for_timeout(200)
        if user.count() < 2:
            expect(side.input).to_have_text("second quick prompt")
            side.idle()
            page.keyboard.press("Control+Enter")
        expect(user).to_have_count(2, timeout=KERNEL_TIMEOUT_MS)
        side.idle()
        assert user.all_inner_texts() == ["first quick prompt", "second quick prompt"]
        expect(side.input).to_have_text("")
        side.screenshot(request, "quick-two-prompts")

        # A prompt the kernel refuses once it has taken it (it names a session that is gone) comes back above what
        # was typed since. Sent while the kernel is busy, the refusal comes after the next keys were typed.
        gone = "@[Deleted notes](dsh-session:ImdvbmUtOSI)"
        hold(nb, 1)  # the kernel waits for `go`
        # The run selects the empty cell after it (one made at the end would take the focus later, in edit mode).
        expect(nb.cell(2)).to_have_class(re.compile(r"\bjp-mod-active\b"))
        side.input.evaluate("(box, text) => { box.focus(); document.execCommand('insertText', false, text); }",
                            f"summarise {gone}")
        side.chat.locator(".dsh-sidebar-send").click()
        expect(side.input).to_have_js_property("value", "")
        side.input.press_sequentially("then plot it")
        expect(side.input).to_have_js_property("value", "then plot it")  # the kernel has not answered yet
        let_go(server.root / "work")  # the kernel goes on: the prompt, refused, comes back now
        status = side.chat.locator(".dsh-sidebar-status")
        expect(status).to_contain_text("Not sent: the mention @Deleted notes", timeout=KERNEL_TIMEOUT_MS)
        expect(side.input).to_have_js_property("value", f"summarise {gone}\nthen plot it")
        page.keyboard.type(", please")  # the box kept the keyboard, and its caret is after what was typed
        expect(side.input).to_have_js_property("value", f"summarise {gone}\nthen plot it, please")
        side.screenshot(request, "quick-given-back")
        assert watch.dialogs == []
        assert watch.errors == []


def test_the_model_picker_looks_like_jupyterlab_s_keeps_its_choice_and_a_refused_one_says_why(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    path = f"work/models-{uuid.uuid4().hex[:6]}.ipynb"  # a kernel of its own: no other test's choice
    write_notebook(server.root / path, "%load_ext dsh_jupyter")
    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, path).open()
        nb.run(0)
        side = Sidebar(nb).open()
        side.ready()
        picker = side.chat.locator(".dsh-sidebar-picker")
        select = picker.locator("select.dsh-sidebar-model")
        expect(picker).to_be_visible()
        # JupyterLab's select (as the toolbar's cell type): a caret says it opens, and it speaks the UI's font.
        expect(picker.locator("svg")).to_be_visible()
        looks = select.evaluate("""select => {
            const send = select.closest('.dsh-sidebar-bar').querySelector('.dsh-sidebar-send');
            return [getComputedStyle(select).fontFamily, getComputedStyle(send).fontFamily];
        }""")
        assert looks[0] == looks[1], looks
        # The notebook's setting first and chosen; a model without its key is listed, greyed, saying which key.
        expect(select).to_have_value("")
        expect(select.locator("option").first).to_have_text("offline (default)")
        needs_key = select.locator("option", has_text="openai:gpt-4o (needs $OPENAI_API_KEY)")
        expect(needs_key).to_have_count(1)
        expect(needs_key).to_be_disabled()
        side.screenshot(request, "12-model-picker")

        # A choice is the kernel's: it holds for the prompts sent from here, and a reloaded page shows it.
        select.select_option("offline")
        expect(side.chat.locator(".dsh-sidebar-status")).to_have_text("")
        side.send("Which model?")
        side.answered()
        reloaded = NotebookPage(page, server, path).open()
        side = Sidebar(reloaded).open()
        side.ready()
        select = side.chat.locator(".dsh-sidebar-picker select.dsh-sidebar-model")
        expect(select).to_have_value("offline", timeout=KERNEL_TIMEOUT_MS)

        # A model the kernel refuses (its key went missing since the list was drawn: forced here, since the
        # list greys it out) says why, and the picker goes back to the model still in use.
        select.evaluate("""select => {
            const option = [...select.options].find(o => o.value === 'openai:gpt-4o');
            option.disabled = false;
            select.value = 'openai:gpt-4o';
            select.dispatchEvent(new Event('change'));
        }""")
        status = side.chat.locator(".dsh-sidebar-status")
        expect(status).to_contain_text("Model not changed", timeout=KERNEL_TIMEOUT_MS)
        expect(status).to_contain_text("OPENAI_API_KEY")
        expect(select).to_have_value("offline")
        side.screenshot(request, "13-model-refused")
        assert not watch.errors, watch.errors
