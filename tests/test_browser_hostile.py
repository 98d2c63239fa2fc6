"""In a real browser: every hostile answer and snapshot of the corpus stays inert, wherever it is shown.

The corpus (``tests/fixtures/hostile_markdown.json``) is queued as the offline model's answers, one
``%%dsh`` turn each, in real JupyterLab and Notebook 7; it is also the conversation of an earlier session
that a prompt @-mentions (the scripted answer quotes the snapshot it received back, as a real model
would), shown by our renderer and by the ``text/html`` form of the reference view; it is answered in the
chat panel (``%dsh chat``); and it is exported as an HTML file that chromium opens. One chromium serves the
module (the ``browser`` fixture of ``browser_helpers``); each test has a fresh context.

On each surface: no dialog opens (``page.on("dialog")``), and inside the outputs there is no ``<script>``,
no element with an ``on*`` attribute, no link or resource whose URL (as the browser resolved it) is
``javascript:``, ``data:`` or anything but http, https, mailto or the page's own kind, and no element
MathJax typeset (a control output without our block shows MathJax is live). Links whose text looks like
the attack are clicked. The benign answer still shows its table, list, code block, link and image.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    APPS,
    MODEL_SOURCE,
    JupyterServer,
    NotebookPage,
    PageWatch,
    artifact_path,
    serve,
    watched_page,
    write_notebook,
)

from dsh_jupyter.references.mentions import format_session_reference_mention
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store import JsonlStore

FIXTURE = Path(__file__).parent / "fixtures" / "hostile_markdown.json"
CORPUS: list[dict[str, str]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
NOTEBOOK = "work/hostile.ipynb"
SOURCE_ID = "hostile-source-1"
SOURCE_TITLE = "<img src=x onerror=alert('title')> $\\href{javascript:alert('t')}{title}$"
#: The last answer: what the look must still be.
BENIGN = ("| region | units |\n|:--|--:|\n| north | 3 |\n\n- first item\n- second item\n\n"
          "```python\nprint('benign <b>')\n```\n\n[benign link](https://example.org/docs) "
          "![benign image](https://example.org/chart.png)")
#: A prompt whose words become the session title (shown in every footer).
PROMPT = "$\\href{javascript:alert(61)}{t}$ <img src=x onerror=alert(61)> next"

#: ``approval = "auto"``: no answer calls a tool, and under ``ask`` each chat turn makes a question widget that
#: the next turn replaces at once, faster than the page sets it up (anywidget then reports a failed model).
SETUP = f"""\
%load_ext dsh_jupyter
%config DshMagics.model = "offline"
%config DshMagics.approval = "auto"
import json, pathlib
corpus = json.loads(pathlib.Path({str(FIXTURE)!r}).read_text(encoding="utf-8"))
model = dsh.host.model_for(None)[0]
benign = {BENIGN!r}

def echo_snapshot(request):
    from dsh_jupyter.references.framing import parse_prompt
    from dsh_jupyter.session.messages import blocks_text
    said = [message.text for m in request.messages
            for source in parse_prompt(blocks_text(m.get("content") or [])).sources
            for message in source.conversation]
    return "The referenced session said:\\n\\n" + "\\n\\n".join(said)"""
#: Renders without our block: MathJax must typeset it (so a zero count elsewhere means something).
CONTROL = 'from IPython.display import HTML\nHTML("<p class=\\"dsh-control\\">control $x^2$ math</p>")'
ANSWERS = f"""\
model.queue(*[entry["text"] for entry in corpus], benign)
for entry in corpus:
    get_ipython().run_cell_magic("dsh", "--no-interpolate", {PROMPT!r})
get_ipython().run_cell_magic("dsh", "", "and now something benign")"""
SNAPSHOT = "%%dsh\nWhat did this session say? " + format_session_reference_mention(SOURCE_ID, SOURCE_TITLE)
QUEUE_ECHO = "model.queue(echo_snapshot)"
#: The text/html form of the reference view (what a frontend without our renderer shows).
FALLBACK = f"""\
from IPython.display import HTML, display
from IPython.utils.capture import capture_output
model.queue("fallback answer")
with capture_output() as captured:
    get_ipython().run_cell_magic("dsh", "", {("Again " + format_session_reference_mention(SOURCE_ID, SOURCE_TITLE))!r})
bundle = next(o.data for o in captured.outputs if "application/vnd.dsh.reference-context+json" in o.data)
display(HTML(bundle["text/html"]))"""
CHAT = "chat = %dsh chat\nchat"
#: Sends one prompt per answer from a thread, as fast as the panel answers (the kernel stays free for the
#: widgets' own requests).
CHAT_ANSWERS = """\
import threading
model.queue(*[entry["text"] for entry in corpus], benign)
def drive():
    for entry in [*corpus, None]:
        chat.submit("next")
        chat.wait(60)
