"""In a real browser (JupyterLab): hidden characters are visible where a person decides.

The attack from the report, ``echo hello \\u202e; rm -rf ~ #\\u202c``, would read as ``echo hello # ~ fr- mr ;``
(a harmless comment) while bash runs the ``rm``. Here the approval card shows it as
``echo hello ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩`` with a warning that names both characters, offers no grant for it,
and has Deny focused, so Enter denies. A proposed cell edit with bidi text ("trojan source") shows the
same marks and warning on its proposal card, with Reject focused. The DOM text holds the marks and never the
raw U+202E. (The kernel's ``HOME`` is a throwaway folder, so even a wrong answer could not reach yours.)
The live chat panel shows a prompt's hidden characters as marks too, and no raw one anywhere in the panel.

Screenshots (``test-artifacts/``): the approval card and the proposal card, each in light and dark; the chat.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TIMEOUT_MS,
    JupyterServer,
    NotebookPage,
    artifact_path,
    finished_cell,
    serve,
    start_cell,
    use_theme,
    watched_page,
    write_notebook_cells,
)
from test_browser_approvals import question, tool_summary
from test_browser_workspace import proposal

PATH = "work/invisibles.ipynb"
ATTACK = "echo hello \u202e; rm -rf ~ #\u202c"
SHOWN = "echo hello ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩"
#: A replacement whose bidi isolates make the check read as a comment (the trojan-source trick).
TROJAN = 'access = "user"\nif access != "user\u202e \u2066# admin only\u2069 \u2066":\n    print("admin")'
#: A prompt typed into the chat panel, and how the panel shows it.
PROMPT = "Summarise Budget \u202eslx.exe and g\u200bit"
PROMPT_SHOWN = "Summarise Budget ⟨U+202E⟩slx.exe and g⟨U+200B⟩it"
TROJAN_SHOWN = 'if access != "user⟨U+202E⟩ ⟨U+2066⟩# admin only⟨U+2069⟩ ⟨U+2066⟩":'


def write_cells(path: Path, home: Path) -> None:
    write_notebook_cells(path, [
        (None, f"import os\nos.environ['HOME'] = {str(home)!r}\n%load_ext dsh_jupyter"),
        ("cell-access", 'access = "user"\nprint(access)'),
        (None, "%%dsh --no-interpolate\n/tool bash " + json.dumps({"command": ATTACK})),
        (None, "%%dsh --no-interpolate\n/tool notebook_edit "
               + json.dumps({"action": "replace", "cell_id": "cell-access", "source": TROJAN})),
        (None, "chat = %dsh chat\nchat"),
    ])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    def prepare(root: Path, _state: Path) -> None:
        home = root / "home"
        (home / "canary").mkdir(parents=True)
        write_cells(root / PATH, home)

    yield from serve("lab", tmp_path_factory, "invisibles", prepare)


def test_hidden_characters_are_marked_and_named_in_the_question_and_the_proposal(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, PATH).open()
        nb.run(0)

        # The approval card: marks in the command, the warning in words, no grant offered, Deny focused.
        output = start_cell(nb, 2)
        card = question(output)
        code = card.locator("pre")
        expect(code).to_have_text(SHOWN)
        expect(code.locator(".dsh-hidden-mark")).to_have_text(["⟨U+202E⟩", "⟨U+202C⟩"])
        warning = card.locator(".dsh-approval-warning")
        expect(warning).to_have_text(
            "This command contains 2 hidden characters (right-to-left override U+202E, pop directional formatting "
            "U+202C), shown as ⟨U+…⟩ marks: what runs is not what it looks like.")
        expect(card.locator("button")).to_have_text(["Allow once", "Allow bash for this session", "Deny"])
        expect(card.locator("button.dsh-approval-deny")).to_be_focused()
        text = card.inner_text()
        assert "\u202e" not in text and "\u202c" not in text and "hidden characters" in text
        card.scroll_into_view_if_needed()
        assert card.locator(".dsh-hidden-mark").first.evaluate("m => getComputedStyle(m).backgroundColor") not in (
            "rgba(0, 0, 0, 0)", "transparent"), "the marks are styled so a person notices them"
        both_themes(nb, request, card, "1-approval")
        card.locator("button.dsh-approval-deny").focus()
        page.keyboard.press("Enter")  # Deny, the focused answer
        output = finished_cell(nb, 2)
        summary = tool_summary(output, "echo hello")
        expect(summary).to_contain_text("refused by you")
        expect(summary).to_contain_text(SHOWN)
        assert "\u202e" not in output.inner_text()
        assert (server.root / "home" / "canary").is_dir()

        # The proposal card: the new source with marks, the warning, Reject focused.
        start_cell(nb, 3)
        card = proposal(nb)
        diff = card.locator(".dsh-proposal-diff")
        expect(diff).to_contain_text(TROJAN_SHOWN)
        expect(diff.locator(".dsh-hidden-mark")).to_have_count(4)
        expect(card.locator(".dsh-proposal-warning")).to_have_text(
            "This edit contains 4 hidden characters (right-to-left override U+202E, left-to-right isolate U+2066, "
            "pop directional isolate U+2069), shown as ⟨U+…⟩ marks: the cell would not be what it looks like.")
        expect(card.locator("button.dsh-proposal-reject")).to_be_focused()
        text = card.inner_text()
        assert "\u202e" not in text and "\u2066" not in text and "hidden characters" in text
        both_themes(nb, request, card, "2-proposal")
        card.locator("input.dsh-proposal-why").fill("hidden characters")
        card.locator("button.dsh-proposal-reject").click()
        output = finished_cell(nb, 3)
        expect(output).to_contain_text("hidden characters")
        assert 'access = "user"' in nb.source(1) and "admin" not in nb.source(1)

        assert watch.dialogs == []
        assert watch.errors == []


def test_the_live_chat_marks_hidden_characters(
    browser: Any, server: JupyterServer, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, PATH).open()
        nb.run(0)
        panel = nb.run(4).locator(".dsh-panel")
        area = panel.locator(".dsh-prompt-input")
        area.fill(PROMPT)
        area.press("Control+Enter")
        expect(panel.locator(".dsh-chat-user .dsh-chat-text")).to_have_text(PROMPT_SHOWN)
        expect(panel.locator(".dsh-chat-assistant").last).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
        expect(panel.locator(".dsh-chat-state")).to_have_text("idle", timeout=KERNEL_TIMEOUT_MS)
        shown = panel.locator(".dsh-chat").inner_text()
        assert "\u202e" not in shown and "\u200b" not in shown
        nb.screenshot(request, "1-chat")

        assert watch.dialogs == []
        assert watch.errors == []


def both_themes(nb: NotebookPage, request: pytest.FixtureRequest, card: Any, step: str) -> None:
    """Screenshots of ``card`` in the light theme, then the dark one; the light theme is back after."""
    card.scroll_into_view_if_needed()
    nb.page.screenshot(path=str(artifact_path(request, f"{step}-light")), clip=_around(card))
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        use_theme(nb, theme)
        if theme.endswith("Dark"):
            card.scroll_into_view_if_needed()
            nb.page.screenshot(path=str(artifact_path(request, f"{step}-dark")), clip=_around(card))


def _around(element: Any, margin: int = 12) -> dict[str, float]:
    box = element.bounding_box()
    assert box is not None, "the card is not on screen"
    return {"x": max(0.0, box["x"] - margin), "y": max(0.0, box["y"] - margin),
            "width": box["width"] + 2 * margin, "height": box["height"] + 2 * margin}
