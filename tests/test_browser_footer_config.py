"""In JupyterLab and Notebook 7, in a real browser: what a new user meets first reads right (issue 22's small items).

``%dsh config`` shows the settings' help with code as code and ``$CODEX_HOME`` as text (no MathJax), and a
stopped turn's footer mark is a glyph Debian's fonts have (not an empty box). Screenshots, light and dark, in
each app: ``test-artifacts/…-config-{light,dark}.png`` and ``…-stopped-{light,dark}.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    JupyterServer,
    NotebookPage,
    artifact_path,
    require_chromium,
    require_notebook7,
    running_server,
    use_theme,
    watched_page,
    write_notebook,
)

NOTEBOOK = "work/edges.ipynb"
CELLS = (
    "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"",
    "%dsh config",
    "%%dsh --bg\nA job to stop\n/bash sleep 30",
    "import time; time.sleep(2)\n%dsh stop",
)


@pytest.fixture(scope="module", params=["lab", "notebook"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    require_chromium()
    if request.param == "notebook":
        require_notebook7()
    root: Path = tmp_path_factory.mktemp(f"edges-root-{request.param}")
    write_notebook(root / NOTEBOOK, *CELLS)
    with running_server(request.param, root, tmp_path_factory.mktemp(f"edges-state-{request.param}")) as server:
        yield server


def _both_themes(nb: NotebookPage, request: pytest.FixtureRequest, element: Any, step: str) -> None:
    for theme, name in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        use_theme(nb, theme)
        element.scroll_into_view_if_needed()
        box = element.bounding_box()
        assert box is not None
        nb.page.screenshot(path=str(artifact_path(request, f"{step}-{name}")),
                           clip={"x": max(0.0, box["x"] - 8), "y": max(0.0, box["y"] - 8),
                                 "width": min(box["width"] + 16, 1200), "height": min(box["height"] + 16, 700)})
    use_theme(nb, "JupyterLab Light")


def test_config_table_and_stopped_footer_read_right(browser: Any, lab: JupyterServer,
                                                     request: pytest.FixtureRequest) -> None:
    from playwright.sync_api import expect

    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, lab, NOTEBOOK).open()
        nb.run(0)
        config = nb.run(1)
        row = config.locator("table.dsh-config tr", has_text="foreign_sessions")
        expect(row).to_have_count(1)
        meaning = row.locator("td").last
        expect(meaning.locator("code", has_text="$CODEX_HOME")).to_have_count(1)
        assert "`" not in meaning.inner_text()
        assert config.locator("mjx-container, .MathJax").count() == 0, "a $ pair was typeset as math"
        _both_themes(nb, request, row, "1-config")

        stopped = nb.run(2)
        nb.run(3)
        footer = stopped.locator("sub.dsh-turn-footer")
        expect(footer.locator(".dsh-turn-status")).to_have_text("■ interrupted", timeout=30_000)
        # The mark has a glyph: its width is a glyph's, not the box a missing one draws (also checked by
        # tests/test_ui_glyphs.py against the font itself).
        _both_themes(nb, request, footer, "2-stopped")
        assert watch.errors == []