threading.Thread(target=drive, daemon=True).start()"""
CELLS = (SETUP, CONTROL, ANSWERS, QUEUE_ECHO, SNAPSHOT, FALLBACK, CHAT, CHAT_ANSWERS)

#: Run inside the page: what in ``root`` could run or load something, and what MathJax typeset.
AUDIT_JS = r"""
(roots) => {
  const problems = [];
  const allowed = new Set(["http:", "https:", "mailto:", location.protocol]);
  const urlAttributes = ["href", "src", "action", "formaction", "xlink:href", "data", "poster", "background"];
  let elements = 0;
  for (const root of roots) {
    for (const el of root.querySelectorAll("*")) {
      elements += 1;
      const tag = el.tagName.toLowerCase();
      if (["script", "iframe", "frame", "object", "embed", "form", "base", "meta", "style", "svg", "math",
           "link", "noscript"].includes(tag)) {
        problems.push("<" + tag + "> element: " + el.outerHTML.slice(0, 160));
      }
      for (const attribute of el.attributes) {
        const name = attribute.name.toLowerCase();
        if (name.startsWith("on")) problems.push(name + "= on <" + tag + ">: " + el.outerHTML.slice(0, 160));
        if (name === "srcset") problems.push("srcset on <" + tag + ">");
        if (urlAttributes.includes(name)) {
          let protocol;
          try { protocol = new URL(attribute.value, document.baseURI).protocol; } catch (e) { protocol = "invalid"; }
          if (!allowed.has(protocol)) problems.push(`${name}=${attribute.value} (${protocol}) on <${tag}>`);
        }
      }
      if (tag.startsWith("mjx-")) problems.push("MathJax typeset <" + tag + ">");
    }
  }
  return { problems, elements };
}
"""


def audit(page: Any, scope: Any) -> dict[str, Any]:
    handles = scope.element_handles()
    result: dict[str, Any] = page.evaluate(AUDIT_JS, handles)
    result["roots"] = len(handles)
    return result


def click_attack_links(page: Any, scope: Any, watch: PageWatch) -> int:
    """Click every link in ``scope`` that lost its target (each was an attack): nothing may run or navigate."""
    url = page.url
    links = scope.locator("a:not([href])")
    count = links.count()
    for index in range(count):
        link = links.nth(index)
        if link.is_visible():
            link.click(timeout=5_000)
    page.wait_for_timeout(500)
    assert page.url == url, f"a click navigated the page to {page.url}"
    assert watch.dialogs == []
    return count


def write_source(folder: Path) -> None:
    """An earlier session whose conversation is the corpus (prompts and answers in turn)."""
    store = JsonlStore(folder / ".dsh" / "sessions")
    log = SessionLog(SessionHeader(SOURCE_ID, 1_787_000_000_000, os.path.realpath(folder)))
    writer = store.create(log.header)
    writer.attach(log)
    try:
        for turn, entry in enumerate(CORPUS, start=1):
            if turn % 2:
                seq = log.append("user/message", user_message(entry["text"])).seq
                if turn == 1:
                    log.append("session/title", {"title": SOURCE_TITLE, "messageSeqs": [seq],
                                                 "source": {"kind": "user"}})
            else:
                log.append("assistant/message", {"turn": turn, "step": 1, "message": assistant_message(
                    [text_block(entry["text"])], MODEL_SOURCE)})
    finally:
        writer.close()


@pytest.fixture(scope="module", params=APPS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, state: Path) -> None:
        write_source(root / "work")
        write_notebook(root / NOTEBOOK, *CELLS)
        # Every output shown (the apps fold those after the 50th behind "Show more outputs").
        tracker = state / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
        tracker.parent.mkdir(parents=True)
        tracker.write_text(json.dumps({"maxNumberOutputs": 1000}), encoding="utf-8")

    yield from serve(request.param, tmp_path_factory, "hostile", prepare)


def assert_inert(page: Any, scope: Any, watch: PageWatch, what: str) -> dict[str, Any]:
    """No problem (see :data:`AUDIT_JS`) inside the elements of ``scope`` (a locator), and no dialog."""
    found = audit(page, scope)
    assert found["roots"] > 0, f"{what}: nothing to look at"
    assert found["problems"] == [], f"{what}:\n" + "\n".join(found["problems"][:40])
    assert watch.dialogs == [], f"{what}: dialogs {watch.dialogs}"
    return found


def assert_benign_look(scope: Any) -> None:
    from playwright.sync_api import expect

    expect(scope.locator("table th", has_text="region").first).to_be_visible()
    expect(scope.locator("td", has_text="north").first).to_be_visible()
    expect(scope.locator("li", has_text="second item").first).to_be_visible()
    expect(scope.locator("pre code.language-python", has_text="print('benign <b>')").first).to_be_visible()
    link = scope.locator("a", has_text="benign link").first
    expect(link).to_have_attribute("href", "https://example.org/docs")
    expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))  # JupyterLab sets its own "noopener"
    expect(scope.locator('img[alt="benign image"]').first).to_have_attribute("src", "https://example.org/chart.png")


def test_hostile_answers_snapshots_and_chat_stay_inert(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        control = nb.run(1)
        # MathJax is live in this page: the control output, outside our block, gets typeset.
        expect(control.locator("mjx-container").first).to_be_attached(timeout=30_000)

        answers = nb.run(2, timeout=300_000)
        markdown = answers.locator(".dsh-markdown")
        expect(answers.locator("sub.dsh-turn-footer").filter(has_text="✓ done")).to_have_count(len(CORPUS) + 1)
        assert markdown.count() >= len(CORPUS)
        nb.screenshot(request, "1-answers")
        assert_inert(page, answers.locator(".jp-OutputArea-output"), watch, "%%dsh answers")
        # The attacks found on main are text, the MathJax \href is literal, and the title is text too.
        expect(answers).to_contain_text("see `<img src=x onerror=alert(2)>`")
        expect(answers).to_contain_text("$\\href{javascript:alert(49)}{click me}$")
        footer = answers.locator("sub.dsh-turn-footer").first
        expect(footer).to_contain_text("$\\href{javascript:alert(61)}{t}$ <img src=x… (")
        assert_benign_look(answers)
        clicked = click_attack_links(page, answers, watch)
        assert clicked >= 10

        nb.run(3)
        snapshot = nb.run(4)
        quoted = snapshot.locator(".dsh-markdown").filter(has_text="The referenced session said")
        expect(quoted).to_have_count(1)
        expect(quoted).to_contain_text("onerror=alert(")
        rendered = snapshot.locator(".jp-DshReferenceContext")
        expect(rendered).to_have_count(1)
        rendered.locator("details > summary").first.click()
        click_attack_links(page, snapshot, watch)
        nb.screenshot(request, "2-snapshot")
        assert_inert(page, snapshot.locator(".jp-OutputArea-output"), watch, "snapshot answer")

        fallback = nb.run(5)
        details = fallback.locator("details.dsh-reference-context")
        expect(details).to_have_count(1)
        details.locator("summary").first.click()
        details.locator("details.dsh-reference-preview > summary").click()
        expect(details.locator("pre")).to_contain_text("onerror=alert")
        expect(details).to_contain_text(SOURCE_TITLE)
        nb.screenshot(request, "3-reference-html")
        assert_inert(page, fallback.locator(".jp-OutputArea-output"), watch, "reference text/html")

        chat = nb.run(6)
        panel = chat.locator(".dsh-panel")
        expect(panel.locator(".dsh-prompt-input")).to_be_visible()
        # The picker lists the hostile source by its title, as text (and the widgets are ready before
        # the next cell keeps the kernel busy).
        expect(panel.locator("li.dsh-picker-row .dsh-picker-label").first).to_have_text(SOURCE_TITLE)
        nb.run(7)
        chat_answers = panel.locator(".dsh-chat-assistant")
        expect(chat_answers).to_have_count(len(CORPUS) + 1, timeout=300_000)
        expect(panel.locator(".dsh-chat-state")).to_have_text("idle")
        assert_benign_look(panel)
        expect(panel).to_contain_text("see `<img src=x onerror=alert(2)>`")
        click_attack_links(page, panel, watch)
        nb.screenshot(request, "4-chat")
        assert_inert(page, panel.locator(".dsh-chat-log"), watch, "chat panel")

        # Everything in every output, once more, after all the clicks.
        outputs = page.locator(f"{nb.scope} .jp-OutputArea-output:not(:has(.dsh-control))")
        whole = assert_inert(page, outputs, watch, "all outputs")
        assert whole["elements"] > 500
        assert watch.dialogs == []
        assert watch.errors == []


def test_an_exported_html_file_stays_inert(browser: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    from dsh_jupyter.ui.export import write_export

    log = SessionLog(SessionHeader("export-hostile", 1_787_000_000_000, str(tmp_path)))
    log.append("session/title", {"title": SOURCE_TITLE, "messageSeqs": [], "source": {"kind": "user"}})
    for turn, entry in enumerate(CORPUS, start=1):
        log.append("user/message", user_message(f"prompt {turn}: {entry['text']}"))
        log.append("assistant/message", {"turn": turn, "step": 1, "message": assistant_message(
            [text_block(entry["text"])], MODEL_SOURCE)})
    log.append("assistant/message", {"turn": 99, "step": 1, "message": assistant_message(
        [text_block(BENIGN)], MODEL_SOURCE)})
    path = write_export(log, "html", tmp_path / "hostile.html")

    with watched_page(browser) as (page, watch):
        page.goto(path.as_uri())
        main = page.locator("main")
        expect(main.locator("section.answer")).to_have_count(len(CORPUS) + 1)
        expect(main).to_contain_text("see `<img src=x onerror=alert(2)>`")
        assert_benign_look(main)
        click_attack_links(page, main, watch)
        page.screenshot(path=str(artifact_path(request, "1-export")), full_page=True)
        found = assert_inert(page, main, watch, "exported HTML")
        assert found["elements"] > 300
        assert page.locator("script").count() == 0
        assert watch.errors == []
