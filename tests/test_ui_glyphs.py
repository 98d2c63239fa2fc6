"""Every symbol the UI shows has a glyph in DejaVu Sans, the font Debian's chromium falls back to.

A symbol outside the font (say "⏹", U+23F9) renders as an empty box on a stock Debian desktop, in light and
dark themes alike. The sources of what people read (the Python UI, its CSS, the labextension) are scanned for
symbols and punctuation beyond ASCII, and each is looked up in the font's character map (the copy of DejaVu Sans
matplotlib ships is the same font family Debian installs).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [*sorted((ROOT / "dsh_jupyter").rglob("*.py")), *sorted((ROOT / "dsh_jupyter" / "ui").rglob("*.css")),
           *sorted((ROOT / "labextension" / "src").rglob("*.ts")),
           *sorted((ROOT / "labextension" / "style").rglob("*.css"))]


def _symbols() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in SOURCES:
        for char in path.read_text(encoding="utf-8"):
            if ord(char) > 127 and unicodedata.category(char)[0] in "SP":
                found.setdefault(char, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_ui_symbol_has_a_glyph_in_dejavu_sans() -> None:
    ttlib = pytest.importorskip("fontTools.ttLib")
    matplotlib = pytest.importorskip("matplotlib")
    font = ttlib.TTFont(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"))
    covered = font.getBestCmap()
    symbols = _symbols()
    assert "■" in symbols and "✓" in symbols  # the scan sees the footer's marks
    missing = {f"{c} U+{ord(c):04X} {unicodedata.name(c, '?')}": sorted(set(p))[:3]
               for c, p in symbols.items() if ord(c) not in covered}
    assert missing == {}, "symbols without a glyph in Debian's fonts (an empty box on screen): " + repr(missing)
